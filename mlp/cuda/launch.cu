// The CUDA launches of the mlp kernels: the same functors as on the CPU, run by the grid-stride
// launcher of device/cuda/launch.cuh.
#include "device/cuda/launch.cuh"
#include "mlp/launch.hpp"

namespace recmix::mlp::detail {

#define RECMIX_MLP_DEFINE_CUDA_LAUNCH(K)                                          \
  void cuda_launch(void* native_stream, kernels::Index n, const kernels::K& f) { \
    device::cuda::parallel_for(native_stream, n, f);                              \
  }
RECMIX_MLP_KERNELS(RECMIX_MLP_DEFINE_CUDA_LAUNCH)
#undef RECMIX_MLP_DEFINE_CUDA_LAUNCH

}  // namespace recmix::mlp::detail
