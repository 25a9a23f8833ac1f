#pragma once
// Helper threads for the dense model's CPU kernels that sleep between calls. OpenMP workers
// spin for a while after each parallel region and so steal the core from the OpenBLAS GEMM that
// follows; these helpers block on a futex (std::atomic::wait) as soon as their share is done.
// One set per calling thread (a job's thread gets its own), created on first use. Internal.
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace recmix::mlp::cpu {

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

// parallel_for over blocks on the calling thread's HostWorkers (or inline when threads <= 1).
template <class F>
void parallel_blocks(int threads, std::int64_t n, const F& f) {
  if (threads <= 1 || n < 2) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::function<void(std::int64_t, std::int64_t)> body = [&f](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) f(i);
  };
  HostWorkers::for_this_thread().run(threads, n, body);
}

}  // namespace recmix::mlp::cpu
