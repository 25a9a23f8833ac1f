#include "device/cuda/job_memory.cuh"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "device/cuda/check.cuh"

namespace recmix::device::cuda {

void LiveStreams::add(cudaStream_t s) {
  std::lock_guard lock(mutex_);
  streams_.push_back(s);
}

void LiveStreams::remove(cudaStream_t s) {
  std::lock_guard lock(mutex_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), s), streams_.end());
}

std::vector<cudaStream_t> LiveStreams::list() const {
  std::lock_guard lock(mutex_);
  return streams_;
}

JobMemory::JobMemory(int device, std::shared_ptr<LiveStreams> streams) : streams_(std::move(streams)) {
  int supported = 0;
  RECMIX_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device));
  if (!supported) return;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  RECMIX_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
  keep_up_to(std::numeric_limits<std::size_t>::max());
  RECMIX_CUDA_CHECK(cudaStreamCreateWithFlags(&alloc_stream_, cudaStreamNonBlocking));
  RECMIX_CUDA_CHECK(cudaEventCreateWithFlags(&after_, cudaEventDisableTiming));
}

JobMemory::~JobMemory() {
  if (!pool_) return;
  {
    std::lock_guard lock(mutex_);
    free_queued();
  }
  cudaStreamSynchronize(alloc_stream_);  // this job's frees only
  cudaEventDestroy(after_);
  cudaStreamDestroy(alloc_stream_);
  cudaMemPoolDestroy(pool_);
  (void)cudaGetLastError();
}

void JobMemory::keep_up_to(std::size_t bytes) {
  if (!pool_) return;
  std::uint64_t threshold = bytes;
  RECMIX_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
}

void* JobMemory::allocate(std::size_t bytes) {
  void* p = nullptr;
  bytes = std::max<std::size_t>(bytes, 1);
  if (!pool_) {
    RECMIX_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  RECMIX_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool_, alloc_stream_));
  RECMIX_CUDA_CHECK(cudaStreamSynchronize(alloc_stream_));
  return p;
}

bool JobMemory::any_stream_capturing() const {
  for (cudaStream_t s : streams_->list()) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone) return true;
  }
  return false;
}

void JobMemory::free_queued() noexcept {
  if (held_.empty()) return;
  for (cudaStream_t s : streams_->list())
    if (cudaEventRecord(after_, s) == cudaSuccess) cudaStreamWaitEvent(alloc_stream_, after_, 0);
  for (void* p : held_) cudaFreeAsync(p, alloc_stream_);
  held_.clear();
  (void)cudaGetLastError();
}

void JobMemory::deallocate(void* ptr) noexcept {
  if (!pool_) {
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
    return;
  }
  std::lock_guard lock(mutex_);
  try {
    held_.push_back(ptr);
  } catch (...) {
    return;  // no host memory to hold it back: left to the process's end
  }
  if (!any_stream_capturing()) free_queued();
}

}  // namespace recmix::device::cuda
