#pragma once
// Captured work. Between Backend::begin_capture(stream) and end_capture(stream), what the
// capturing thread issues on that stream (kernels, GEMMs, copies, fills) is recorded instead of
// run; the Graph that end_capture returns replays the recording with one launch.
//
// A replay runs every piece of work with the arguments it was captured with: pointers, sizes and
// scalars are frozen. What changes from one replay to the next must be read by the work from
// memory it points to, never passed by value. The strict emulator replays its recording the same
// way, so a value frozen by mistake shows up on the CPU as a wrong result.
//
// While a thread captures on a backend, that thread may not allocate or free through it, wait
// on the host for any of its streams or events, or copy through pageable host memory: each is a
// DeviceError naming the call (CUDA's thread-local capture mode refuses the same calls). Other
// threads, and other backends, are not affected.
#include <cstdint>

#include "device/counters.hpp"
#include "device/stream.hpp"

namespace recmix::device {

class Backend;

class Graph {
 public:
  virtual ~Graph() = default;
  // Replays the captured work on `stream`, in its order (one graph launch in the counts).
  void launch(Stream& stream) {
    if (counters_) counters_->graph_launch();
    do_launch(stream);
  }
  // Pieces of work captured.
  virtual std::int64_t nodes() const = 0;

 protected:
  virtual void do_launch(Stream& stream) = 0;

 private:
  friend class Backend;
  DeviceCounters* counters_ = nullptr;
};

}  // namespace recmix::device
