#pragma once
// A backend with a device pool and a stream for the dense-layer tests: host vectors uploaded into
// device buffers the helper keeps, device results downloaded after the stream has finished.
#include <memory>
#include <string>
#include <vector>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"

namespace recmix::test {

struct TestDevice {
  explicit TestDevice(device::BackendKind kind, const std::string& name = "dense test")
      : backend(device::make_backend(kind, 1)), pool(*backend, device::Tier::device, name),
        stream(backend->create_stream()) {}
  float* upload(const std::vector<float>& host) {
    buffers.emplace_back(pool, host.size(), "input");
    backend->copy(buffers.back().data(), host.data(), host.size() * sizeof(float), *stream);
    return buffers.back().data();
  }
  std::vector<float> download(const float* device, std::size_t n) {
    std::vector<float> host(n);
    backend->copy(host.data(), device, n * sizeof(float), *stream);
    stream->synchronize();
    return host;
  }
  std::unique_ptr<device::Backend> backend;
  device::MemoryPool pool;
  std::unique_ptr<device::Stream> stream;
  std::vector<device::Buffer<float>> buffers;
};

}  // namespace recmix::test
