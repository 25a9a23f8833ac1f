#pragma once
// Streams are ordered work queues; events mark a point in a stream that others can wait on.
// On the CPU backend work submitted to a stream runs in submission order on the calling thread
// (so a stream is trivially ordered and an event is complete once recorded); on CUDA they wrap
// cudaStream_t and cudaEvent_t. native() exposes the handle to backend code only.
namespace recmix::device {

class Stream {
 public:
  virtual ~Stream() = default;
  virtual void synchronize() = 0;  // waits until all work submitted so far has finished
  virtual void* native() = 0;      // cudaStream_t on CUDA, nullptr on the CPU
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& stream) = 0;   // marks the current end of stream
  virtual void wait(Stream& stream) = 0;     // makes stream wait for the recorded point
  virtual bool query() = 0;                  // true when the recorded work has finished
  virtual void synchronize() = 0;            // blocks the host until it has
};

}  // namespace recmix::device
