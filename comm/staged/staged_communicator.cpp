#include "comm/staged/staged_communicator.hpp"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "device/counters.hpp"
#include "device/stream.hpp"

namespace recmix::comm {
namespace {

// Elements from the start of a buffer that counts/displacements address.
std::size_t extent(std::span<const std::size_t> counts, std::span<const std::size_t> displs) {
  std::size_t end = 0;
  for (std::size_t p = 0; p < counts.size() && p < displs.size(); ++p)
    if (counts[p] > 0) end = std::max(end, displs[p] + counts[p]);
  return end;
}

// A host collective in flight; on completion its receive staging goes to the device buffer.
class StagedRequest final : public Request {
 public:
  StagedRequest(std::unique_ptr<Request> inner, std::vector<char> send, std::vector<char> recv, void* device_recv,
                device::Backend& backend)
      : inner_(std::move(inner)), send_(std::move(send)), recv_(std::move(recv)), device_recv_(device_recv),
        backend_(backend) {}
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }
  void wait() override {
    if (done_) return;
    inner_->wait();
    finish();
  }
 private:
  void finish() {
    done_ = true;
    device::CommSyncScope staging;  // counted as the communicator's, not the step's (counters.hpp)
    auto stream = backend_.create_stream();
    if (!recv_.empty()) backend_.copy(device_recv_, recv_.data(), recv_.size(), *stream);
    stream->synchronize();
  }
  std::unique_ptr<Request> inner_;
  std::vector<char> send_, recv_;  // moved in after the host call started: the heap buffers stay put
  void* device_recv_;
  device::Backend& backend_;
  bool done_ = false;
};

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(Communicator& host, device::Backend& backend, std::unique_ptr<Communicator> owned = nullptr)
      : owned_(std::move(owned)), host_(owned_ ? *owned_ : host), backend_(backend), stream_(backend.create_stream()) {}

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  void barrier() override { host_.barrier(); }
  // As NCCL's are ordered on their stream: a call given a stream runs when issued, as the
  // emulator runs all work, and is complete when it returns.
  bool orders_on_stream() const override { return true; }
  // As NCCL's are captured: recorded as a host task of the capture (Backend::host_task), which
  // each replay runs as the blocking call, on what the buffers hold then.
  bool captures_on_stream() const override { return true; }

  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                      device::Stream* stream) override {
    const std::size_t bytes = count * size_of(type);
    check(send, bytes, "all_reduce_sum send buffer");
    check(recv, bytes, "all_reduce_sum receive buffer");
    if (recorded(stream, [=, this] { all_reduce_sum(send, recv, count, type, nullptr); })) return;
    auto host = to_host(send, bytes);
    host_.all_reduce_sum(host.data(), host.data(), count, type);
    to_device(recv, host);
  }
  std::unique_ptr<Request> iall_reduce_sum(const void* send, void* recv, std::size_t count, DataType type,
                                           device::Stream* stream) override {
    const std::size_t bytes = count * size_of(type);
    check(send, bytes, "iall_reduce_sum send buffer");
    check(recv, bytes, "iall_reduce_sum receive buffer");
    if (stream != nullptr) {  // ordered on the stream: done now, or recorded into its capture
      all_reduce_sum(send, recv, count, type, stream);
      return completed_request();
    }
    std::vector<char> staged = to_host(send, bytes);
    std::vector<char> result(bytes);
    auto inner = host_.iall_reduce_sum(staged.data(), result.data(), count, type);
    return std::make_unique<StagedRequest>(std::move(inner), std::move(staged), std::move(result), recv, backend_);
  }

  void broadcast(void* buffer, std::size_t count, DataType type, int root, device::Stream* stream) override {
    const std::size_t bytes = count * size_of(type);
    check(buffer, bytes, "broadcast buffer");
    if (recorded(stream, [=, this] { broadcast(buffer, count, type, root, nullptr); })) return;
    auto host = rank() == root ? to_host(buffer, bytes) : std::vector<char>(bytes);
    host_.broadcast(host.data(), count, type, root);
    to_device(buffer, host);
  }

  void all_gather(const void* send, void* recv, std::size_t count, DataType type, device::Stream* stream) override {
    const std::size_t bytes = count * size_of(type);
    check(send, bytes, "all_gather send buffer");
    check(recv, bytes * size(), "all_gather receive buffer");
    if (recorded(stream, [=, this] { all_gather(send, recv, count, type, nullptr); })) return;
    auto host = to_host(send, bytes);
    std::vector<char> result(bytes * size());
    host_.all_gather(host.data(), result.data(), count, type);
    to_device(recv, result);
  }

  void all_to_all_v(const void* send, std::span<const std::size_t> sc, std::span<const std::size_t> sd, void* recv,
                    std::span<const std::size_t> rc, std::span<const std::size_t> rd, DataType type,
                    device::Stream* stream) override {
    const std::size_t elem = size_of(type);
    const std::size_t send_bytes = extent(sc, sd) * elem, recv_bytes = extent(rc, rd) * elem;
    check(send, send_bytes, "all_to_all_v send buffer");
    check(recv, recv_bytes, "all_to_all_v receive buffer");
    if (recorded(stream, all_to_all_task(send, sc, sd, recv, rc, rd, type))) return;
    auto host = to_host(send, send_bytes);
    std::vector<char> result(recv_bytes);
    host_.all_to_all_v(host.data(), sc, sd, result.data(), rc, rd, type);
    to_device(recv, result);
  }
  std::unique_ptr<Request> iall_to_all_v(const void* send, std::span<const std::size_t> sc,
                                         std::span<const std::size_t> sd, void* recv, std::span<const std::size_t> rc,
                                         std::span<const std::size_t> rd, DataType type,
                                         device::Stream* stream) override {
    const std::size_t elem = size_of(type);
    const std::size_t send_bytes = extent(sc, sd) * elem, recv_bytes = extent(rc, rd) * elem;
    check(send, send_bytes, "iall_to_all_v send buffer");
    check(recv, recv_bytes, "iall_to_all_v receive buffer");
    if (stream != nullptr) {  // ordered on the stream: done now, or recorded into its capture
      all_to_all_v(send, sc, sd, recv, rc, rd, type, stream);
      return completed_request();
    }
    std::vector<char> staged = to_host(send, send_bytes);
    std::vector<char> result(recv_bytes);
    auto inner = host_.iall_to_all_v(staged.data(), sc, sd, result.data(), rc, rd, type);
    return std::make_unique<StagedRequest>(std::move(inner), std::move(staged), std::move(result), recv, backend_);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    auto part = host_.split(color, key);
    if (!part) return nullptr;
    Communicator& h = *part;
    return std::make_unique<StagedCommunicator>(h, backend_, std::move(part));
  }

  [[noreturn]] void abort(int code, const std::string& why) override {
    host_.abort(code, why);
    std::abort();  // not reached: host_.abort does not return
  }

 private:
  // Records `call` (the blocking collective, with its arguments held by value) when this thread
  // captures `stream`; false, doing nothing, otherwise.
  bool recorded(device::Stream* stream, std::function<void()> call) {
    if (stream == nullptr || !backend_.capturing(*stream)) return false;
    backend_.host_task(*stream, std::move(call));
    return true;
  }
  // all_to_all_v as a task: the counts and displacements copied, as a capture freezes them.
  std::function<void()> all_to_all_task(const void* send, std::span<const std::size_t> sc,
                                        std::span<const std::size_t> sd, void* recv, std::span<const std::size_t> rc,
                                        std::span<const std::size_t> rd, DataType type) {
    using Sizes = std::vector<std::size_t>;
    return [=, this, send_counts = Sizes(sc.begin(), sc.end()), send_displs = Sizes(sd.begin(), sd.end()),
            recv_counts = Sizes(rc.begin(), rc.end()), recv_displs = Sizes(rd.begin(), rd.end())] {
      all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, nullptr);
    };
  }
  void check(const void* p, std::size_t bytes, const char* what) const {
    if (bytes == 0) return;
    try {
      backend_.check_device_memory(p, bytes, what);
    } catch (const DeviceError& e) {
      throw CommError(fmt::format("device communicator: {}", e.what()));
    }
  }
  std::vector<char> to_host(const void* device, std::size_t bytes) {
    std::vector<char> host(bytes);
    if (bytes == 0) return host;
    device::CommSyncScope staging;
    backend_.copy(host.data(), device, bytes, *stream_);
    stream_->synchronize();
    return host;
  }
  void to_device(void* device, const std::vector<char>& host) {
    if (host.empty()) return;
    device::CommSyncScope staging;
    backend_.copy(device, host.data(), host.size(), *stream_);
    stream_->synchronize();
  }

  std::unique_ptr<Communicator> owned_;
  Communicator& host_;
  device::Backend& backend_;
  std::unique_ptr<device::Stream> stream_;
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(Communicator& host, device::Backend& backend) {
  return std::make_unique<StagedCommunicator>(host, backend);
}

}  // namespace recmix::comm
