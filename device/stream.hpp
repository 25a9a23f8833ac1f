#pragma once
// Streams are ordered work queues; events mark a point in a stream that others can wait on.
// On the CPU backend work submitted to a stream runs in submission order on the calling thread
// (so a stream is trivially ordered and an event is complete once recorded); on CUDA they wrap
// cudaStream_t and cudaEvent_t. native() exposes the handle to backend code only. The host's
// waits are counted on the backend that made the stream or event (counters.hpp).
#include <cstdint>

#include "device/counters.hpp"

namespace recmix::device {

class Backend;
// DeviceError when this thread is capturing a graph on `backend` (graph.hpp): a host wait then
// is refused, as CUDA refuses it. Defined with Backend.
void refuse_wait_in_capture(const Backend* backend, const char* call);

class Stream {
 public:
  virtual ~Stream() = default;
  // Waits until all work submitted so far has finished.
  void synchronize() {
    refuse_wait_in_capture(backend_, "stream synchronize");
    if (counters_) counters_->host_wait();
    do_synchronize();
  }
  virtual void* native() = 0;  // cudaStream_t on CUDA, nullptr on the CPU
  // The job priority the stream was made with (Backend::set_stream_priority).
  int priority() const { return priority_; }

 protected:
  virtual void do_synchronize() = 0;

 private:
  friend class Backend;
  DeviceCounters* counters_ = nullptr;
  const Backend* backend_ = nullptr;
  int priority_ = 0;
};

class Event {
 public:
  virtual ~Event() = default;
  // Marks the current end of stream (and the training step it belongs to, for the counts).
  void record(Stream& stream) {
    recorded_step_ = counters_ ? counters_->step() : -1;
    do_record(stream);
  }
  virtual void wait(Stream& stream) = 0;  // makes stream wait for the recorded point
  virtual bool query() = 0;               // true when the recorded work has finished
  // Blocks the host until it has: a host_sync, or a buffer_wait for an event two or more steps old.
  void synchronize() {
    refuse_wait_in_capture(backend_, "event synchronize");
    if (counters_) counters_->host_wait(recorded_step_);
    do_synchronize();
  }

 protected:
  virtual void do_record(Stream& stream) = 0;
  virtual void do_synchronize() = 0;

 private:
  friend class Backend;
  DeviceCounters* counters_ = nullptr;
  const Backend* backend_ = nullptr;
  std::int64_t recorded_step_ = -1;
};

}  // namespace recmix::device
