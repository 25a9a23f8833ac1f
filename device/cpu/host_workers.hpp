#pragma once
// The CPU backend's thread pool: helper threads, for every kernel the CPU runs on more than one
// thread (the dense and the embedding kernels alike), that sleep between calls. OpenMP workers
// spin for a while after each parallel region and so steal the core from the OpenBLAS GEMM that
// follows; these helpers block on a futex (std::atomic::wait) as soon as their share is done.
// One set per issuing thread, created on first use: a job's thread and the tiers' staging thread
// each get their own, so work issued from two threads at once never shares a set.
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace recmix::device::cpu {

class HostWorkers {
 public:
  // The calling thread's set.
  static HostWorkers& for_this_thread();

  HostWorkers() = default;
  HostWorkers(const HostWorkers&) = delete;
  HostWorkers& operator=(const HostWorkers&) = delete;
  ~HostWorkers();

  // Runs body(begin, end) over [0, n) split into `threads` contiguous parts, the first on the
  // calling thread; returns when all parts are done. Exceptions must not escape body.
  void run(int threads, std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body);

 private:
  void grow(int helpers);
  void helper_loop(int index, std::uint64_t seen);

  std::vector<std::thread> helpers_;
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::int64_t n_ = 0;
  int parts_ = 0;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

// Runs body(begin, end) over [0, n) in `threads` contiguous parts on the calling thread's
// HostWorkers, or as one part on the calling thread when threads <= 1 or n < grain.
template <class Body>
void parallel_ranges(int threads, std::int64_t n, const Body& body, std::int64_t grain = 2) {
  if (n <= 0) return;
  if (threads <= 1 || n < grain) {
    body(std::int64_t(0), n);
    return;
  }
  const std::function<void(std::int64_t, std::int64_t)> ranges = [&body](std::int64_t b, std::int64_t e) { body(b, e); };
  HostWorkers::for_this_thread().run(threads, n, ranges);
}

// f(i) for i in [0, n), over blocks of the calling thread's HostWorkers (inline when threads <= 1
// or n < grain).
template <class F>
void parallel_blocks(int threads, std::int64_t n, const F& f, std::int64_t grain = 2) {
  parallel_ranges(
      threads, n,
      [&f](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) f(i);
      },
      grain);
}

}  // namespace recmix::device::cpu
