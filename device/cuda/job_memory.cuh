#pragma once
// A job's device memory on CUDA: its own stream-ordered pool (cudaMemPool_t), so that one job's
// allocations and frees never synchronise another job's work on the same GPU. cudaFree waits for
// the whole device, every co-located job's kernels included; a free here is queued instead, on
// the job's allocation stream, after the work the job has queued on each of its streams so far.
//
// - allocate: cudaMallocFromPoolAsync on the allocation stream, which the host then waits for
//   (that stream only), so the memory is ready for any of the job's streams.
// - deallocate: an event recorded on each of the job's live streams, waited on by the allocation
//   stream, then cudaFreeAsync there. No host wait. A free issued while any of the job's streams
//   is being captured is held back (an event recorded there would join the graph) and queued with
//   the next free, or when the pool ends.
// - The pool keeps what the job frees for the job's next allocations up to its release threshold:
//   the job's memory share where it has one (the share itself is enforced by device::MemoryPool),
//   else all of it. Destroying the pool waits for nothing: CUDA releases it once its frees ran.
// Devices without memory pools (cudaDevAttrMemoryPoolsSupported = 0) fall back to cudaMalloc and
// cudaFree.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace recmix::device::cuda {

// The streams a backend made that still live. A stream leaves it when destroyed, after the host
// has waited for its work (the stream's destructor), so a free never has to order after it.
class LiveStreams {
 public:
  void add(cudaStream_t s);
  void remove(cudaStream_t s);
  std::vector<cudaStream_t> list() const;

 private:
  mutable std::mutex mutex_;
  std::vector<cudaStream_t> streams_;
};

class JobMemory {
 public:
  JobMemory(int device, std::shared_ptr<LiveStreams> streams);
  ~JobMemory();
  JobMemory(const JobMemory&) = delete;
  JobMemory& operator=(const JobMemory&) = delete;

  void* allocate(std::size_t bytes);  // DeviceError when CUDA refuses
  void deallocate(void* ptr) noexcept;
  // The bytes the pool keeps for reuse once freed (cudaMemPoolAttrReleaseThreshold).
  void keep_up_to(std::size_t bytes);
  bool stream_ordered() const { return pool_ != nullptr; }

 private:
  bool any_stream_capturing() const;
  void free_queued() noexcept;  // frees `held_`, ordered after the live streams' work

  std::shared_ptr<LiveStreams> streams_;
  cudaMemPool_t pool_ = nullptr;
  cudaStream_t alloc_stream_ = nullptr;
  cudaEvent_t after_ = nullptr;
  std::mutex mutex_;
  std::vector<void*> held_;  // frees not yet queued
};

}  // namespace recmix::device::cuda
