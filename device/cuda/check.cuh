#pragma once
// RECMIX_CUDA_CHECK / RECMIX_CUBLAS_CHECK: turn a failed status into a DeviceError naming the
// call and the place. Only device/cuda and the NCCL communicator include this. A failed runtime
// call also leaves its error as the thread's last error; that is cleared here, so that the next
// kernel launch's cudaGetLastError() does not report a failure that was already thrown and caught
// (a call refused during graph capture, say) as its own.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

#define RECMIX_CUDA_CHECK(call)                                                                \
  do {                                                                                         \
    cudaError_t recmix_status_ = (call);                                                       \
    if (recmix_status_ != cudaSuccess) {                                                       \
      (void)cudaGetLastError();                                                                \
      throw ::recmix::DeviceError(std::string(#call) + " failed: " +                          \
                                  cudaGetErrorString(recmix_status_) + " (" + __FILE__ + ":" + \
                                  std::to_string(__LINE__) + ")");                             \
    }                                                                                          \
  } while (0)

#define RECMIX_CUBLAS_CHECK(call)                                                          \
  do {                                                                                     \
    cublasStatus_t recmix_status_ = (call);                                                \
    if (recmix_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      throw ::recmix::DeviceError(std::string(#call) + " failed: cuBLAS status " +         \
                                  std::to_string(static_cast<int>(recmix_status_)) + " (" + \
                                  __FILE__ + ":" + std::to_string(__LINE__) + ")");        \
  } while (0)
