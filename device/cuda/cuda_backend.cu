// CUDA backend: device memory from the job's own stream-ordered pool (job_memory.cuh) and pinned
// host memory, cuBLAS SGEMM and bf16 GEMM, cuBLASLt GEMMs with fused epilogues (lt_gemm.cuh), streams and
// events, and graphs captured from a stream in CUDA's thread-local capture mode (device/graph.hpp).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/backend.hpp"
#include "device/cuda/check.cuh"
#include "device/cuda/cublas_library.hpp"
#include "device/cuda/job_memory.cuh"
#include "device/cuda/launch.cuh"
#include "device/cuda/lt_gemm.cuh"

namespace recmix::device {
using cuda::cublas;
namespace {

// CUDA's priority for a stream of recmix priority p (Backend::set_stream_priority): -p within the
// device's range, the default (its least) for p <= 0.
int cuda_stream_priority(int p) {
  int least = 0, greatest = 0;
  RECMIX_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return p <= 0 ? least : std::max(greatest, least - p);
}

// A stream of the backend's, listed among its live streams (cuda::LiveStreams) while it lives, so
// that the job's frees are ordered after its work. Its end waits for its work first.
class CudaStream final : public Stream {
 public:
  CudaStream(int priority, std::shared_ptr<cuda::LiveStreams> live) : live_(std::move(live)) {
    RECMIX_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, cuda_stream_priority(priority)));
    live_->add(stream_);
  }
  ~CudaStream() override {
    cudaStreamSynchronize(stream_);
    live_->remove(stream_);
    cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }
  void do_synchronize() override { RECMIX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void* native() override { return stream_; }

 private:
  std::shared_ptr<cuda::LiveStreams> live_;
  cudaStream_t stream_{};
};

class CudaEvent final : public Event {
 public:
  CudaEvent() { RECMIX_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void do_record(Stream& s) override {
    RECMIX_CUDA_CHECK(cudaEventRecord(event_, static_cast<cudaStream_t>(s.native())));
  }
  void wait(Stream& s) override {
    RECMIX_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.native()), event_, 0));
  }
  bool query() override {
    cudaError_t st = cudaEventQuery(event_);
    if (st == cudaErrorNotReady) return false;
    RECMIX_CUDA_CHECK(st);
    return true;
  }
  void do_synchronize() override { RECMIX_CUDA_CHECK(cudaEventSynchronize(event_)); }

 private:
  cudaEvent_t event_{};
};

class CudaGraph final : public Graph {
 public:
  explicit CudaGraph(cudaGraph_t graph) {
    std::size_t nodes = 0;
    RECMIX_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    nodes_ = static_cast<std::int64_t>(nodes);
    const cudaError_t st = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    RECMIX_CUDA_CHECK(st);
  }
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  std::int64_t nodes() const override { return nodes_; }

 protected:
  void do_launch(Stream& s) override {
    RECMIX_CUDA_CHECK(cudaGraphLaunch(exec_, static_cast<cudaStream_t>(s.native())));
  }

 private:
  cudaGraphExec_t exec_{};
  std::int64_t nodes_ = 0;
};

// cuBLAS's workspace, owned here so that a captured GEMM allocates nothing and every graph uses
// the same buffer (cuBLAS documents 32 MiB for Hopper; cublasSetStream drops back to its own
// pool, so the workspace is set again after each stream change).
constexpr std::size_t kCublasWorkspace = std::size_t(32) << 20;

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess || count == 0)
      throw DeviceError(std::string("no CUDA device available (") +
                        (st == cudaSuccess ? "0 devices" : cudaGetErrorString(st)) + ")");
    RECMIX_CUDA_CHECK(cudaGetDevice(&device_));
    memory_ = std::make_unique<cuda::JobMemory>(device_, live_streams_);
    RECMIX_CUBLAS_CHECK(cublas().create(&handle_));
    workspace_ = memory_->allocate(kCublasWorkspace);
    lt_ = std::make_unique<cuda::LtGemm>(workspace_, kCublasWorkspace);
  }
  ~CudaBackend() override {
    lt_.reset();
    if (handle_) cublas().destroy(handle_);
    if (workspace_) memory_->deallocate(workspace_);
  }
  // The job's pool keeps up to its share for reuse once freed (cuda/job_memory.cuh).
  void on_device_memory_share(std::size_t bytes) override { memory_->keep_up_to(bytes); }
  bool stream_ordered_memory() const override { return memory_->stream_ordered(); }
  bool supports_graphs() const override { return true; }
  // TF32 tensor-op math for cublasSgemm (the operands' significands rounded to 10 bits, fp32
  // sums; measured on an H200: tests/device/test_tf32_gemm.cpp).
  void on_fp32_math(Fp32Math math) override {
    RECMIX_CUBLAS_CHECK(
        cublas().set_math_mode(handle_, math == Fp32Math::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }
  void do_begin_capture(Stream& s) override {
    RECMIX_CUDA_CHECK(
        cudaStreamBeginCapture(static_cast<cudaStream_t>(s.native()), cudaStreamCaptureModeThreadLocal));
  }
  std::unique_ptr<Graph> do_end_capture(Stream& s) override {
    cudaGraph_t graph{};
    RECMIX_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(s.native()), &graph));
    if (auto w = windows_.find(s.native()); w != windows_.end()) apply_window(graph, w->second);
    return std::make_unique<CudaGraph>(graph);
  }
  // The stream's L2 window on every kernel node of a graph captured from it, so that a replay
  // keeps the window whether or not capture carried the stream's attribute into its nodes.
  static void apply_window(cudaGraph_t graph, const cudaAccessPolicyWindow& window) {
    std::size_t count = 0;
    RECMIX_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    RECMIX_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    cudaKernelNodeAttrValue value{};
    value.accessPolicyWindow = window;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      RECMIX_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type == cudaGraphNodeTypeKernel)
        RECMIX_CUDA_CHECK(cudaGraphKernelNodeSetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow, &value));
    }
  }
  // The window over [ptr, ptr + bytes) cut to the device's largest, its lines persisting at a hit
  // ratio of (persisting L2) / (window) up to 1. The persisting part of the L2 is set to the
  // device's maximum the first time: a device-wide limit, shared by every job on the GPU.
  bool has_l2_window() const override { return true; }
  std::size_t do_set_l2_window(Stream& s, const void* ptr, std::size_t bytes) override {
    int max_persisting = 0, max_window = 0;
    RECMIX_CUDA_CHECK(cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, device_));
    RECMIX_CUDA_CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device_));
    cudaStreamAttrValue value{};
    std::size_t covered = 0;
    if (bytes > 0 && max_persisting > 0 && max_window > 0) {
      std::size_t limit = 0;
      RECMIX_CUDA_CHECK(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
      if (limit < static_cast<std::size_t>(max_persisting))
        RECMIX_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, max_persisting));
      covered = std::min<std::size_t>(bytes, max_window);
      value.accessPolicyWindow.base_ptr = const_cast<void*>(ptr);
      value.accessPolicyWindow.num_bytes = covered;
      value.accessPolicyWindow.hitRatio = std::min(1.0f, static_cast<float>(max_persisting) / covered);
      value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
      value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    }
    RECMIX_CUDA_CHECK(
        cudaStreamSetAttribute(static_cast<cudaStream_t>(s.native()), cudaStreamAttributeAccessPolicyWindow, &value));
    if (covered > 0)
      windows_[s.native()] = value.accessPolicyWindow;
    else
      windows_.erase(s.native());
    return covered;
  }
  BackendKind kind() const override { return BackendKind::cuda; }
  GemmLibrary gemm_library() const override { return GemmLibrary::cublas; }
  bool host_accessible(Tier tier) const override { return tier == Tier::host; }
  bool runs_kernels_on_host() const override { return false; }
  bool runs_fine_items() const override { return true; }
  int device_index() const override { return device_; }
  std::string description() const override {
    cudaDeviceProp prop{};
    int dev = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&prop, dev);
    return "cuda (device " + std::to_string(dev) + ": " + prop.name + ")";
  }
  void* do_allocate(std::size_t bytes, Tier tier) override {
    void* p = nullptr;
    if (tier == Tier::device) return memory_->allocate(bytes);
    RECMIX_CUDA_CHECK(cudaMallocHost(&p, std::max<std::size_t>(bytes, 1)));
    return p;
  }
  // A free refused during a capture (noted by Backend::deallocate, reported at end_capture) must
  // not stay behind as the thread's last error for the next launch to report.
  // Device memory goes back to the job's pool in stream order (no wait on the device). Pinned host
  // memory is freed at once: cudaFreeHost may wait for the device, which the jobs' setup and end
  // only do.
  void do_deallocate(void* ptr, Tier tier) noexcept override {
    if (tier == Tier::device) return memory_->deallocate(ptr);
    if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
  }
  void do_copy(void* dst, const void* src, std::size_t bytes, Stream& s) override {
    RECMIX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                      static_cast<cudaStream_t>(s.native())));
  }
  void do_fill_zero(void* dst, std::size_t bytes, Stream& s) override {
    RECMIX_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(s.native())));
  }
  std::unique_ptr<Stream> do_create_stream() override {
    return std::make_unique<CudaStream>(stream_priority(), live_streams_);
  }
  std::unique_ptr<Event> do_create_event() override { return std::make_unique<CudaEvent>(); }

  void do_gemm(Stream& s, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            int lda, const float* b, int ldb, float beta, float* c, int ldc) override {
    if (m == 0 || n == 0) return;
    use_stream(s);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    RECMIX_CUBLAS_CHECK(cublas().sgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                    lda, &beta, c, ldc));
  }
  void do_gemm_half(Stream& s, half::Storage type, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb, float beta, float* c,
                 int ldc) override {
    if (type == half::Storage::fp32) throw ConfigError("gemm_half: the operand type must be bf16 or fp16");
    const cudaDataType_t in = type == half::Storage::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    if (m == 0 || n == 0) return;
    use_stream(s);
    // Operands swapped as in gemm. 16-bit A and B, fp32 C, products summed in fp32.
    RECMIX_CUBLAS_CHECK(cublas().gemm_ex(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     n, m, k, &alpha, b, in, ldb, a, in, lda, &beta, c, CUDA_R_32F, ldc,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    last_half_path_ = HalfGemmPath::native;  // cuBLAS multiplies 16-bit values on the GPU itself
  }
  HalfGemmPath last_half_gemm_path() const override { return last_half_path_; }

  bool fuses_gemm_epilogues() const override { return true; }
  bool last_epilogue_fused() const override { return last_epilogue_fused_; }
  // cuBLASLt with the epilogue fused where it has an algorithm for the call; else cublasSgemm and
  // the epilogue's functor as a kernel after it (device/epilogue.hpp).
  void do_gemm_epilogue(Stream& s, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                        int lda, const float* b, int ldb, float beta, float* c, int ldc, GemmEpilogue epilogue,
                        float* bias) override {
    if (m == 0 || n == 0) return;
    const auto stream = static_cast<cudaStream_t>(s.native());
    last_epilogue_fused_ = lt_->run(stream, fp32_math() == Fp32Math::tf32, trans_a, trans_b, m, n, k, alpha, a, lda,
                                    b, ldb, beta, c, ldc, epilogue, bias);
    if (last_epilogue_fused_) return;
    do_gemm(s, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (epilogue == GemmEpilogue::bias_gradient)
      cuda::parallel_for(stream, m, epilogue::RowSums{a, k, lda, trans_a, bias});
    else if (epilogue != GemmEpilogue::none)
      cuda::parallel_for(stream, static_cast<std::int64_t>(m) * n,
                         epilogue::AddBias{c, bias, n, ldc, epilogue == GemmEpilogue::bias_relu});
  }

  void set_num_threads(int threads) override { threads_ = threads; }
  int num_threads() const override { return threads_; }

 private:
  // Points cuBLAS at stream s, with this backend's workspace (a no-op when it is there already).
  void use_stream(Stream& s) {
    const auto stream = static_cast<cudaStream_t>(s.native());
    if (workspace_set_ && stream == cublas_stream_) return;
    RECMIX_CUBLAS_CHECK(cublas().set_stream(handle_, stream));
    RECMIX_CUBLAS_CHECK(cublas().set_workspace(handle_, workspace_, kCublasWorkspace));
    cublas_stream_ = stream;
    workspace_set_ = true;
  }

  // Declared first, so destroyed last: the streams' list, then the pool every buffer came from.
  std::shared_ptr<cuda::LiveStreams> live_streams_ = std::make_shared<cuda::LiveStreams>();
  std::unique_ptr<cuda::JobMemory> memory_;
  cublasHandle_t handle_{};
  void* workspace_ = nullptr;
  cudaStream_t cublas_stream_{};
  bool workspace_set_ = false;
  int device_ = 0;
  int threads_ = 1;
  HalfGemmPath last_half_path_ = HalfGemmPath::none;
  std::unique_ptr<cuda::LtGemm> lt_;
  bool last_epilogue_fused_ = false;
  std::map<void*, cudaAccessPolicyWindow> windows_;  // native stream -> its L2 window
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int) { return std::make_unique<CudaBackend>(); }

bool cuda_compiled() { return true; }

bool cuda_device_available() { return cuda_device_count() > 0; }

int cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

}  // namespace recmix::device
