#pragma once
// RECMIX_HOST_DEVICE marks a function that runs on the host and, compiled by nvcc, on a GPU: the
// kernels written once as functors (device/launch.hpp) and the arithmetic they share (core/).
#if defined(__CUDACC__)
#define RECMIX_HOST_DEVICE __host__ __device__
#else
#define RECMIX_HOST_DEVICE
#endif
