// Built without the CUDA toolkit: launching an mlp kernel on CUDA fails with one clear error.
#include "core/error.hpp"
#include "mlp/launch.hpp"

namespace recmix::mlp::detail {

#define RECMIX_MLP_DEFINE_CUDA_STUB(K)                                    \
  void cuda_launch(void*, kernels::Index, const kernels::K&) {           \
    throw NotCompiledError("mlp kernel " #K ": recmix was built without CUDA"); \
  }
RECMIX_MLP_KERNELS(RECMIX_MLP_DEFINE_CUDA_STUB)
#undef RECMIX_MLP_DEFINE_CUDA_STUB

}  // namespace recmix::mlp::detail
