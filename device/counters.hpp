#pragma once
// What the host asks of a device backend, counted in the one place each request passes: the
// Backend's allocate, copy, fill and GEMM calls, its streams' and events' waits, and the kernel
// launchers. A steady-state training step should launch work and nothing else (docs/device.md):
// these counts are how the tests and metrics.jsonl's `device_per_step` check it on every backend.
#include <atomic>
#include <cstdint>

namespace recmix::device {

// A snapshot: plain numbers that can be subtracted and divided.
struct DeviceCounts {
  std::uint64_t launches = 0;         // kernels, GEMMs and fills issued (a library call counts once)
  std::uint64_t graph_launches = 0;   // captured graphs replayed
  std::uint64_t allocations = 0;      // Backend::allocate calls, either tier
  std::uint64_t frees = 0;            // Backend::deallocate calls
  std::uint64_t host_syncs = 0;       // host waits on work of this step or the last: streams, events, blocking copies
  std::uint64_t buffer_waits = 0;     // host waits on an event recorded two or more steps ago
  std::uint64_t comm_syncs = 0;       // waits inside a staged communicator (CommSyncScope)
  std::uint64_t pageable_copies = 0;  // copies with a host side that is no pinned host-tier allocation

  DeviceCounts operator-(const DeviceCounts& o) const {
    return {launches - o.launches,         graph_launches - o.graph_launches, allocations - o.allocations,
            frees - o.frees,               host_syncs - o.host_syncs,         buffer_waits - o.buffer_waits,
            comm_syncs - o.comm_syncs,     pageable_copies - o.pageable_copies};
  }
};

// The live counters of one backend. Atomic: a backend's streams are used from several threads
// (the tiers' staging thread, the dense replicas).
class DeviceCounters {
 public:
  void launch(std::uint64_t n = 1) { launches_.fetch_add(n, std::memory_order_relaxed); }
  void graph_launch() { graph_launches_.fetch_add(1, std::memory_order_relaxed); }
  void allocation() { allocations_.fetch_add(1, std::memory_order_relaxed); }
  void deallocation() { frees_.fetch_add(1, std::memory_order_relaxed); }
  void pageable_copy() { pageable_copies_.fetch_add(1, std::memory_order_relaxed); }
  // A host wait on a stream, or on an event recorded at `recorded_step` (negative: unknown). A wait
  // inside a CommSyncScope is a comm_sync; one on an event two or more steps old a buffer_wait.
  void host_wait(std::int64_t recorded_step = -1);

  // The training step now being issued; events remember it when recorded. Set by the trainer.
  void set_step(std::int64_t step) { step_.store(step, std::memory_order_relaxed); }
  std::int64_t step() const { return step_.load(std::memory_order_relaxed); }

  DeviceCounts snapshot() const;

 private:
  std::atomic<std::uint64_t> launches_{0}, graph_launches_{0}, allocations_{0}, frees_{0}, host_syncs_{0},
      buffer_waits_{0}, comm_syncs_{0}, pageable_copies_{0};
  std::atomic<std::int64_t> step_{0};
};

// While one is alive on a thread, that thread's host waits count as comm_syncs: the staged
// communicator's waits for its staging copies, which NCCL on device buffers would not make.
class CommSyncScope {
 public:
  CommSyncScope() { ++depth(); }
  ~CommSyncScope() { --depth(); }
  CommSyncScope(const CommSyncScope&) = delete;
  CommSyncScope& operator=(const CommSyncScope&) = delete;
  static bool active() { return depth() > 0; }

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
};

inline void DeviceCounters::host_wait(std::int64_t recorded_step) {
  if (CommSyncScope::active())
    comm_syncs_.fetch_add(1, std::memory_order_relaxed);
  else if (recorded_step >= 0 && step() - recorded_step >= 2)
    buffer_waits_.fetch_add(1, std::memory_order_relaxed);
  else
    host_syncs_.fetch_add(1, std::memory_order_relaxed);
}

inline DeviceCounts DeviceCounters::snapshot() const {
  auto r = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {r(launches_), r(graph_launches_), r(allocations_), r(frees_), r(host_syncs_), r(buffer_waits_),
          r(comm_syncs_), r(pageable_copies_)};
}

}  // namespace recmix::device
