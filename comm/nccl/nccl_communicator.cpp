#include "comm/nccl/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/cuda/check.cuh"
#include "device/stream.hpp"

// Runs an NCCL call and throws CommError naming it, with NCCL's own last message.
#define RECMIX_NCCL_CHECK(call)                                                                 \
  do {                                                                                          \
    ncclResult_t recmix_nccl_rc_ = (call);                                                      \
    if (recmix_nccl_rc_ != ncclSuccess && recmix_nccl_rc_ != ncclInProgress)                    \
      throw ::recmix::CommError(std::string(#call).substr(0, std::string(#call).find('(')) +   \
                                " failed: " + ncclGetErrorString(recmix_nccl_rc_) + " (" +     \
                                ncclGetLastError(nullptr) + ")");                               \
  } while (0)

namespace recmix::comm {
namespace {

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::f32: return ncclFloat32;
    case DataType::f64: return ncclFloat64;
    case DataType::i32: return ncclInt32;
    case DataType::i64: return ncclInt64;
    case DataType::u8: return ncclUint8;
  }
  throw CommError("unknown DataType " + std::to_string(static_cast<int>(type)));
}

const void* offset(const void* base, std::size_t elements, std::size_t element_size) {
  return static_cast<const unsigned char*>(base) + elements * element_size;
}
void* offset(void* base, std::size_t elements, std::size_t element_size) {
  return static_cast<unsigned char*>(base) + elements * element_size;
}

// Node-local rank as the launchers publish it; -1 when none does.
int local_rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

// Completion of work enqueued on a stream, seen through an event.
class NcclRequest : public Request {
 public:
  NcclRequest(cudaStream_t stream, ncclComm_t comm) : comm_(comm) {
    RECMIX_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    RECMIX_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~NcclRequest() override {
    if (!done_) cudaEventSynchronize(event_);
    cudaEventDestroy(event_);
  }
  bool test() override {
    if (done_) return true;
    cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) {
      check_async_error();
      return false;
    }
    RECMIX_CUDA_CHECK(rc);
    done_ = true;
    return true;
  }
  void wait() override {
    // Poll rather than block, so a failed peer surfaces as an error instead of a hang.
    while (!test()) {
    }
  }

 private:
  void check_async_error() {
    ncclResult_t async = ncclSuccess;
    RECMIX_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      throw CommError(std::string("NCCL collective failed while in flight: ") + ncclGetErrorString(async));
  }

  ncclComm_t comm_;
  cudaEvent_t event_ = nullptr;
  bool done_ = false;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, Communicator* bootstrap)
      : comm_(comm), device_(device), bootstrap_(bootstrap) {
    RECMIX_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
    RECMIX_NCCL_CHECK(ncclCommCount(comm_, &size_));
    RECMIX_CUDA_CHECK(cudaSetDevice(device_));
    RECMIX_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
    RECMIX_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    cudaFree(scratch_);
    cudaStreamDestroy(own_stream_);
    ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool orders_on_stream() const override { return true; }
  // NCCL 2.9 and later capture collectives into the stream's graph (docs: "Using NCCL with CUDA
  // Graphs"); CUDA may not record or query an event of a capturing stream for the Request.
  bool captures_on_stream() const override { return true; }

  void barrier() override {
    // A one-element all-reduce on the internal stream, waited for by the host.
    RECMIX_CUDA_CHECK(cudaSetDevice(device_));
    RECMIX_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, own_stream_));
    RECMIX_CUDA_CHECK(cudaStreamSynchronize(own_stream_));
  }

  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                      device::Stream* stream) override {
    cudaStream_t s = pick(stream, "all_reduce_sum");
    RECMIX_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, s));
    finish(stream, s);
  }
  std::unique_ptr<Request> iall_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                                           device::Stream* stream) override {
    cudaStream_t s = pick(stream, "iall_reduce_sum");
    RECMIX_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, s));
    return request(s);
  }

  void broadcast(void* buffer, std::size_t count, DataType type, int root, device::Stream* stream) override {
    if (root < 0 || root >= size_)
      throw CommError("broadcast root " + std::to_string(root) + " is not a rank of this communicator (size " +
                      std::to_string(size_) + ")");
    cudaStream_t s = pick(stream, "broadcast");
    RECMIX_NCCL_CHECK(ncclBroadcast(buffer, buffer, count, nccl_type(type), root, comm_, s));
    finish(stream, s);
  }

  void all_gather(const void* send, void* recv, std::size_t count, DataType type,
                  device::Stream* stream) override {
    cudaStream_t s = pick(stream, "all_gather");
    RECMIX_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(type), comm_, s));
    finish(stream, s);
  }

  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_displs, void* recv,
                    std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                    DataType type, device::Stream* stream) override {
    cudaStream_t s = pick(stream, "all_to_all_v");
    enqueue_all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, s);
    finish(stream, s);
  }
  std::unique_ptr<Request> iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                         std::span<const std::size_t> send_displs, void* recv,
                                         std::span<const std::size_t> recv_counts,
                                         std::span<const std::size_t> recv_displs, DataType type,
                                         device::Stream* stream) override {
    cudaStream_t s = pick(stream, "iall_to_all_v");
    enqueue_all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, s);
    return request(s);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    RECMIX_CUDA_CHECK(cudaSetDevice(device_));
    ncclComm_t sub = nullptr;
    RECMIX_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
    if (sub == nullptr) return nullptr;
    return std::make_unique<NcclCommunicator>(sub, device_, bootstrap_);
  }

  [[noreturn]] void abort(int code, const std::string& why) override {
    ncclCommAbort(comm_);  // frees peers blocked in a collective with this rank
    comm_ = nullptr;
    if (bootstrap_ != nullptr) bootstrap_->abort(code, why);
    std::fprintf(stderr, "recmix: rank %d of %d: aborting: %s\n", rank_, size_, why.c_str());
    std::_Exit(code == 0 ? 1 : code);
  }

 private:
  // The CUDA stream to enqueue on: the caller's, or the internal one when none is given.
  cudaStream_t pick(device::Stream* stream, const char* operation) {
    RECMIX_CUDA_CHECK(cudaSetDevice(device_));
    if (stream == nullptr) return own_stream_;
    void* native = stream->native();
    if (native == nullptr)
      throw CommError(std::string(operation) +
                      ": the NCCL communicator needs a CUDA stream and device buffers; got a CPU stream");
    return static_cast<cudaStream_t>(native);
  }
  // The completion of what was just enqueued on s: complete at once when s is being captured,
  // where the collective is part of the graph and ordered there.
  std::unique_ptr<Request> request(cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    RECMIX_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
    if (status != cudaStreamCaptureStatusNone) return completed_request();
    return std::make_unique<NcclRequest>(s, comm_);
  }
  // Calls without a stream return only when their work is done.
  void finish(device::Stream* stream, cudaStream_t s) {
    if (stream == nullptr) RECMIX_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void enqueue_all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                            std::span<const std::size_t> send_displs, void* recv,
                            std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                            DataType type, cudaStream_t s) {
    const auto p = static_cast<std::size_t>(size_);
    if (send_counts.size() != p || send_displs.size() != p || recv_counts.size() != p || recv_displs.size() != p)
      throw CommError("all_to_all_v: counts and displacements must have one entry per rank (" + std::to_string(p) +
                      ")");
    const ncclDataType_t t = nccl_type(type);
    const std::size_t es = size_of(type);
    RECMIX_NCCL_CHECK(ncclGroupStart());
    ncclResult_t first_error = ncclSuccess;
    for (std::size_t q = 0; q < p && first_error == ncclSuccess; ++q) {
      if (send_counts[q] > 0)
        first_error = ncclSend(offset(send, send_displs[q], es), send_counts[q], t, static_cast<int>(q), comm_, s);
      if (first_error == ncclSuccess && recv_counts[q] > 0)
        first_error = ncclRecv(offset(recv, recv_displs[q], es), recv_counts[q], t, static_cast<int>(q), comm_, s);
    }
    ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
    RECMIX_NCCL_CHECK(first_error);
    RECMIX_NCCL_CHECK(end);
  }

  ncclComm_t comm_;
  int device_;
  Communicator* bootstrap_;
  int rank_ = 0, size_ = 1;
  cudaStream_t own_stream_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace

bool nccl_compiled() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, const NcclOptions& options) {
  // Every rank checks its GPU first and the verdict is shared, so that either all ranks go on
  // to the NCCL set-up (which would wait for a missing rank forever) or all throw.
  int device = options.device;
  std::string problem;
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    problem = std::string("no usable CUDA device: ") + (rc != cudaSuccess ? cudaGetErrorString(rc) : "none visible");
  } else {
    if (device < 0) {
      const int local = local_rank_from_environment();
      device = local >= 0 ? local : bootstrap.rank();
    }
    if (device >= count && options.device < 0)
      // NCCL refuses two ranks of one communicator on one GPU; say so in the launcher's terms.
      problem = "node-local rank " + std::to_string(device) + " has no GPU of its own (" + std::to_string(count) +
                " visible): the CUDA backend takes one GPU per rank, so launch at most " + std::to_string(count) +
                " rank(s) per node";
    else if (device >= count)
      problem = "device " + std::to_string(device) + " requested but only " + std::to_string(count) + " visible";
    else if ((rc = cudaSetDevice(device)) != cudaSuccess)
      problem = std::string("cudaSetDevice(") + std::to_string(device) + ") failed: " + cudaGetErrorString(rc);
  }
  std::int32_t bad = problem.empty() ? 0 : 1, bad_ranks = 0;
  bootstrap.all_reduce_sum(&bad, &bad_ranks, 1, DataType::i32);
  if (bad_ranks > 0) {
    if (!problem.empty())
      throw DeviceError("NCCL communicator, rank " + std::to_string(bootstrap.rank()) + ": " + problem);
    throw DeviceError("NCCL communicator: " + std::to_string(bad_ranks) + " other rank(s) have no usable GPU");
  }

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (bootstrap.rank() == 0) RECMIX_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof id, DataType::u8, 0);
  ncclComm_t comm = nullptr;
  RECMIX_NCCL_CHECK(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  return std::make_unique<NcclCommunicator>(comm, device, &bootstrap);
}

}  // namespace recmix::comm
