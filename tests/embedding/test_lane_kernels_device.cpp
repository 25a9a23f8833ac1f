// The embedding's pooling and update kernels launched on a device backend, in each of its GPU
// decompositions (lanes, with and without prefetch, and fine items), against the block functor
// run on the host over the same inputs: equal bit for bit. Under the strict emulator always; on
// CUDA when a GPU is present (the GPU suite runs it there), else skipped.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "device/backend.hpp"
#include "device/fine_grained.hpp"
#include "embedding/kernel_launch.hpp"
#include "reference.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

// A device copy of a host vector, freed with the fixture.
class DeviceArrays {
 public:
  explicit DeviceArrays(device::Backend& backend) : backend_(backend), stream_(backend.create_stream()) {}
  ~DeviceArrays() {
    for (void* p : owned_) backend_.deallocate(p, device::Tier::device);
  }
  template <class T>
  T* up(const std::vector<T>& host) {
    void* p = backend_.allocate(host.size() * sizeof(T), device::Tier::device);
    owned_.push_back(p);
    backend_.copy(p, host.data(), host.size() * sizeof(T), *stream_);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> down(const T* p, std::size_t n) {
    std::vector<T> host(n);
    backend_.copy(host.data(), p, n * sizeof(T), *stream_);
    stream_->synchronize();
    return host;
  }
  device::Stream& stream() { return *stream_; }

 private:
  device::Backend& backend_;
  std::unique_ptr<device::Stream> stream_;
  std::vector<void*> owned_;
};

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  return test::random_vector(n, rng);
}

struct Restore {
  ~Restore() {
    device::set_gpu_items(device::GpuItems::lanes);
    set_lane_prefetch(true);
  }
};

class LaneKernelsDevice : public testing::TestWithParam<device::BackendKind> {};

TEST_P(LaneKernelsDevice, PoolAndUpdateEqualTheBlockFunctorsBitForBit) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  auto backend = device::make_backend(kind, 1);
  Restore restore;
  const std::int64_t rows = 500, bags = 300;
  for (std::int64_t dim : {16, 64, 7})
    for (auto items : {device::GpuItems::lanes, device::GpuItems::fine})
      for (bool prefetch : {true, false}) {
        SCOPED_TRACE(testing::Message() << "dim " << dim << (items == device::GpuItems::lanes ? ", lanes" : ", fine")
                                        << (prefetch ? ", prefetch" : ""));
        device::set_gpu_items(items);
        set_lane_prefetch(prefetch);
        DeviceArrays dev(*backend);
        std::mt19937_64 rng(dim);
        std::vector<std::int64_t> offsets{0}, index;
        for (std::int64_t j = 0; j < bags; ++j) {
          for (std::int64_t k = 0, len = rng() % 6; k < len; ++k) index.push_back(static_cast<std::int64_t>(rng() % rows));
          offsets.push_back(static_cast<std::int64_t>(index.size()));
        }
        const auto weights = random_floats(rows * dim, 4);
        std::vector<float> expect(bags * dim);
        const kernels::PoolBags host{weights.data(), dim, offsets.data(), index.data(), nullptr, expect.data(), true};
        for (std::int64_t j = 0; j < bags; ++j) host(j);
        float* out = dev.up(std::vector<float>(bags * dim, 9.f));
        launch(*backend, dev.stream(),  bags,
               kernels::PoolBags{dev.up(weights), dim, dev.up(offsets), dev.up(index), nullptr, out, true});
        const auto got = dev.down(out, expect.size());
        EXPECT_EQ(std::memcmp(got.data(), expect.data(), expect.size() * sizeof(float)), 0) << "pooling";

        // Unique rows 0, 7, 14, ... each with 1-4 gradient entries.
        const std::int64_t unique_count = 60, grads = 200;
        std::vector<std::int64_t> unique, entry_offsets{0}, entry_grad;
        for (std::int64_t u = 0; u < unique_count; ++u) {
          unique.push_back(u * 7);
          for (std::int64_t e = 0, len = 1 + rng() % 4; e < len; ++e)
            entry_grad.push_back(static_cast<std::int64_t>(rng() % grads));
          entry_offsets.push_back(static_cast<std::int64_t>(entry_grad.size()));
        }
        const auto grad = random_floats(grads * dim, 6), scale = random_floats(entry_grad.size(), 7);
        for (auto opt : {SparseOptimizerKind::sgd, SparseOptimizerKind::adagrad, SparseOptimizerKind::rowwise_adagrad}) {
          auto w_host = weights;
          std::vector<float> s_host(rows * dim, 0.25f);
          const kernels::UpdateRows step{w_host.data(),       s_host.data(),     dim,           opt,
                                         0.1f,                1e-8f,             unique.data(), entry_offsets.data(),
                                         entry_grad.data(),   scale.data(),      grad.data()};
          for (std::int64_t u = 0; u < unique_count; ++u) step(u);
          float* w = dev.up(weights);
          float* s = dev.up(std::vector<float>(rows * dim, 0.25f));
          const std::int64_t* count = dev.up(std::vector<std::int64_t>{unique_count});
          // The launch covers more items than the count on the device says, as the device grouping's does.
          launch(*backend, dev.stream(), unique_count + 5,
                 kernels::UpdateRows{w, s, dim, opt, 0.1f, 1e-8f, dev.up(unique), dev.up(entry_offsets),
                                     dev.up(entry_grad), dev.up(scale), dev.up(grad), count});
          const auto w_got = dev.down(w, w_host.size());
          const auto s_got = dev.down(s, s_host.size());
          EXPECT_EQ(std::memcmp(w_got.data(), w_host.data(), w_host.size() * sizeof(float)), 0)
              << "update weights, optimizer " << static_cast<int>(opt);
          EXPECT_EQ(std::memcmp(s_got.data(), s_host.data(), s_host.size() * sizeof(float)), 0)
              << "update state, optimizer " << static_cast<int>(opt);
        }
      }
}

// Lanes captured into a graph (emulated under cpu-strict, native on CUDA) and replayed: the
// pooling and row-wise Adagrad's two passes compute from the memory of the replay, as eager
// launches do.
TEST_P(LaneKernelsDevice, CapturedLanesReplayAsEagerLaunches) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  auto backend = device::make_backend(kind, 1);
  Restore restore;
  device::set_gpu_items(device::GpuItems::lanes);
  DeviceArrays dev(*backend);
  const std::int64_t dim = 16, rows = 100, bags = 40;
  std::vector<std::int64_t> offsets{0}, index;
  for (std::int64_t j = 0; j < bags; ++j) {
    index.push_back((j * 37) % rows);
    index.push_back((j * 11 + 3) % rows);
    offsets.push_back(static_cast<std::int64_t>(index.size()));
  }
  const std::vector<std::int64_t> unique{1, 5, 9}, entry_offsets{0, 2, 3, 4}, entry_grad{0, 1, 2, 3};
  const auto weights = random_floats(rows * dim, 3), grad = random_floats(4 * dim, 4);
  std::vector<float> results[2];
  for (int captured = 0; captured < 2; ++captured) {
    float* w = dev.up(weights);
    float* s = dev.up(std::vector<float>(rows * dim, 0.5f));
    float* out = dev.up(std::vector<float>(bags * dim, 0.f));
    const kernels::PoolBags pool{w, dim, dev.up(offsets), dev.up(index), nullptr, out, false};
    const kernels::UpdateRows step{w,  s, dim, SparseOptimizerKind::rowwise_adagrad, 0.1f, 1e-8f, dev.up(unique),
                                   dev.up(entry_offsets), dev.up(entry_grad), nullptr, dev.up(grad)};
    auto issue = [&] {
      launch(*backend, dev.stream(), 3, step);
      launch(*backend, dev.stream(), bags, pool);
    };
    if (captured) {
      backend->begin_capture(dev.stream());
      issue();
      auto graph = backend->end_capture(dev.stream());
      graph->launch(dev.stream());
    } else {
      issue();
    }
    results[captured] = dev.down(out, bags * dim);
    const auto w_after = dev.down(w, rows * dim);
    results[captured].insert(results[captured].end(), w_after.begin(), w_after.end());
  }
  EXPECT_EQ(results[0], results[1]);
}

INSTANTIATE_TEST_SUITE_P(Backends, LaneKernelsDevice,
                         testing::Values(device::BackendKind::cpu_strict, device::BackendKind::cuda),
                         [](const auto& info) { return info.param == device::BackendKind::cuda ? "cuda" : "cpu_strict"; });

}  // namespace
