#include "comm/guarded/guarded_communicator.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"

namespace recmix::comm {

GuardedCommunicator::GuardedCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {
  RECMIX_REQUIRE(inner_ != nullptr, CommError, "GuardedCommunicator: no communicator to guard");
}

void GuardedCommunicator::check(const char* operation) {
  if (closed_)
    throw PeerFailedError(fmt::format("{} after the job's communicator was closed ({} rank(s) failed)", operation,
                                      failed_ranks_));
  std::int32_t word[2] = {0, 0};  // failed, closing
  inner_->all_reduce_sum(word, word, 2, DataType::i32);
  ++status_words_;
  if (word[0] == 0 && word[1] == 0) return;
  closed_ = true;
  failed_ranks_ = word[0];
  if (word[0] > 0)
    throw PeerFailedError(fmt::format("{} other rank(s) of the job failed; this rank stops with them", word[0]));
  throw PeerFailedError(fmt::format("{} other rank(s) of the job ended while this one was in {}", word[1], operation));
}

int GuardedCommunicator::close(bool failed) {
  if (closed_) return failed_ranks_;
  closed_ = true;
  std::int32_t word[2] = {failed ? 1 : 0, 1};
  inner_->all_reduce_sum(word, word, 2, DataType::i32);
  ++status_words_;
  if (word[0] > 0 || word[1] == size())
    failed_ranks_ = word[0];
  else  // ranks that went on while this one closed threw in their collective: the job failed
    failed_ranks_ = size() - word[1];
  return failed_ranks_;
}

void GuardedCommunicator::barrier() {
  check("a barrier");
  inner_->barrier();
}

void GuardedCommunicator::all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                                         device::Stream* stream) {
  check("an all-reduce");
  inner_->all_reduce_sum(send, recv, count, type, stream);
}

std::unique_ptr<Request> GuardedCommunicator::iall_reduce_sum(const void* send, void* recv, std::size_t count,
                                                              DataType type, device::Stream* stream) {
  check("an all-reduce");
  return inner_->iall_reduce_sum(send, recv, count, type, stream);
}

void GuardedCommunicator::broadcast(void* buffer, std::size_t count, DataType type, int root, device::Stream* stream) {
  check("a broadcast");
  inner_->broadcast(buffer, count, type, root, stream);
}

void GuardedCommunicator::all_gather(const void* send, void* recv, std::size_t count, DataType type,
                                     device::Stream* stream) {
  check("an all-gather");
  inner_->all_gather(send, recv, count, type, stream);
}

void GuardedCommunicator::all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                       std::span<const std::size_t> send_displs, void* recv,
                                       std::span<const std::size_t> recv_counts,
                                       std::span<const std::size_t> recv_displs, DataType type,
                                       device::Stream* stream) {
  check("an all-to-all");
  inner_->all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream);
}

std::unique_ptr<Request> GuardedCommunicator::iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                                            std::span<const std::size_t> send_displs, void* recv,
                                                            std::span<const std::size_t> recv_counts,
                                                            std::span<const std::size_t> recv_displs, DataType type,
                                                            device::Stream* stream) {
  check("an all-to-all");
  return inner_->iall_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream);
}

std::unique_ptr<Communicator> GuardedCommunicator::split(int color, int key) {
  check("a split");
  return inner_->split(color, key);
}

void GuardedCommunicator::abort(int code, const std::string& why) {
  inner_->abort(code, why);
  std::abort();  // not reached: the inner abort does not return
}

}  // namespace recmix::comm
