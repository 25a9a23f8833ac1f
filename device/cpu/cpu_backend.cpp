// CPU backend: ordinary aligned memory for both tiers, OpenBLAS or oneDNN SGEMM (and bf16 GEMM),
// kernels on the issuing thread and its sleeping helpers (host_workers.hpp), streams that run
// work in submission order on the calling thread.
#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>
#ifdef RECMIX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#ifdef RECMIX_HAVE_ONEDNN
#include "device/cpu/onednn_bf16_gemm.hpp"
#endif

namespace recmix::device {
namespace {

std::atomic<int> pinned_blas_threads{0};

constexpr std::size_t kHugePage = std::size_t(2) << 20;  // x86-64's transparent huge page

class CpuStream final : public Stream {
 public:
  void do_synchronize() override {}
  void* native() override { return nullptr; }
};

class CpuEvent final : public Event {
 public:
  void do_record(Stream&) override {}
  void wait(Stream&) override {}
  bool query() override { return true; }
  void do_synchronize() override {}
};

bool cpu_has_avx512() {
#if defined(__GNUC__) && defined(__x86_64__)
  // libgcc checks that the OS saves the AVX-512 registers as well as CPUID.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// Copies the rows x cols matrix at `src` (row stride ld) into `dst` as fp32 through `convert`,
// rows packed (row stride cols): the GEMMs' operands in scratch.
template <class T, class Convert>
const float* pack(const T* src, int rows, int cols, int ld, std::vector<float>& dst, Convert convert) {
  dst.resize(static_cast<std::size_t>(rows) * cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      dst[static_cast<std::size_t>(i) * cols + j] = convert(src[static_cast<std::size_t>(i) * ld + j]);
  return dst.data();
}

// 16-bit floats of `type` widened to fp32: exact, fp32 holds every bf16 and fp16 value.
const float* widen(half::Storage type, const std::uint16_t* src, int rows, int cols, int ld, std::vector<float>& dst) {
  return pack(src, rows, cols, ld, dst, [type](std::uint16_t h) {
    return type == half::Storage::bf16 ? half::bf16_to_float(h) : half::fp16_to_float(h);
  });
}

// fp32 values cut to TF32 (core/half.hpp).
const float* cut_to_tf32(const float* src, int rows, int cols, int ld, std::vector<float>& dst) {
  return pack(src, rows, cols, ld, dst, [](float x) { return half::cut_to_tf32(x); });
}

GemmLibrary resolve(CpuGemm gemm) {
  switch (gemm) {
    case CpuGemm::openblas:
      return GemmLibrary::openblas;
    case CpuGemm::onednn:
      if (!onednn_compiled())
        throw NotCompiledError("the oneDNN GEMM was asked for, but recmix was built without oneDNN "
                               "(install libdnnl-dev and rebuild, or use the OpenBLAS GEMM)");
      return GemmLibrary::onednn;
    case CpuGemm::automatic:
      break;
  }
  return automatic_cpu_gemm();
}

// Multiply-adds from which a oneDNN GEMM uses the backend's threads (the 512 -> 256 layer at 128
// rows); below, one thread.
constexpr std::int64_t kOneDnnThreadedMacs = std::int64_t(1) << 24;

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, CpuGemm gemm) : gemm_(resolve(gemm)) { set_num_threads(threads); }

  BackendKind kind() const override { return BackendKind::cpu; }
  GemmLibrary gemm_library() const override { return gemm_; }
  bool host_accessible(Tier) const override { return true; }
  bool runs_kernels_on_host() const override { return true; }
  std::string description() const override {
    return fmt::format("cpu ({} GEMM, {} thread{})", to_string(gemm_), threads_, threads_ == 1 ? "" : "s");
  }

  void* do_allocate(std::size_t bytes, Tier tier) override {
    // Large buffers (activations, weights, a table) start on a 2 MiB boundary and ask for
    // transparent huge pages (a hint; Linux's default is "madvise"): a GEMM that walks a 28 MB
    // operand row by row otherwise touches a new 4 KiB page, and a TLB entry, every row.
    const bool large = bytes >= kHugePage;
    const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = nullptr;
    if (posix_memalign(&p, large ? kHugePage : 64, rounded) != 0) p = nullptr;
    if (p && large) madvise(p, rounded, MADV_HUGEPAGE);
    if (!p)
      throw OutOfMemoryError(fmt::format("host allocation of {} failed ({} tier)",
                                         format_bytes(bytes), to_string(tier)));
    return p;
  }
  void do_deallocate(void* ptr, Tier) noexcept override { std::free(ptr); }
  void do_copy(void* dst, const void* src, std::size_t bytes, Stream&) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void do_fill_zero(void* dst, std::size_t bytes, Stream&) override {
    if (bytes) std::memset(dst, 0, bytes);
  }
  std::unique_ptr<Stream> do_create_stream() override { return std::make_unique<CpuStream>(); }
  std::unique_ptr<Event> do_create_event() override { return std::make_unique<CpuEvent>(); }

  void do_gemm(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) override {
    if (fp32_math() == Fp32Math::tf32 && m > 0 && n > 0 && k > 0) {
      // TF32 emulated: the operands cut to TF32 in scratch, then the fp32 GEMM. Each product of
      // two cut values (11-bit significands) is exact in fp32, so this computes what TF32 tensor
      // cores do, up to the order of the additions.
      const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
      const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
      const float* at = cut_to_tf32(a, a_rows, a_cols, lda, widened_a_);
      const float* bt = cut_to_tf32(b, b_rows, b_cols, ldb, widened_b_);
      gemm_fp32(stream, trans_a, trans_b, m, n, k, alpha, at, a_cols, bt, b_cols, beta, c, ldc);
      return;
    }
    gemm_fp32(stream, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  // The fp32 GEMM, whatever fp32_math() says.
  void gemm_fp32(Stream&, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
    if (m == 0 || n == 0) return;
    // A single row or column of C is a matrix-vector product: sgemv, about 4x faster than sgemm
    // on the 256 x 1 layer of the Kaggle DLRM at 1024 rows (sgemm packs both operands). With
    // beta = 0, C is cleared first so that nothing read from it (NaN) survives.
    if ((n == 1 || m == 1) && k > 0) {
      if (beta == 0.f) {
        if (n == 1)
          for (int i = 0; i < m; ++i) c[static_cast<std::size_t>(i) * ldc] = 0.f;
        else
          std::memset(c, 0, sizeof(float) * static_cast<std::size_t>(n));
      }
      if (n == 1) {  // c[i * ldc] = alpha op(A)[i, :] . op(B)[:, 0] + beta c
        const int inc_b = trans_b ? 1 : ldb;  // op(B) column: B [1 x k] or B [k x 1]
        if (trans_a)  // A is [k x m]
          cblas_sgemv(CblasRowMajor, CblasTrans, k, m, alpha, a, lda, b, inc_b, beta, c, ldc);
        else
          cblas_sgemv(CblasRowMajor, CblasNoTrans, m, k, alpha, a, lda, b, inc_b, beta, c, ldc);
      } else {  // c[j] = alpha op(A)[0, :] . op(B)[:, j] + beta c, i.e. C^T = op(B)^T op(A)^T
        const int inc_a = trans_a ? lda : 1;  // op(A) row: A [k x 1] or A [1 x k]
        if (trans_b)  // B is [n x k]
          cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, inc_a, beta, c, 1);
        else
          cblas_sgemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, inc_a, beta, c, 1);
      }
      return;
    }
#ifdef RECMIX_HAVE_ONEDNN
    // oneDNN for every GEMM but outer products (k below 8: 256 -> 1's input gradient takes 1.8x
    // as long there as in OpenBLAS). Its threads are OpenMP's, whose count belongs to the calling
    // thread: set it here, as replicas call from threads of their own. A small GEMM runs on one
    // thread whatever the backend's count: waking OpenMP's threads costs more than they save
    // there (the step without replicas at batch 16 on 2 threads: 25k samples/s with every GEMM
    // threaded, 60-65k with these on one thread). Sending the small ones to OpenBLAS instead was
    // worse: the two libraries' thread pools took turns (bench/RESULTS.md).
    if (gemm_ == GemmLibrary::onednn && k >= 8) {
      set_onednn_threads(m, n, k);
      const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                                              ldb, beta, c, ldc);
      if (status != dnnl_success)
        throw DeviceError(fmt::format("oneDNN sgemm ({} x {} x {}) failed with status {}", m, n, k,
                                      static_cast<int>(status)));
      return;
    }
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  void do_gemm_half(Stream& stream, half::Storage type, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb, float beta, float* c,
                 int ldc) override {
    if (type == half::Storage::fp32) throw ConfigError("gemm_half: the operand type must be bf16 or fp16");
    if (m == 0 || n == 0) return;
#ifdef RECMIX_HAVE_ONEDNN
    // oneDNN's bf16 matmul, with the fp32 GEMM's thread rule (small GEMMs on one thread). oneDNN
    // 2.6 has no fp16 matmul on CPUs: fp16 runs widened.
    if (gemm_ == GemmLibrary::onednn && k > 0 && type == half::Storage::bf16) {
      const int threads = set_onednn_threads(m, n, k);
      if (onednn_bf16_.run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)) {
        last_half_path_ = cpu::OneDnnBf16Gemm::native() ? HalfGemmPath::native : HalfGemmPath::emulated;
        return;
      }
    }
#endif
    // Widened: A and B to fp32 in scratch, then the fp32 GEMM. Widening is exact, and so is each
    // product of two widened values (8- or 11-bit significands), so this computes what a 16-bit
    // GEMM accumulating in fp32 does, up to the order of the additions.
    const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const float* a32 = widen(type, a, a_rows, a_cols, lda, widened_a_);
    const float* b32 = widen(type, b, b_rows, b_cols, ldb, widened_b_);
    gemm_fp32(stream, trans_a, trans_b, m, n, k, alpha, a32, std::max(1, a_cols), b32, std::max(1, b_cols), beta, c,
              ldc);
    last_half_path_ = HalfGemmPath::widened;
  }
  HalfGemmPath last_half_gemm_path() const override { return last_half_path_; }

#ifdef RECMIX_HAVE_ONEDNN
  // The calling thread's OpenMP count for a oneDNN GEMM of m x n x k: one thread below
  // kOneDnnThreadedMacs, the backend's count above. Returns it.
  int set_onednn_threads(int m, int n, int k) const {
    const int threads = std::int64_t(m) * n * k < kOneDnnThreadedMacs ? 1 : threads_;
    if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
    return threads;
  }
#endif

  void set_num_threads(int threads) override {
    threads_ = std::max(1, threads);
    // OpenBLAS's count is process-wide (ENVIRONMENT.md); OpenMP's is per calling thread.
    if (pinned_blas_threads.load() == 0) openblas_set_num_threads(threads_);
    omp_set_num_threads(threads_);
  }
  int num_threads() const override { return threads_; }

 private:
  GemmLibrary gemm_;
  int threads_ = 1;
  // gemm_half's state. The backend is used by one thread at a time (one per job; each dense
  // replica has a backend of its own), so none of it is locked.
  std::vector<float> widened_a_, widened_b_;
  HalfGemmPath last_half_path_ = HalfGemmPath::none;
#ifdef RECMIX_HAVE_ONEDNN
  cpu::OneDnnBf16Gemm onednn_bf16_;
#endif
};

}  // namespace

void pin_process_blas_threads(int threads) {
  pinned_blas_threads.store(std::max(0, threads));
  if (threads > 0) openblas_set_num_threads(threads);
}

bool onednn_compiled() {
#ifdef RECMIX_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

GemmLibrary automatic_cpu_gemm() {
  static const GemmLibrary choice =
      onednn_compiled() && cpu_has_avx512() ? GemmLibrary::onednn : GemmLibrary::openblas;
  return choice;
}

std::unique_ptr<Backend> make_cpu_backend(int threads, CpuGemm gemm) {
  return std::make_unique<CpuBackend>(threads, gemm);
}

}  // namespace recmix::device
