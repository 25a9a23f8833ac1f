// Built when the CUDA toolkit is absent: every CUDA entry point fails with one clear error.
#include "core/error.hpp"
#include "device/backend.hpp"

namespace recmix::device {

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw NotCompiledError("the CUDA backend is not available: recmix was built without CUDA");
}
bool cuda_compiled() { return false; }
bool cuda_device_available() { return false; }
int cuda_device_count() { return 0; }

}  // namespace recmix::device
