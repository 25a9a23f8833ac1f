#pragma once
// What the device-communicator tests share: values from (seed, rank, index), error counts summed
// over every rank with plain MPI (so a failure on any rank fails all), and a device buffer of
// floats filled and read through its backend.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/random.hpp"
#include "device/backend.hpp"

namespace recmix::comm::test {

inline float value(std::uint64_t seed, int rank, std::uint64_t index) {
  return static_cast<float>(static_cast<int>(random::hash(seed, static_cast<std::uint64_t>(rank), index) % 61) - 30);
}

inline long global_errors(long local) {
  long total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

struct DeviceFloats {
  device::Backend& backend;
  float* ptr;
  std::size_t n;
  DeviceFloats(device::Backend& b, std::size_t count)
      : backend(b), ptr(static_cast<float*>(b.allocate(std::max<std::size_t>(count, 1) * 4, device::Tier::device))),
        n(count) {}
  ~DeviceFloats() { backend.deallocate(ptr, device::Tier::device); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  void upload(const std::vector<float>& h, device::Stream& s) {
    backend.copy(ptr, h.data(), n * 4, s);
    s.synchronize();
  }
  std::vector<float> download(device::Stream& s) {
    std::vector<float> h(n);
    backend.copy(h.data(), ptr, n * 4, s);
    s.synchronize();
    return h;
  }
};

}  // namespace recmix::comm::test
