// The one place a backend is chosen.
#include "core/error.hpp"
#include "device/backend.hpp"

namespace recmix::device {

std::unique_ptr<Backend> make_cpu_backend(int threads, CpuGemm gemm);
std::unique_ptr<Backend> make_cuda_backend(int threads);  // cuda/ or the stub
std::unique_ptr<Backend> make_strict_backend(int threads, CpuGemm gemm);

std::unique_ptr<Backend> make_backend(BackendKind kind, int threads, CpuGemm cpu_gemm) {
  switch (kind) {
    case BackendKind::cpu:
      return make_cpu_backend(threads, cpu_gemm);
    case BackendKind::cuda:
      return make_cuda_backend(threads);
    case BackendKind::cpu_strict:
      return make_strict_backend(threads, cpu_gemm);
  }
  throw DeviceError("unknown backend kind");
}

}  // namespace recmix::device
