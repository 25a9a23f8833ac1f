#include "comm/mpi/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi/mpi_handle.hpp"
#include "comm/mpi/mpi_wait.hpp"
#include "core/error.hpp"
#include "device/stream.hpp"

namespace recmix::comm {
namespace {

// "MPI_Alltoallv(a, b, ...)" -> "MPI_Alltoallv"
std::string call_name(const char* call) {
  std::string s(call);
  return s.substr(0, s.find('('));
}

[[noreturn]] void throw_mpi_error(int code, const char* call, MPI_Comm comm) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) std::snprintf(text, sizeof text, "code %d", code);
  int rank = -1, size = -1;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }
  throw CommError(call_name(call) + " failed on rank " + std::to_string(rank) + " of " +
                  std::to_string(size) + ": " + text);
}

}  // namespace
}  // namespace recmix::comm

// Runs an MPI call on communicator `mpi_comm` and throws CommError naming the call when it fails.
#define RECMIX_MPI_CHECK(mpi_comm, call)                                                     \
  do {                                                                                       \
    int recmix_mpi_rc_ = (call);                                                             \
    if (recmix_mpi_rc_ != MPI_SUCCESS)                                                       \
      ::recmix::comm::throw_mpi_error(recmix_mpi_rc_, #call, mpi_comm);                      \
  } while (0)

namespace recmix::comm {
namespace {

MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::f32: return MPI_FLOAT;
    case DataType::f64: return MPI_DOUBLE;
    case DataType::i32: return MPI_INT32_T;
    case DataType::i64: return MPI_INT64_T;
    case DataType::u8: return MPI_UINT8_T;
  }
  throw CommError("unknown DataType " + std::to_string(static_cast<int>(type)));
}

// MPI takes int counts; a value beyond the per-call limit is a clear error, not a wrap-around.
int to_int_count(std::size_t value, std::size_t limit, const char* what, const char* operation) {
  if (value > limit || value > static_cast<std::size_t>(INT_MAX))
    throw CommError(std::string(operation) + ": " + what + " of " + std::to_string(value) +
                    " elements exceeds the per-call limit of " + std::to_string(std::min<std::size_t>(limit, INT_MAX)) +
                    " elements (MPI counts are int); split the message");
  return static_cast<int>(value);
}

// The MPI communicator works on host memory: a CPU stream (native() == nullptr) runs inline and
// is accepted; a device stream means device buffers, which belong to the NCCL communicator.
void require_host_stream(device::Stream* stream, const char* operation) {
  if (stream != nullptr && stream->native() != nullptr)
    throw CommError(std::string(operation) +
                    ": the MPI communicator works on host buffers but was given a device stream; "
                    "use the NCCL communicator for device buffers");
}

// Pointer arithmetic on untyped buffers, in elements.
const void* offset(const void* base, std::size_t elements, std::size_t element_size) {
  return static_cast<const unsigned char*>(base) + elements * element_size;
}
void* offset(void* base, std::size_t elements, std::size_t element_size) {
  return static_cast<unsigned char*>(base) + elements * element_size;
}

// One or more MPI requests of a non-blocking collective, plus the count and displacement arrays
// that MPI reads until completion (they must outlive the call that started it).
class MpiRequest : public Request {
 public:
  MpiRequest(MPI_Comm comm, std::string operation, const MpiOptions& options)
      : comm_(comm), operation_(std::move(operation)), wait_(options.wait), poll_(options.poll) {}
  ~MpiRequest() override {
    // A non-blocking collective cannot be cancelled or freed (MPI standard), so a request that
    // is dropped unfinished is completed here; errors at this point can only be reported.
    if (done_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    int rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      std::fprintf(stderr, "recmix: %s failed while its request was being destroyed\n", operation_.c_str());
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      done_ = true;  // the requests are no longer usable
      throw_mpi_error(rc, operation_.c_str(), comm_);
    }
    if (flag) done_ = true;
    return done_;
  }

  void wait() override {
    if (done_) return;
    int rc = wait_ == MpiWait::blocking
                 ? MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE)
                 : wait_requests(requests_, poll_);
    done_ = true;
    if (rc != MPI_SUCCESS) throw_mpi_error(rc, operation_.c_str(), comm_);
  }

  std::vector<MPI_Request> requests_;
  std::vector<int> counts_and_displs_;

 private:
  MPI_Comm comm_;
  std::string operation_;
  MpiWait wait_;
  PollThenSleep poll_;
  bool done_ = false;
};

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of comm (freed in the destructor) and makes its errors return. Collective
  // over comm: it duplicates comm once more for the code that calls MPI itself (mpi_handle).
  MpiCommunicator(MPI_Comm comm, const MpiOptions& options) : comm_(comm), options_(options) {
    if (options_.max_elements_per_call == 0) throw CommError("MpiOptions.max_elements_per_call must be > 0");
    RECMIX_MPI_CHECK(comm_, MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    RECMIX_MPI_CHECK(comm_, MPI_Comm_rank(comm_, &rank_));
    RECMIX_MPI_CHECK(comm_, MPI_Comm_size(comm_, &size_));
    // Parallel HDF5's collectives get a communicator of their own. A rank that fails inside a
    // checkpoint write leaves its peers in HDF5's collectives, and the failing rank's next
    // collective (the guard's status word) must not be matched against theirs: messages of two
    // different collectives on one communicator are an MPI error (seen as a truncation that
    // aborted the job), where apart they simply wait for the stuck-job watchdog.
    RECMIX_MPI_CHECK(comm_, MPI_Comm_dup(comm_, &io_comm_));
    RECMIX_MPI_CHECK(comm_, MPI_Comm_set_errhandler(io_comm_, MPI_ERRORS_RETURN));
  }

  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (io_comm_ != MPI_COMM_NULL) MPI_Comm_free(&io_comm_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm handle() const { return comm_; }
  MPI_Comm io_handle() const { return io_comm_; }
  const MpiOptions& options() const { return options_; }

  void barrier() override {
    // Under poll_then_sleep, the arrival barrier is the whole of it.
    collective("MPI_Barrier", [&] { return options_.wait == MpiWait::blocking ? MPI_Barrier(comm_) : MPI_SUCCESS; });
  }

  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                      device::Stream* stream) override {
    require_host_stream(stream, "all_reduce_sum");
    const MPI_Datatype t = mpi_type(type);
    const std::size_t es = size_of(type);
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(count - done, chunk_limit());
      const void* s = send == recv ? MPI_IN_PLACE : offset(send, done, es);
      void* r = offset(recv, done, es);
      const int c = static_cast<int>(n);
      collective("MPI_Allreduce", [&] { return MPI_Allreduce(s, r, c, t, MPI_SUM, comm_); });
      done += n;
    }
  }

  std::unique_ptr<Request> iall_reduce_sum(const void* send, void* recv, std::size_t count,
                                           DataType type, device::Stream* stream) override {
    require_host_stream(stream, "iall_reduce_sum");
    const MPI_Datatype t = mpi_type(type);
    const std::size_t es = size_of(type);
    auto request = std::make_unique<MpiRequest>(comm_, "MPI_Iallreduce", options_);
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(count - done, chunk_limit());
      const void* s = send == recv ? MPI_IN_PLACE : offset(send, done, es);
      MPI_Request r = MPI_REQUEST_NULL;
      int rc = MPI_Iallreduce(s, offset(recv, done, es), static_cast<int>(n), t, MPI_SUM, comm_, &r);
      if (rc != MPI_SUCCESS) {
        request->wait();  // finish the pieces already started before reporting
        throw_mpi_error(rc, "MPI_Iallreduce", comm_);
      }
      request->requests_.push_back(r);
      done += n;
    }
    return request;
  }

  void broadcast(void* buffer, std::size_t count, DataType type, int root,
                 device::Stream* stream) override {
    require_host_stream(stream, "broadcast");
    check_rank(root, "broadcast root");
    const MPI_Datatype t = mpi_type(type);
    const std::size_t es = size_of(type);
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(count - done, chunk_limit());
      void* b = offset(buffer, done, es);
      const int c = static_cast<int>(n);
      collective("MPI_Bcast", [&] { return MPI_Bcast(b, c, t, root, comm_); });
      done += n;
    }
  }

  void all_gather(const void* send, void* recv, std::size_t count, DataType type,
                  device::Stream* stream) override {
    require_host_stream(stream, "all_gather");
    const int n = to_int_count(count, options_.max_elements_per_call, "count", "all_gather");
    const MPI_Datatype t = mpi_type(type);
    const std::size_t es = size_of(type);
    // Total receive extent must also be addressable by MPI (int count times size()).
    to_int_count(count * static_cast<std::size_t>(size_), static_cast<std::size_t>(INT_MAX),
                 "total receive size", "all_gather");
    const void* s = send == offset(recv, static_cast<std::size_t>(rank_) * count, es) ? MPI_IN_PLACE : send;
    collective("MPI_Allgather", [&] { return MPI_Allgather(s, n, t, recv, n, t, comm_); });
  }

  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_displs, void* recv,
                    std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_displs, DataType type,
                    device::Stream* stream) override {
    require_host_stream(stream, "all_to_all_v");
    std::vector<int> a = int_counts(send_counts, send_displs, recv_counts, recv_displs, "all_to_all_v");
    const int p = size_;
    const MPI_Datatype t = mpi_type(type);
    const int* c = a.data();
    collective("MPI_Alltoallv",
               [&] { return MPI_Alltoallv(send, c, c + p, t, recv, c + 2 * p, c + 3 * p, t, comm_); });
  }

  std::unique_ptr<Request> iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                         std::span<const std::size_t> send_displs, void* recv,
                                         std::span<const std::size_t> recv_counts,
                                         std::span<const std::size_t> recv_displs, DataType type,
                                         device::Stream* stream) override {
    require_host_stream(stream, "iall_to_all_v");
    auto request = std::make_unique<MpiRequest>(comm_, "MPI_Ialltoallv", options_);
    request->counts_and_displs_ =
        int_counts(send_counts, send_displs, recv_counts, recv_displs, "iall_to_all_v");
    const int* a = request->counts_and_displs_.data();
    const int p = size_;
    const MPI_Datatype t = mpi_type(type);
    MPI_Request r = MPI_REQUEST_NULL;
    RECMIX_MPI_CHECK(comm_, MPI_Ialltoallv(send, a, a + p, t, recv, a + 2 * p, a + 3 * p, t, comm_, &r));
    request->requests_.push_back(r);
    return request;
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    RECMIX_MPI_CHECK(comm_, MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub));
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(sub, options_);
  }

  [[noreturn]] void abort(int code, const std::string& why) override {
    std::fprintf(stderr, "recmix: rank %d of %d: aborting the job: %s\n", rank_, size_, why.c_str());
    std::fflush(stderr);
    MPI_Abort(comm_, code == 0 ? 1 : code);
    std::_Exit(code == 0 ? 1 : code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  // One blocking collective. Under poll_then_sleep the ranks first meet at a non-blocking barrier
  // that wait_requests finishes, so a rank that is early sleeps until the last one arrives; the
  // collective itself then runs as MPI's blocking call, with every rank present. (MPI's
  // non-blocking twins of the collectives are no substitute: they progress only while polled, so
  // every sleep stalls a large transfer: a 16 MiB all-reduce took 3-9x as long.)
  template <class Blocking>
  void collective(const char* name, const Blocking& blocking) {
    int rc = MPI_SUCCESS;
    if (options_.wait == MpiWait::poll_then_sleep) {
      MPI_Request arrival = MPI_REQUEST_NULL;
      rc = MPI_Ibarrier(comm_, &arrival);
      if (rc == MPI_SUCCESS) rc = wait_requests(std::span<MPI_Request>(&arrival, 1), options_.poll);
    }
    if (rc == MPI_SUCCESS) rc = blocking();
    if (rc != MPI_SUCCESS) throw_mpi_error(rc, name, comm_);
  }

  std::size_t chunk_limit() const {
    return std::min<std::size_t>(options_.max_elements_per_call, static_cast<std::size_t>(INT_MAX));
  }

  void check_rank(int r, const char* what) const {
    if (r < 0 || r >= size_)
      throw CommError(std::string(what) + " " + std::to_string(r) + " is not a rank of this communicator (size " +
                      std::to_string(size_) + ")");
  }

  // Packs send counts, send displacements, receive counts, receive displacements (size() ints
  // each) after checking lengths and the int range.
  std::vector<int> int_counts(std::span<const std::size_t> send_counts,
                              std::span<const std::size_t> send_displs,
                              std::span<const std::size_t> recv_counts,
                              std::span<const std::size_t> recv_displs, const char* operation) const {
    const auto p = static_cast<std::size_t>(size_);
    const std::span<const std::size_t> parts[4] = {send_counts, send_displs, recv_counts, recv_displs};
    const char* names[4] = {"send count", "send displacement", "receive count", "receive displacement"};
    std::vector<int> out(4 * p);
    for (int k = 0; k < 4; ++k) {
      if (parts[k].size() != p)
        throw CommError(std::string(operation) + ": " + std::to_string(parts[k].size()) + " " + names[k] +
                        "s given for " + std::to_string(p) + " ranks");
      for (std::size_t i = 0; i < p; ++i) {
        const std::string what = std::string(names[k]) + " for rank " + std::to_string(i);
        const std::size_t limit = (k % 2 == 0) ? options_.max_elements_per_call : static_cast<std::size_t>(INT_MAX);
        out[k * p + i] = to_int_count(parts[k][i], limit, what.c_str(), operation);
      }
    }
    // A block's end (displacement + count) must also be addressable.
    for (std::size_t i = 0; i < p; ++i) {
      to_int_count(send_displs[i] + send_counts[i], INT_MAX, "end of send block", operation);
      to_int_count(recv_displs[i] + recv_counts[i], INT_MAX, "end of receive block", operation);
    }
    return out;
  }

  MPI_Comm comm_;
  MPI_Comm io_comm_ = MPI_COMM_NULL;
  MpiOptions options_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

namespace {

// RECMIX_MPI_WAIT = auto | poll | blocking (docs/operations.md); unset is auto. Any other value is
// an error that names the variable, on every rank alike.
MpiWait wait_from_environment() {
  const char* v = std::getenv("RECMIX_MPI_WAIT");
  if (v == nullptr || std::string(v).empty() || std::string(v) == "auto") return MpiWait::automatic;
  if (std::string(v) == "poll") return MpiWait::poll_then_sleep;
  if (std::string(v) == "blocking") return MpiWait::blocking;
  throw CommError(std::string("RECMIX_MPI_WAIT=") + v + " is not one of auto, poll, blocking");
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_world_communicator() { return make_mpi_world_communicator(MpiOptions{}); }

std::unique_ptr<Communicator> make_mpi_world_communicator(const MpiOptions& options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw CommError("make_mpi_world_communicator: MPI is not initialised (or already finalised)");
  MpiOptions resolved = options;
  if (resolved.wait == MpiWait::automatic) resolved.wait = wait_from_environment();
  // A private duplicate keeps our messages apart from other MPI users and lets errors return
  // without changing MPI_COMM_WORLD's handler.
  MPI_Comm dup = MPI_COMM_NULL;
  RECMIX_MPI_CHECK(MPI_COMM_WORLD, MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  if (resolved.wait == MpiWait::automatic)
    resolved.wait = ranks_fit_node_cpus(dup) ? MpiWait::poll_then_sleep : MpiWait::blocking;
  return std::make_unique<MpiCommunicator>(dup, resolved);
}

std::unique_ptr<Communicator> make_mpi_group_communicator(const Communicator& parent, std::span<const int> ranks,
                                                          int tag) {
  const auto* mpi = dynamic_cast<const MpiCommunicator*>(&parent);
  if (mpi == nullptr) throw CommError("make_mpi_group_communicator: the parent is not an MPI communicator");
  if (ranks.empty()) throw CommError("make_mpi_group_communicator: no ranks given");
  if (tag < 0 || tag > 32767) throw CommError("make_mpi_group_communicator: tag " + std::to_string(tag) + " is out of 0..32767");
  bool member = false;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= parent.size())
      throw CommError("make_mpi_group_communicator: rank " + std::to_string(ranks[i]) +
                      " is not a rank of the parent (size " + std::to_string(parent.size()) + ")");
    for (std::size_t k = 0; k < i; ++k)
      if (ranks[k] == ranks[i])
        throw CommError("make_mpi_group_communicator: rank " + std::to_string(ranks[i]) + " is listed twice");
    member = member || ranks[i] == parent.rank();
  }
  if (!member) return nullptr;
  MPI_Comm parent_comm = mpi->handle();
  MPI_Group all = MPI_GROUP_NULL, part = MPI_GROUP_NULL;
  RECMIX_MPI_CHECK(parent_comm, MPI_Comm_group(parent_comm, &all));
  const int incl = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &part);
  MPI_Group_free(&all);
  RECMIX_MPI_CHECK(parent_comm, incl);
  MPI_Comm sub = MPI_COMM_NULL;
  const int created = MPI_Comm_create_group(parent_comm, part, tag, &sub);
  MPI_Group_free(&part);
  RECMIX_MPI_CHECK(parent_comm, created);
  return std::make_unique<MpiCommunicator>(sub, mpi->options());
}

namespace {

// The MPI communicator under comm and the wrappers around it, or nullptr.
const MpiCommunicator* unwrap_mpi(const Communicator* comm) {
  for (; comm != nullptr; comm = comm->wrapped())
    if (const auto* mpi = dynamic_cast<const MpiCommunicator*>(comm)) return mpi;
  return nullptr;
}

}  // namespace

bool is_mpi_communicator(const Communicator& comm) { return unwrap_mpi(&comm) != nullptr; }

MpiWait mpi_wait(const Communicator& comm) {
  const auto* mpi = unwrap_mpi(&comm);
  if (mpi == nullptr) throw CommError("mpi_wait: the communicator is not an MPI communicator");
  return mpi->options().wait;
}

MPI_Comm mpi_handle(const Communicator& comm) {
  const auto* mpi = unwrap_mpi(&comm);
  if (mpi == nullptr) throw CommError("mpi_handle: the communicator is not an MPI communicator");
  return mpi->io_handle();
}

}  // namespace recmix::comm
