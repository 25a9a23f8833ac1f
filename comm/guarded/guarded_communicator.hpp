#pragma once
// GuardedCommunicator: a job's communicator in `recmix run`, which lets a rank that fails
// anywhere in a step leave its job together with its peers instead of stranding them in a
// collective. MPI cannot cancel a collective, and a failing rank cannot know the shape of the
// collective its peers will post next (an all-to-all's counts come from the step it abandoned),
// so the failure travels in a collective of fixed shape: before every collective, the ranks
// all-reduce a status word (failed, closing). While every rank is healthy the word is zero and the
// collective runs as usual. A rank that fails posts, in close(true), one status word saying so in
// place of whatever collective it would have posted next; its peers meet it in their next
// collective's status all-reduce, which throws PeerFailedError there, before the collective
// itself is posted. Every collective posted before that point was posted by every rank (each
// passed its status word), so it completes. After a failure has been seen, the guard is closed:
// no more traffic, on any rank. Ranks that end well call close(false): the job's last word.
//
// Cost: one all-reduce of two integers ahead of each collective (a few microseconds on one node).
// What it cannot cover: collectives made on the raw MPI handle (parallel HDF5 inside a
// checkpoint write) and a rank that hangs rather than fails; the scheduler's stuck-job watchdog
// handles those.
#include <memory>

#include "comm/communicator.hpp"

namespace recmix::comm {

class GuardedCommunicator final : public Communicator {
 public:
  explicit GuardedCommunicator(std::unique_ptr<Communicator> inner);

  // This rank's last status word: `failed` says whether it ends with an error. Returns the number
  // of ranks that ended with an error (0: every rank ended well). Does nothing and returns the
  // count seen then when a collective already saw a failure. Every rank calls it exactly once.
  int close(bool failed);
  bool closed() const { return closed_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool orders_on_stream() const override { return inner_->orders_on_stream(); }
  const Communicator* wrapped() const override { return inner_.get(); }

  void barrier() override;
  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                      device::Stream* stream = nullptr) override;
  std::unique_ptr<Request> iall_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                                           device::Stream* stream = nullptr) override;
  void broadcast(void* buffer, std::size_t count, DataType type, int root,
                 device::Stream* stream = nullptr) override;
  void all_gather(const void* send, void* recv, std::size_t count, DataType type,
                  device::Stream* stream = nullptr) override;
  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_displs, void* recv, std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_displs, DataType type,
                    device::Stream* stream = nullptr) override;
  std::unique_ptr<Request> iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                         std::span<const std::size_t> send_displs, void* recv,
                                         std::span<const std::size_t> recv_counts,
                                         std::span<const std::size_t> recv_displs, DataType type,
                                         device::Stream* stream = nullptr) override;
  // The part is not guarded (its own ranks would have to close it).
  std::unique_ptr<Communicator> split(int color, int key) override;
  [[noreturn]] void abort(int code, const std::string& why) override;

  // Status all-reduces made so far (for the overhead figures).
  long long status_words() const { return status_words_; }

 private:
  // The status all-reduce ahead of a collective; throws PeerFailedError when a rank failed or
  // closed while this one goes on.
  void check(const char* operation);

  std::unique_ptr<Communicator> inner_;
  bool closed_ = false;
  int failed_ranks_ = 0;
  long long status_words_ = 0;
};

}  // namespace recmix::comm
