// The decompositions of each embedding kernel (device/fine_grained.hpp): the CPU's item per bag
// or row, and the GPU's item per component and lanes of 4 components, run here on the host over
// the same inputs, must give the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "device/fine_grained.hpp"
#include "embedding/half_kernels.hpp"
#include "embedding/kernels.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

const kernels::UpdateRows* update_of(const kernels::UpdateRows& f) { return &f; }
const kernels::UpdateRows* update_of(const kernels::UpdateRowsHalf& f) { return &f.update; }
template <class F>
const kernels::UpdateRows* update_of(const F&) {
  return nullptr;
}

// Runs make(state) over `items` items, over its fine items on a copy, and over its lanes on
// another (row-wise Adagrad's state pass first, as the launchers do); the states must agree.
template <class Make>
void check(std::int64_t items, const std::vector<std::vector<float>>& state, Make make, const char* what) {
  auto coarse = state, fine = state, lanes = state;
  auto fc = make(coarse);
  for (std::int64_t i = 0; i < items; ++i) fc(i);
  auto ff = make(fine);
  static_assert(device::FineGrained<decltype(ff)>);
  const device::FineItems<decltype(ff)> run{ff};
  for (std::int64_t i = 0; i < ff.fine_items(items); ++i) run(i);
  auto fl = make(lanes);
  if constexpr (device::LaneGrained<decltype(fl)>) {
    const kernels::UpdateRows* update = update_of(fl);
    if (update && update->kind == SparseOptimizerKind::rowwise_adagrad)
      for (std::int64_t i = 0; i < items; ++i) kernels::RowwiseState{*update}(i);
    const device::LaneItems<decltype(fl)> run_lanes{fl};
    for (std::int64_t i = 0; i < fl.lane_items(items); ++i) run_lanes(i);
  } else {
    lanes = coarse;
  }
  for (std::size_t k = 0; k < state.size(); ++k) {
    ASSERT_EQ(coarse[k].size(), fine[k].size());
    EXPECT_EQ(std::memcmp(coarse[k].data(), fine[k].data(), coarse[k].size() * sizeof(float)), 0)
        << what << ", array " << k << " (fine items)";
    EXPECT_EQ(std::memcmp(coarse[k].data(), lanes[k].data(), coarse[k].size() * sizeof(float)), 0)
        << what << ", array " << k << " (lanes)";
  }
}

class FineEmbeddingDims : public testing::TestWithParam<std::int64_t> {};

// dim 7: a short last lane; 16: whole lanes (the Kaggle shape's); 3: one short lane.
INSTANTIATE_TEST_SUITE_P(Dims, FineEmbeddingDims, testing::Values(7, 16, 3));

TEST_P(FineEmbeddingDims, PoolCombineAndGather) {
  const std::int64_t dim = GetParam(), rows = 40, bags = 25;
  std::mt19937_64 rng(3);
  std::vector<std::int64_t> offsets{0}, index, out_pos(bags);
  const std::int64_t* no_pos = nullptr;
  for (std::int64_t j = 0; j < bags; ++j) {
    for (std::int64_t k = 0, len = rng() % 5; k < len; ++k) index.push_back(static_cast<std::int64_t>(rng() % rows));
    offsets.push_back(static_cast<std::int64_t>(index.size()));
    out_pos[j] = bags - 1 - j;
  }
  const auto weights = random_floats(rows * dim, 4);
  for (bool mean : {false, true})
    for (bool prefetch : {true, false})
      for (const std::int64_t* pos : {no_pos, static_cast<const std::int64_t*>(out_pos.data())})
        check(bags, {std::vector<float>(bags * dim, 9.f)},
              [&](auto& s) {
                return kernels::PoolBags{weights.data(), dim, offsets.data(), index.data(), pos, s[0].data(),
                                         mean, prefetch};
              },
              "pool");
  const auto scale = random_floats(bags, 5);
  for (const float* sc : {static_cast<const float*>(nullptr), scale.data()}) {
    check(bags, {std::vector<float>(bags * dim, 9.f)},
          [&](auto& s) {
            return kernels::CombineParts{weights.data(), dim, offsets.data(), index.data(), sc, s[0].data()};
          },
          "combine");
    check(bags, {std::vector<float>(bags * dim, 9.f)},
          [&](auto& s) { return kernels::GatherRows{weights.data(), dim, out_pos.data(), sc, s[0].data()}; },
          "gather");
  }
}

TEST_P(FineEmbeddingDims, UpdateRows) {
  const std::int64_t dim = GetParam(), table_rows = 30, grads = 12;
  // Unique rows 3, 7, 29 with 2, 1 and 6 entries (more than a lane loads ahead, UpdateRows::kAhead);
  // the launch covers 9 items, the count says 3.
  const std::vector<std::int64_t> unique{3, 7, 29}, entry_offsets{0, 2, 3, 9},
      entry_grad{0, 5, 11, 1, 2, 3, 9, 4, 7};
  const std::int64_t count = 3;
  const auto grad = random_floats(grads * dim, 6), scale = random_floats(9, 7);
  for (auto kind : {SparseOptimizerKind::sgd, SparseOptimizerKind::adagrad, SparseOptimizerKind::rowwise_adagrad})
    for (const float* sc : {static_cast<const float*>(nullptr), scale.data()})
      check(9, {random_floats(table_rows * dim, 8), std::vector<float>(table_rows * dim, 0.25f)},
            [&](auto& s) {
              return kernels::UpdateRows{s[0].data(), s[1].data(), dim,  kind,      0.1f,        1e-8f,
                                         unique.data(), entry_offsets.data(), entry_grad.data(), sc, grad.data(), &count};
            },
            "update");
}

// A 16-bit table of rows x dim random values held in a float array (check() compares bytes).
std::vector<float> half_table(half::Storage storage, std::int64_t rows, std::int64_t dim, std::uint64_t seed) {
  const auto values = random_floats(rows * dim, seed);
  std::vector<float> held((rows * dim + 1) / 2, 0.f);
  auto* h = reinterpret_cast<std::uint16_t*>(held.data());
  for (std::size_t i = 0; i < values.size(); ++i) h[i] = kernels::float_to_half(storage, values[i], false, 0u);
  return held;
}

TEST_P(FineEmbeddingDims, HalfTablePoolAndUpdate) {
  const std::int64_t dim = GetParam(), rows = 30, bags = 11, grads = 12;
  std::mt19937_64 rng(5);
  std::vector<std::int64_t> offsets{0}, index;
  for (std::int64_t j = 0; j < bags; ++j) {
    for (std::int64_t k = 0, len = rng() % 4; k < len; ++k) index.push_back(static_cast<std::int64_t>(rng() % rows));
    offsets.push_back(static_cast<std::int64_t>(index.size()));
  }
  // Two shards in the buffer: table 1 rows 100.. at local rows 0..; table 0 rows 0.. at 20..
  const std::vector<std::int64_t> base{0, 20}, row_begin{100, 0};
  const std::vector<int> table{1, 0};
  const kernels::ShardRows shards{base.data(), table.data(), row_begin.data(), 2};
  const std::vector<std::int64_t> unique{3, 7, 29}, entry_offsets{0, 2, 3, 9},
      entry_grad{0, 5, 11, 1, 2, 3, 9, 4, 7};  // 6 entries for row 29: past UpdateRows::kAhead
  const std::int64_t count = 3;
  const auto grad = random_floats(grads * dim, 6);
  for (auto storage : {half::Storage::fp16, half::Storage::bf16}) {
    const auto table_bits = half_table(storage, rows, dim, 4);
    const auto* w = reinterpret_cast<const std::uint16_t*>(table_bits.data());
    for (bool mean : {false, true})
      for (bool prefetch : {true, false})
        check(bags, {std::vector<float>(bags * dim, 9.f)},
              [&](auto& s) {
                return kernels::PoolBagsHalf{w,           storage, dim, offsets.data(), index.data(), nullptr,
                                             s[0].data(), mean,    prefetch};
              },
              "pool, 16-bit table");
    for (auto kind : {SparseOptimizerKind::sgd, SparseOptimizerKind::adagrad, SparseOptimizerKind::rowwise_adagrad})
      for (bool stochastic : {false, true})
        check(9, {table_bits, std::vector<float>(rows * dim, 0.25f)},
              [&](auto& s) {
                const kernels::UpdateRows step{nullptr, s[1].data(), dim, kind, 0.1f, 1e-8f, unique.data(),
                                               entry_offsets.data(), entry_grad.data(), nullptr, grad.data(), &count};
                return kernels::UpdateRowsHalf{step, reinterpret_cast<std::uint16_t*>(s[0].data()), storage,
                                               stochastic, 11, 3, shards};
              },
              "update, 16-bit table");
  }
}

}  // namespace
