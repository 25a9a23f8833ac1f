#include "comm/epoch/epoch_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/random.hpp"
#include "device/backend.hpp"
#include "device/stream.hpp"

namespace recmix::comm {
namespace {

struct DeviceLock {
  std::mutex mutex;
  std::atomic<long long> retries{0};
  // The last stream-ordered collective queued on the device by any job of the process, and whose
  // it was: the next one of another job is queued behind it (its stream waits for this event), so
  // the device runs them in the order the epochs gave them. Guarded by mutex.
  std::shared_ptr<device::Event> last;
  const void* last_owner = nullptr;
};

DeviceLock& device_lock(int device_index) {
  static std::mutex registry_mutex;
  static std::map<int, DeviceLock> registry;  // node-stable: never erased
  std::lock_guard lock(registry_mutex);
  return registry[device_index];
}

class EpochCommunicator final : public Communicator {
 public:
  EpochCommunicator(std::unique_ptr<Communicator> device, Communicator& host, int device_index,
                    device::Backend* backend)
      : device_(std::move(device)), host_(host), lock_(device_lock(device_index)), seed_(next_seed_++) {
    RECMIX_REQUIRE(device_ != nullptr, CommError, "epoch communicator: no device communicator");
    RECMIX_REQUIRE(host_.size() == device_->size() && host_.rank() == device_->rank(), CommError,
                   "epoch communicator: the host communicator's ranks differ from the device communicator's");
    if (backend != nullptr && device_->orders_on_stream()) queued_ = backend->create_event();
  }
  ~EpochCommunicator() override {
    std::lock_guard lock(lock_.mutex);
    if (lock_.last_owner == this) lock_.last_owner = nullptr;  // the event stays valid to wait on
  }

  int rank() const override { return device_->rank(); }
  int size() const override { return device_->size(); }
  bool orders_on_stream() const override { return device_->orders_on_stream(); }
  const Communicator* wrapped() const override { return device_.get(); }

  void barrier() override {
    Epoch e(*this, nullptr);
    device_->barrier();
  }
  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type, device::Stream* stream) override {
    Epoch e(*this, stream);
    device_->all_reduce_sum(send, recv, count, type, stream);
  }
  std::unique_ptr<Request> iall_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                                           device::Stream* stream) override {
    Epoch e(*this, stream);
    auto request = device_->iall_reduce_sum(send, recv, count, type, stream);
    return e.queued() ? std::move(request) : done(std::move(request));
  }
  void broadcast(void* buffer, std::size_t count, DataType type, int root, device::Stream* stream) override {
    Epoch e(*this, stream);
    device_->broadcast(buffer, count, type, root, stream);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DataType type, device::Stream* stream) override {
    Epoch e(*this, stream);
    device_->all_gather(send, recv, count, type, stream);
  }
  void all_to_all_v(const void* send, std::span<const std::size_t> send_counts, std::span<const std::size_t> send_displs,
                    void* recv, std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                    DataType type, device::Stream* stream) override {
    Epoch e(*this, stream);
    device_->all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream);
  }
  std::unique_ptr<Request> iall_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                                         std::span<const std::size_t> send_displs, void* recv,
                                         std::span<const std::size_t> recv_counts,
                                         std::span<const std::size_t> recv_displs, DataType type,
                                         device::Stream* stream) override {
    Epoch e(*this, stream);
    auto request =
        device_->iall_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream);
    return e.queued() ? std::move(request) : done(std::move(request));
  }
  std::unique_ptr<Communicator> split(int color, int key) override { return device_->split(color, key); }
  [[noreturn]] void abort(int code, const std::string& why) override {
    device_->abort(code, why);
    std::abort();  // not reached
  }

 private:
  // A collective that finished on the host before its epoch ends (MPI, the staged communicator).
  static std::unique_ptr<Request> done(std::unique_ptr<Request> request) {
    request->wait();
    return completed_request();
  }

  // One device collective's epoch: every rank of the job holds its device's lock from the
  // agreement until the collective is queued on this rank's device behind the one queued there
  // last (stream-ordered, NCCL), or has finished (the others). The host never waits for the
  // device here: the device itself keeps the epochs' order.
  class Epoch {
   public:
    Epoch(EpochCommunicator& c, device::Stream* stream)
        : c_(c), stream_(c.queued_ != nullptr ? stream : nullptr) {
      c_.acquire();
      try {
        if (stream_ != nullptr && c_.lock_.last != nullptr && c_.lock_.last_owner != &c_)
          c_.lock_.last->wait(*stream_);
      } catch (...) {
        c_.lock_.mutex.unlock();
        throw;
      }
    }
    ~Epoch() {
      try {
        if (stream_ != nullptr) {
          c_.queued_->record(*stream_);
          c_.lock_.last = c_.queued_;
          c_.lock_.last_owner = &c_;
        }
      } catch (...) {  // a failed device reports at the job's next call; the lock is freed regardless
      }
      c_.lock_.mutex.unlock();
    }
    Epoch(const Epoch&) = delete;
    Epoch& operator=(const Epoch&) = delete;
    bool queued() const { return stream_ != nullptr; }

   private:
    EpochCommunicator& c_;
    device::Stream* stream_;
  };

  void acquire() {
    for (int attempt = 0;; ++attempt) {
      const bool got = lock_.mutex.try_lock();
      std::int32_t holders = got ? 1 : 0;
      try {
        host_.all_reduce_sum(&holders, &holders, 1, DataType::i32);
      } catch (...) {  // a peer failed (recmix run's guard): the device stays free for other jobs
        if (got) lock_.mutex.unlock();
        throw;
      }
      if (holders == size()) return;
      if (got) lock_.mutex.unlock();
      lock_.retries.fetch_add(1, std::memory_order_relaxed);
      // Jittered so that two jobs retrying together part: up to 50 us x 2^min(attempt, 6).
      const auto cap = 50u << std::min(attempt, 6);
      const auto pause = 1 + random::hash(seed_, static_cast<std::uint64_t>(rank()), ++draws_) % cap;
      std::this_thread::sleep_for(std::chrono::microseconds(pause));
    }
  }

  std::unique_ptr<Communicator> device_;
  Communicator& host_;
  DeviceLock& lock_;
  std::uint64_t seed_;  // apart for every communicator of the process, so their pauses differ
  std::uint64_t draws_ = 0;
  std::shared_ptr<device::Event> queued_;  // marks where this job's last collective was queued
  static inline std::atomic<std::uint64_t> next_seed_{1};
};

}  // namespace

std::unique_ptr<Communicator> make_epoch_communicator(std::unique_ptr<Communicator> device, Communicator& host,
                                                      int device_index, device::Backend* backend) {
  return std::make_unique<EpochCommunicator>(std::move(device), host, device_index, backend);
}

long long epoch_retries(int device_index) { return device_lock(device_index).retries.load(); }

}  // namespace recmix::comm
