#pragma once
// The backend interface: raw memory in two tiers, copies, streams and events, and row-major
// GEMM (fp32, and bf16 A and B into fp32 C). Everything above device/ uses only this; allocations
// that should be counted go through a MemoryPool (memory_pool.hpp). Functor kernels run through
// parallel_for (launch.hpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/half.hpp"
#include "device/counters.hpp"
#include "device/epilogue.hpp"
#include "device/graph.hpp"
#include "device/stream.hpp"
#include "device/types.hpp"

namespace recmix::device {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  virtual std::string description() const = 0;  // for logs: "cpu (oneDNN GEMM + OpenMP, 2 threads)"
  virtual GemmLibrary gemm_library() const = 0;

  // Capabilities: code above device/ asks these, never kind().
  // Whether host code may read and write this tier's memory directly: always on the CPU backend,
  // only the host tier on CUDA and under the strict emulator. Code that is not a kernel, a GEMM,
  // a copy or a collective goes through copy() where this is false; the CPU-only fast paths
  // (fused kernels, host-side index work) are taken where it is true for Tier::device.
  virtual bool host_accessible(Tier tier) const = 0;
  // Whether kernels run on the host, on the calling thread and its helpers (the cpu backends),
  // rather than queued on a GPU.
  virtual bool runs_kernels_on_host() const = 0;
  // Whether host-run kernels take the decomposition a GPU takes (device/fine_grained.hpp): the
  // strict emulator, so that it runs what the GPU runs.
  virtual bool runs_fine_items() const { return false; }

  // The calls below are counted (counters()) and then passed to the backend's do_ functions.
  // Uncounted memory; nullptr never returned (throws DeviceError). 64-byte aligned at least.
  // Host-tier memory is pinned where the backend has such a thing (CUDA).
  void* allocate(std::size_t bytes, Tier tier);
  void deallocate(void* ptr, Tier tier) noexcept;
  // Copies between any two tiers, ordered on stream. A host side that is no host-tier allocation
  // of this backend is pageable memory: counted as such, and a copy from the device into it is a
  // host wait where the device tier is not host-accessible (CUDA returns once it has landed).
  void copy(void* dst, const void* src, std::size_t bytes, Stream& stream);
  void fill_zero(void* dst, std::size_t bytes, Stream& stream);

  // The job's device memory share (its device MemoryPool's capacity; 0: none), given before its
  // buffers are made. On CUDA each backend (each job) allocates from a stream-ordered pool of its
  // own, so that its frees never wait for the device, other jobs' work included
  // (cuda/job_memory.cuh); that pool keeps up to the share for reuse once freed.
  void set_device_memory_share(std::size_t bytes) { on_device_memory_share(bytes); }
  // Whether device memory comes from such a pool: CUDA, where the device has memory pools.
  virtual bool stream_ordered_memory() const { return false; }

  std::unique_ptr<Stream> create_stream();
  // The priority of the streams made from now on, on recmix's scale (a job's `priority`: 0 the
  // default, higher first). On CUDA a stream of priority p > 0 gets CUDA's priority -p, cut to the
  // device's range (cudaDeviceGetStreamPriorityRange: 0 down to -5 on recent GPUs, lower first),
  // so its blocks are scheduled ahead of the default streams' where both wait; p <= 0 is CUDA's
  // default. The CPU backends keep the number on the stream only.
  void set_stream_priority(int priority) { stream_priority_ = priority; }
  int stream_priority() const { return stream_priority_; }
  std::unique_ptr<Event> create_event();

  // Row-major: C[m x n] = alpha * op(A) * op(B) + beta * C, op(A) is m x k, op(B) is k x n;
  // lda/ldb/ldc are row strides of A, B, C as stored.
  void gemm(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) {
    counters_.launch();
    do_gemm(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  // gemm() and an epilogue (epilogue.hpp) in one launch: fused into the GEMM on CUDA (cuBLASLt),
  // a pass after it on the backends that run kernels on the host. `bias` is read (bias,
  // bias_relu: n values) or written (bias_gradient: m values).
  void gemm_epilogue(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, int ldb, float beta, float* c, int ldc, GemmEpilogue epilogue,
                     float* bias) {
    counters_.launch();
    do_gemm_epilogue(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue, bias);
  }
  // Whether gemm_epilogue is what this backend's GPU path takes: CUDA, and the strict emulator
  // that runs that path. The CPU backend keeps its own fused kernels (mlp/cpu/linear.hpp).
  virtual bool fuses_gemm_epilogues() const { return false; }
  // Whether the last gemm_epilogue ran fused into the GEMM (CUDA, where cuBLASLt had an algorithm).
  virtual bool last_epilogue_fused() const { return false; }

  // Row-major as gemm(), with A and B 16-bit floats of `type` (bf16 or fp16: raw 16-bit patterns,
  // core/half.hpp) and C, alpha and beta in fp32. A product of two bf16 values (8-bit
  // significands) or two fp16 values (11-bit) is exact in fp32; the products are summed in fp32.
  // With beta = 0, C is written without being read. ConfigError for type fp32.
  void gemm_half(Stream& stream, half::Storage type, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc) {
    counters_.launch();
    do_gemm_half(stream, type, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  // The math of gemm() from now on (types.hpp; fp32 to begin with): on CUDA cuBLAS's TF32
  // tensor-op math, on the CPU backends an emulation (the operands cut in scratch, then the fp32
  // GEMM), so that tests compare the two. gemm_half is not affected.
  void set_fp32_math(Fp32Math math) {
    fp32_math_ = math;
    on_fp32_math(math);
  }
  Fp32Math fp32_math() const { return fp32_math_; }

  // How the last gemm_half ran (types.hpp): the CPU backend's oneDNN library may have no matmul
  // of the type for a CPU, and then the call runs widened.
  virtual HalfGemmPath last_half_gemm_path() const { return HalfGemmPath::none; }

  // What the host has asked of this backend so far (counters.hpp). Kernel launchers outside
  // device/ count their launches with note_launch().
  DeviceCounters& counters() { return counters_; }
  const DeviceCounters& counters() const { return counters_; }
  void note_launch(std::uint64_t n = 1) { counters_.launch(n); }

  // Graphs (graph.hpp). Whether begin_capture works here: natively on CUDA, by recording under
  // the strict emulator; not on the CPU backend, whose fast paths run outside kernels.
  virtual bool supports_graphs() const { return false; }
  // Whether device.graphs = "auto" turns graphs on (device::graphs_by_default of its kind).
  bool graphs_by_default() const { return device::graphs_by_default(kind()); }
  // Starts capturing what this thread issues on `stream`. DeviceError when the backend has no
  // graphs or this thread already captures.
  void begin_capture(Stream& stream);
  // Ends the capture begun on `stream` by this thread and returns its graph, which must not
  // outlive this backend. DeviceError (and no graph) when a call was refused during the capture.
  std::unique_ptr<Graph> end_capture(Stream& stream);
  // Whether this thread is capturing `stream`, or anything, on this backend.
  bool capturing(const Stream& stream) const;
  bool capturing() const;
  // Throws DeviceError "<call> during graph capture ..." when this thread is capturing here.
  void refuse_in_capture(const char* call) const;

  // Runs a host-run kernel (the cpu backends) inside DeviceWork, or, while `stream` is being
  // captured, adds it to the recording. `work` is copied: it must hold what it needs by value.
  template <class Work>
  void run_host_kernel(Stream& stream, const Work& work);
  // Host work in `stream`'s order, on the backends whose kernels run on the host (a host node,
  // as cudaLaunchHostFunc makes one): it runs at once, since their work runs when issued, or,
  // while this thread captures `stream`, it is recorded and runs at each replay. Unlike a
  // kernel it runs outside DeviceWork and may call this backend (copies, waits). DeviceError on
  // a backend whose kernels run on a GPU. `task` must hold what it needs by value.
  void host_task(Stream& stream, std::function<void()> task);

  // An L2 persisting window (CUDA's access policy window): the kernels issued on `stream` from now
  // on, captured ones included, keep [ptr, ptr + bytes) of device memory in the part of the L2
  // set aside for persisting lines, where it fits. Returns the bytes the window covers (bytes cut
  // to the device's largest window); 0 clears it, and 0 comes back where the backend has no such
  // cache (the CPU backend). Not while capturing (DeviceError).
  // Whether set_l2_window does anything here: CUDA, and the strict emulator that emulates it.
  virtual bool has_l2_window() const { return false; }
  std::size_t set_l2_window(Stream& stream, const void* ptr, std::size_t bytes) {
    refuse_in_capture("set_l2_window");
    if (bytes > 0) check_device_memory(ptr, bytes, "the L2 window");
    return do_set_l2_window(stream, ptr, bytes);
  }

  // Threads the calling thread's parallel_for and GEMM use (CPU); ignored on CUDA.
  virtual void set_num_threads(int threads) = 0;
  virtual int num_threads() const = 0;

  // Backends that run kernels on the host (cpu and cpu-strict) bracket each host-run kernel with
  // these (through DeviceWork): the strict emulator opens its device memory to the host only in
  // between. They nest and may be called from several threads; no-ops elsewhere.
  virtual void begin_device_work() {}
  virtual void end_device_work() noexcept {}
  // The GPU this backend runs on (CUDA's numbering), -1 on the CPU backends.
  virtual int device_index() const { return -1; }
  // Names an allocation of this backend for error messages (MemoryPool passes its `what`).
  virtual void name_allocation(const void* /*ptr*/, const std::string& /*what*/) {}
  // Throws DeviceError naming `what` when [ptr, ptr + bytes) is not device memory of this
  // backend, where the backend can tell (the strict emulator); a no-op elsewhere.
  virtual void check_device_memory(const void* /*ptr*/, std::size_t /*bytes*/, const char* /*what*/) const {}

 protected:
  // Capture, for the backends that have graphs: native capture begins and ends here; an emulated
  // one is a recording that do_record appends to (each piece replayed with the launch's stream).
  virtual void do_begin_capture(Stream& stream);
  virtual std::unique_ptr<Graph> do_end_capture(Stream& stream);
  virtual void do_record(std::function<void(Stream&)> work);
  // What each backend implements, with the meaning of the counted call of the same name.
  virtual void* do_allocate(std::size_t bytes, Tier tier) = 0;
  virtual void do_deallocate(void* ptr, Tier tier) noexcept = 0;
  virtual void do_copy(void* dst, const void* src, std::size_t bytes, Stream& stream) = 0;
  virtual void do_fill_zero(void* dst, std::size_t bytes, Stream& stream) = 0;
  virtual std::unique_ptr<Stream> do_create_stream() = 0;
  virtual std::unique_ptr<Event> do_create_event() = 0;
  virtual void do_gemm(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc) = 0;
  virtual std::size_t do_set_l2_window(Stream&, const void*, std::size_t) { return 0; }
  // Told of set_fp32_math.
  virtual void on_fp32_math(Fp32Math) {}
  virtual void on_device_memory_share(std::size_t) {}
  // do_gemm, then the epilogue's pass (epilogue.hpp) as a host-run kernel: for the backends that
  // run kernels on the host; DeviceError elsewhere.
  virtual void do_gemm_epilogue(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
                                GemmEpilogue epilogue, float* bias);
  virtual void do_gemm_half(Stream& stream, half::Storage type, bool trans_a, bool trans_b, int m, int n, int k,
                            float alpha, const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb, float beta,
                            float* c, int ldc) = 0;

 private:
  // A refused call during a capture that cannot throw where it happens (deallocate).
  void note_refused(const char* call) noexcept;
  // The tier of the allocation holding ptr, or none when ptr is no memory of this backend's.
  std::optional<Tier> tier_of(const void* ptr) const;

  DeviceCounters counters_;
  Fp32Math fp32_math_ = Fp32Math::fp32;
  int stream_priority_ = 0;
  mutable std::mutex allocations_mutex_;
  std::map<std::uintptr_t, std::pair<std::size_t, Tier>> allocations_;  // base address -> bytes, tier
};

// True for the backends whose kernels run on the host (cpu and cpu-strict).
inline bool runs_kernels_on_host(const Backend& backend) { return backend.runs_kernels_on_host(); }
// Whether device memory is host memory: the CPU backend, where the CPU-only fast paths apply.
inline bool device_memory_is_host(const Backend& backend) { return backend.host_accessible(Tier::device); }

// Scope of one host-run kernel on `backend` (see Backend::begin_device_work).
class DeviceWork {
 public:
  explicit DeviceWork(Backend& backend) : backend_(backend) { backend_.begin_device_work(); }
  ~DeviceWork() { backend_.end_device_work(); }
  DeviceWork(const DeviceWork&) = delete;
  DeviceWork& operator=(const DeviceWork&) = delete;

 private:
  Backend& backend_;
};

template <class Work>
void Backend::run_host_kernel(Stream& stream, const Work& work) {
  if (capturing(stream)) {
    do_record([this, work](Stream&) {
      DeviceWork scope(*this);
      work();
    });
    return;
  }
  DeviceWork scope(*this);
  work();
}

// The largest L2 window the strict emulator takes (set_l2_window): an assumed GPU's, so that tests
// see a window cut to size.
inline constexpr std::size_t kStrictL2Window = std::size_t(64) << 20;

// The one place backends are chosen. cpu_strict takes threads and cpu_gemm as cpu does.
// Throws NotCompiledError for CUDA in a build without it, and
// for cpu_gemm = onednn in a build without oneDNN; DeviceError when CUDA is built but no GPU is
// present. cpu_gemm only applies to the CPU backend.
std::unique_ptr<Backend> make_backend(BackendKind kind, int threads = 1, CpuGemm cpu_gemm = CpuGemm::automatic);

// OpenBLAS's thread count is one number for the whole process (ENVIRONMENT.md). Several jobs in
// one process (recmix run) each with their own backend would keep resetting it; after this call
// CPU backends leave it at `threads` (set here) and their own thread counts apply to OpenMP,
// oneDNN and the dense replicas only. 0 undoes it (backends set it again, as for one job).
void pin_process_blas_threads(int threads);

// What CpuGemm::automatic resolves to in this build on this CPU.
GemmLibrary automatic_cpu_gemm();
bool onednn_compiled();
// Whether this CPU has AVX512_BF16, the instructions that multiply bf16 (x86-64 with GCC or
// Clang; false elsewhere). Without them oneDNN 2.6 emulates bf16 matmul on AVX-512 and has none
// below it.
bool cpu_has_avx512_bf16();

// True when this build has the CUDA backend and a GPU is visible.
bool cuda_device_available();
// GPUs visible to this process (0 without CUDA).
int cuda_device_count();
bool cuda_compiled();

}  // namespace recmix::device
