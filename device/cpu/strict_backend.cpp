// The strict device emulator (device.kind = "cpu-strict"): a CPU backend whose device memory host
// code cannot touch. Kernels, GEMMs and copies run on the host as on the CPU backend, but the
// code above takes the CUDA paths (it sees a backend whose device tier is not host-accessible),
// device allocations live in a per-backend arena that is PROT_NONE except while this backend
// works on it (strict_arena.hpp), and copies to host memory become visible only when their
// stream (or an event recorded after them) is synchronised, as with cudaMemcpyAsync: until then
// the destination holds 0xff bytes. A test backend: every operation pays two mprotect calls.
//
// Graphs are emulated (graph.hpp): while a stream is captured, each piece of work issued on it
// is recorded as a closure holding its arguments as they were at capture, and a replay runs the
// closures in order. What capture would freeze on a GPU is frozen here too.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/cpu/strict_arena.hpp"
#include "device/memory_pool.hpp"

namespace recmix::device {

std::unique_ptr<Backend> make_cpu_backend(int threads, CpuGemm gemm);

namespace {

// Address space each strict backend reserves for its device memory (no memory until used).
constexpr std::size_t kArenaReserve = std::size_t(64) << 30;

// Copies into host memory waiting for their stream's synchronisation: the source as it was when
// the copy was issued (later work on the stream may overwrite it, as stream order allows).
struct PendingCopy {
  void* dst;
  std::vector<char> data;
};

// A stream's copies into host memory not yet visible. Shared with the events recorded on the
// stream, which may outlive it (a stream destroyed lands its copies first).
struct PendingCopies {
  std::vector<PendingCopy> copies;
  void land() {
    for (auto& p : copies) std::memcpy(p.dst, p.data.data(), p.data.size());
    copies.clear();
  }
};

class StrictStream final : public Stream {
 public:
  ~StrictStream() override { do_synchronize(); }
  void do_synchronize() override { pending_->land(); }
  const std::shared_ptr<PendingCopies>& pending() const { return pending_; }
  void* native() override { return nullptr; }
  // Stream order: a copy reading host memory that an earlier copy on this stream writes sees it.
  void order_host_read(const void* src, std::size_t bytes) {
    const char* s = static_cast<const char*>(src);
    for (auto& p : pending_->copies) {
      const char* d = static_cast<const char*>(p.dst);
      if (s < d + p.data.size() && d < s + bytes) {
        pending_->land();  // stream order, not a host wait
        return;
      }
    }
  }
  void defer(void* dst, const void* src, std::size_t bytes) {
    PendingCopy p{dst, std::vector<char>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes)};
    std::memset(dst, 0xff, bytes);
    pending_->copies.push_back(std::move(p));
  }

 private:
  std::shared_ptr<PendingCopies> pending_ = std::make_shared<PendingCopies>();
};

class StrictEvent final : public Event {
 public:
  void do_record(Stream& stream) override { pending_ = static_cast<StrictStream&>(stream).pending(); }
  void wait(Stream&) override {}  // work runs at once; only host-visible copies wait
  bool query() override {  // not a wait: the pending copies simply land
    do_synchronize();
    return true;
  }
  void do_synchronize() override {
    if (pending_) pending_->land();
  }

 private:
  std::shared_ptr<PendingCopies> pending_;
};

// A recording, replayed in order on the launch's stream.
class RecordedGraph final : public Graph {
 public:
  explicit RecordedGraph(std::vector<std::function<void(Stream&)>> work) : work_(std::move(work)) {}
  std::int64_t nodes() const override { return static_cast<std::int64_t>(work_.size()); }

 protected:
  void do_launch(Stream& stream) override {
    for (auto& w : work_) w(stream);
  }

 private:
  std::vector<std::function<void(Stream&)>> work_;
};

class StrictBackend final : public Backend {
 public:
  StrictBackend(int threads, CpuGemm gemm) : host_(make_cpu_backend(threads, gemm)), arena_(kArenaReserve) {}

  BackendKind kind() const override { return BackendKind::cpu_strict; }
  GemmLibrary gemm_library() const override { return host_->gemm_library(); }
  std::string description() const override {
    return fmt::format("cpu-strict (device emulator: protected device memory; {} GEMM, {} thread{})",
                       to_string(gemm_library()), num_threads(), num_threads() == 1 ? "" : "s");
  }
  bool host_accessible(Tier tier) const override { return tier == Tier::host; }
  bool runs_kernels_on_host() const override { return true; }
  bool runs_fine_items() const override { return true; }
  // The GPU path's GEMMs with epilogues, emulated (Backend::do_gemm_epilogue).
  bool fuses_gemm_epilogues() const override { return true; }
  // An L2 window changes no result: the emulator takes it as a GPU whose largest window is
  // kStrictL2Window would (the range was checked to be its device memory).
  bool has_l2_window() const override { return true; }
  std::size_t do_set_l2_window(Stream&, const void*, std::size_t bytes) override {
    return std::min<std::size_t>(bytes, kStrictL2Window);
  }

  void* do_allocate(std::size_t bytes, Tier tier) override {
    if (tier == Tier::device) return arena_.allocate(bytes);
    return host_->allocate(bytes, tier);
  }
  void do_deallocate(void* ptr, Tier tier) noexcept override {
    if (tier == Tier::device)
      arena_.deallocate(ptr);
    else
      host_->deallocate(ptr, tier);
  }
  void name_allocation(const void* ptr, const std::string& what) override {
    if (arena_.contains(ptr)) arena_.name(ptr, what);
  }
  void check_device_memory(const void* ptr, std::size_t bytes, const char* what) const override {
    if (bytes == 0) return;
    if (!arena_.contains(ptr))
      throw DeviceError(fmt::format("{}: {} is host memory where device memory is required (cpu-strict)", what, ptr));
    check_range(ptr, bytes, what);
  }

  bool supports_graphs() const override { return true; }
  void do_begin_capture(Stream&) override { recording_.clear(); }
  std::unique_ptr<Graph> do_end_capture(Stream&) override {
    return std::make_unique<RecordedGraph>(std::exchange(recording_, {}));
  }
  void do_record(std::function<void(Stream&)> work) override { recording_.push_back(std::move(work)); }

  void do_copy(void* dst, const void* src, std::size_t bytes, Stream& stream) override {
    if (bytes == 0) return;
    check_range(dst, bytes, "copy destination");
    check_range(src, bytes, "copy source");
    if (capturing(stream)) {  // the source is read at each replay, as a captured copy's is
      do_record([this, dst, src, bytes](Stream& s) { do_copy(dst, src, bytes, s); });
      return;
    }
    auto& strict_stream = static_cast<StrictStream&>(stream);
    DeviceWork work(*this);
    if (!arena_.contains(src)) strict_stream.order_host_read(src, bytes);
    if (arena_.contains(src) && !arena_.contains(dst))
      strict_stream.defer(dst, src, bytes);
    else
      std::memmove(dst, src, bytes);
  }
  void do_fill_zero(void* dst, std::size_t bytes, Stream& stream) override {
    if (bytes == 0) return;
    check_range(dst, bytes, "fill_zero");
    if (capturing(stream)) {
      do_record([this, dst, bytes](Stream& s) { do_fill_zero(dst, bytes, s); });
      return;
    }
    DeviceWork work(*this);
    std::memset(dst, 0, bytes);
  }
  std::unique_ptr<Stream> do_create_stream() override { return std::make_unique<StrictStream>(); }
  std::unique_ptr<Event> do_create_event() override { return std::make_unique<StrictEvent>(); }

  void do_gemm(Stream& stream, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) override {
    if (capturing(stream)) {
      do_record([=, this](Stream& s) { do_gemm(s, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
      return;
    }
    DeviceWork work(*this);
    host_->gemm(*host_stream_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  // The host backend runs the GEMMs, so it does their math.
  void on_fp32_math(Fp32Math math) override { host_->set_fp32_math(math); }

  // As gemm, after checking that A, B and C are device memory of this backend.
  void do_gemm_half(Stream& stream, half::Storage type, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                    const std::uint16_t* a, int lda, const std::uint16_t* b, int ldb, float beta, float* c,
                    int ldc) override {
    if (capturing(stream)) {
      do_record([=, this](Stream& s) {
        do_gemm_half(s, type, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      });
      return;
    }
    if (m > 0 && n > 0) {
      check_device_memory(a, matrix_bytes(trans_a ? k : m, trans_a ? m : k, lda, 2), "gemm_half A");
      check_device_memory(b, matrix_bytes(trans_b ? n : k, trans_b ? k : n, ldb, 2), "gemm_half B");
      check_device_memory(c, matrix_bytes(m, n, ldc, 4), "gemm_half C");
    }
    DeviceWork work(*this);
    host_->gemm_half(*host_stream_, type, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  HalfGemmPath last_half_gemm_path() const override { return host_->last_half_gemm_path(); }

  void set_num_threads(int threads) override { host_->set_num_threads(threads); }
  int num_threads() const override { return host_->num_threads(); }
  void begin_device_work() override { arena_.open(); }
  void end_device_work() noexcept override { arena_.close(); }

 private:
  // Bytes a row-major rows x cols matrix with row stride ld spans, from its first element to
  // just past its last.
  static std::size_t matrix_bytes(int rows, int cols, int ld, std::size_t element_bytes) {
    if (rows <= 0 || cols <= 0) return 0;
    return ((static_cast<std::size_t>(rows) - 1) * ld + cols) * element_bytes;
  }

  // A pointer into the arena must lie inside one live allocation for the whole range.
  void check_range(const void* p, std::size_t bytes, const char* what) const {
    if (arena_.contains(p) && !arena_.inside_allocation(p, bytes))
      throw DeviceError(fmt::format("cpu-strict: {}: {} bytes at {} overrun the device allocation {}", what, bytes, p,
                                    arena_.describe(p)));
  }

  std::unique_ptr<Backend> host_;
  std::unique_ptr<Stream> host_stream_ = host_->create_stream();
  strict::Arena arena_;
  std::vector<std::function<void(Stream&)>> recording_;  // of the capture open, if any
};

}  // namespace

std::unique_ptr<Backend> make_strict_backend(int threads, CpuGemm gemm) {
  return std::make_unique<StrictBackend>(threads, gemm);
}

}  // namespace recmix::device
