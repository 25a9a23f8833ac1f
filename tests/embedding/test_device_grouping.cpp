// The device grouping of the sparse update (DeviceGrouping, group_kernels.hpp) under the strict
// device emulator, and on CUDA (CUB's sort and scan) where a GPU is present, against a reference: one group per distinct row in row order, each group's
// entries in CSR order, each entry's gradient vector its bag, the bag's scale carried along; for
// several block counts and radix passes, and one-hot batches given as null offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "embedding/device_grouping.hpp"
#include "embedding/radix_sort.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

template <class T>
std::vector<T> download(device::Backend& b, const T* p, std::size_t n) {
  std::vector<T> host(n);
  auto s = b.create_stream();
  b.copy(host.data(), p, n * sizeof(T), *s);
  s->synchronize();
  return host;
}

template <class T>
device::Buffer<T> upload(device::Backend& b, device::MemoryPool& pool, const std::vector<T>& host) {
  device::Buffer<T> d(pool, std::max<std::size_t>(host.size(), 1), "test input");
  auto s = b.create_stream();
  b.copy(d.data(), host.data(), host.size() * sizeof(T), *s);
  return d;
}

struct Case {
  std::int64_t bags, max_bag, rows;
  bool one_hot = false;  // a row a bag, passed as null offsets
};

class DeviceGroupingTest : public testing::TestWithParam<Case> {};

void check_grouping(device::BackendKind kind, const Case& c, const std::vector<std::int64_t>& offsets,
                    const std::vector<std::int64_t>& rows, const std::vector<float>& scale);

TEST_P(DeviceGroupingTest, MatchesAStableSortByRow) {
  const Case c = GetParam();
  std::mt19937_64 rng(c.bags * 31 + c.rows);
  std::vector<std::int64_t> offsets{0}, rows;
  std::vector<float> scale;
  for (std::int64_t j = 0; j < c.bags; ++j) {
    const std::int64_t len = c.one_hot ? 1 : std::uniform_int_distribution<std::int64_t>(0, c.max_bag)(rng);
    // Skewed rows: many duplicates, as in real batches.
    for (std::int64_t k = 0; k < len; ++k)
      rows.push_back(std::min<std::int64_t>(c.rows - 1, std::int64_t(std::exponential_distribution<>(8.0 / c.rows)(rng))));
    offsets.push_back(static_cast<std::int64_t>(rows.size()));
    scale.push_back(1.0f / float(j + 1));
  }
  std::vector<device::BackendKind> kinds{device::BackendKind::cpu_strict};
  if (device::cuda_device_available()) kinds.push_back(device::BackendKind::cuda);
  for (const auto kind : kinds) check_grouping(kind, c, offsets, rows, scale);
}

void check_grouping(device::BackendKind kind, const Case& c, const std::vector<std::int64_t>& offsets,
                    const std::vector<std::int64_t>& rows, const std::vector<float>& scale) {
  SCOPED_TRACE(kind == device::BackendKind::cuda ? "cuda" : "cpu-strict");
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  auto backend = device::make_backend(kind, 2);
  device::MemoryPool pool(*backend, device::Tier::device, "grouping test");
  auto d_offsets = upload(*backend, pool, offsets);
  auto d_rows = upload(*backend, pool, rows);
  auto d_scale = upload(*backend, pool, scale);
  DeviceGrouping grouping(*backend, pool);
  auto stream = backend->create_stream();
  grouping.group(*stream, c.one_hot ? nullptr : d_offsets.data(), d_rows.data(), c.bags, n, detail::bits_below(c.rows),
                 d_scale.data());
  kernels::UpdateRows f{};
  grouping.fill(f);
  EXPECT_EQ(grouping.launch_size(), n);

  // Reference: entries sorted stably by row.
  std::vector<std::int64_t> order(n), bag(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return rows[a] < rows[b]; });
  for (std::int64_t j = 0; j < c.bags; ++j)
    for (std::int64_t k = offsets[j]; k < offsets[j + 1]; ++k) bag[k] = j;
  std::vector<std::int64_t> want_unique, want_offsets;
  for (std::int64_t i = 0; i < n; ++i)
    if (i == 0 || rows[order[i]] != rows[order[i - 1]]) {
      want_unique.push_back(rows[order[i]]);
      want_offsets.push_back(i);
    }
  want_offsets.push_back(n);
  const auto groups = download(*backend, f.unique_count, 1)[0];
  ASSERT_EQ(groups, static_cast<std::int64_t>(want_unique.size()));
  EXPECT_EQ(download(*backend, f.unique_rows, groups), want_unique);
  EXPECT_EQ(download(*backend, f.entry_offsets, groups + 1), want_offsets);
  const auto grad = download(*backend, f.entry_grad, n);
  const auto sc = download(*backend, f.entry_scale, n);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(grad[i], bag[order[i]]) << i;
    ASSERT_EQ(sc[i], scale[bag[order[i]]]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeviceGroupingTest,
                         testing::Values(Case{1, 1, 1}, Case{5, 0, 10}, Case{40, 3, 50},
                                         Case{3000, 4, 300000},      // several blocks, 3 passes
                                         Case{20000, 20, 70000000},   // the most blocks, 4 passes
                                         Case{1, 1, 1, true}, Case{3000, 1, 300000, true}),
                         [](const auto& info) {
                           return (info.param.one_hot ? "one_hot_bags" : "bags") + std::to_string(info.param.bags);
                         });

}  // namespace
