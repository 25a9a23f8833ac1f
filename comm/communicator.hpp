#pragma once
// Communicator: the collectives recmix needs, over host buffers (MPI) or device buffers with
// streams (NCCL). No MPI or NCCL type appears here. Counts and displacements are in elements.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace recmix::device {
class Stream;
}

namespace recmix::comm {

enum class DataType { f32, f64, i32, i64, u8 };

template <class T>
constexpr DataType data_type_of();
template <> constexpr DataType data_type_of<float>() { return DataType::f32; }
template <> constexpr DataType data_type_of<double>() { return DataType::f64; }
template <> constexpr DataType data_type_of<std::int32_t>() { return DataType::i32; }
template <> constexpr DataType data_type_of<std::int64_t>() { return DataType::i64; }
template <> constexpr DataType data_type_of<std::uint8_t>() { return DataType::u8; }

std::size_t size_of(DataType type);

// Completion handle of a non-blocking collective. test() polls; wait() blocks. The buffers
// passed to the collective must stay alive and untouched until it completes.
class Request {
 public:
  virtual ~Request() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

// A Request that is complete when it is made (a captured collective; one that finished in the
// call).
std::unique_ptr<Request> completed_request();

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // True when a call given a stream is ordered on it like a kernel (NCCL): work issued later on
  // that stream sees the result without the host waiting for the Request. False: the result is
  // there once the Request completes (MPI, the staged communicator).
  virtual bool orders_on_stream() const { return false; }
  // True when a call given a stream that this thread is capturing into a graph becomes part of
  // the graph instead of running (NCCL, since 2.9; the staged communicator emulates it): each
  // replay of the graph runs it again with the buffers and count of the capture, on what they
  // hold then. Its Request is complete at once. Whether a collective is captured must be the
  // same on every rank, and so must the replays of its graph (NCCL's rule). False: a collective
  // must not be issued on a stream being captured.
  virtual bool captures_on_stream() const { return false; }

  // A communicator that adds behaviour around another one (comm/guarded) returns that one, so
  // code needing the MPI handle underneath (comm/mpi/mpi_handle.hpp) finds it; others nullptr.
  virtual const Communicator* wrapped() const { return nullptr; }

  virtual void barrier() = 0;

  // Element-wise sum over ranks. send == recv is allowed (in place).
  virtual void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                              device::Stream* stream = nullptr) = 0;
  virtual std::unique_ptr<Request> iall_reduce_sum(const void* send, void* recv, std::size_t count,
                                                   DataType type,
                                                   device::Stream* stream = nullptr) = 0;

  virtual void broadcast(void* buffer, std::size_t count, DataType type, int root,
                         device::Stream* stream = nullptr) = 0;

  // recv holds size() * count elements, rank r's contribution at r * count.
  virtual void all_gather(const void* send, void* recv, std::size_t count, DataType type,
                          device::Stream* stream = nullptr) = 0;

  // All-to-all with per-peer counts: rank r sends send_counts[p] elements from
  // send + send_displs[p] to peer p, and receives recv_counts[p] from p at recv + recv_displs[p].
  virtual void all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                            std::span<const std::size_t> send_displs, void* recv,
                            std::span<const std::size_t> recv_counts,
                            std::span<const std::size_t> recv_displs, DataType type,
                            device::Stream* stream = nullptr) = 0;
  virtual std::unique_ptr<Request> iall_to_all_v(const void* send,
                                                 std::span<const std::size_t> send_counts,
                                                 std::span<const std::size_t> send_displs,
                                                 void* recv,
                                                 std::span<const std::size_t> recv_counts,
                                                 std::span<const std::size_t> recv_displs,
                                                 DataType type,
                                                 device::Stream* stream = nullptr) = 0;

  // Ranks with the same color form a new communicator, ordered by key (then by old rank).
  // A negative color leaves the calling rank out: it gets nullptr. Collective over this one.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Ends the whole job on every rank (used when one rank fails and the others must not hang).
  [[noreturn]] virtual void abort(int code, const std::string& why) = 0;
};

}  // namespace recmix::comm
