// The 16-bit table kernels (embedding/half_kernels.hpp) against the fp32 ones run on the decoded
// table: pooling bit for bit, updates rounded to nearest bit for bit; stochastic rounding is
// deterministic, independent of the shard layout, and keeps small updates in expectation. And
// against double precision: pooling within the fp32 summation bound, each updated weight the
// exact optimizer step rounded by the rule of docs/math.md, with the element's random bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.hpp"
#include "embedding/half_kernels.hpp"
#include "embedding/kernels.hpp"

using namespace recmix;
using namespace recmix::embedding;
using namespace recmix::embedding::kernels;
using half::Storage;

namespace {

const Storage kStorages[] = {Storage::fp16, Storage::bf16};
const SparseOptimizerKind kKinds[] = {SparseOptimizerKind::sgd, SparseOptimizerKind::adagrad,
                                      SparseOptimizerKind::rowwise_adagrad};

std::string name_of(Storage s) { return s == Storage::bf16 ? "bf16" : "fp16"; }

std::vector<float> decode(Storage s, const std::vector<std::uint16_t>& h) {
  std::vector<float> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = half_to_float(s, h[i]);
  return out;
}

std::vector<std::uint16_t> encode(Storage s, const std::vector<float>& x) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = s == Storage::bf16 ? half::float_to_bf16(x[i]) : half::float_to_fp16(x[i]);
  return out;
}

std::vector<float> normal(std::size_t n, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

void expect_bits_equal(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(half::bits_of(a[i]), half::bits_of(b[i]))
        << what << " element " << i << ": " << a[i] << " vs " << b[i];
}

std::size_t state_size(SparseOptimizerKind kind, std::int64_t rows, std::int64_t dim) {
  if (kind == SparseOptimizerKind::adagrad) return static_cast<std::size_t>(rows * dim);
  return kind == SparseOptimizerKind::rowwise_adagrad ? static_cast<std::size_t>(rows) : 0;
}

// One batch for the update kernels: unique rows, their entries (duplicates: a row receiving
// several gradient vectors), the gradients.
struct Batch {
  std::vector<std::int64_t> unique_rows, entry_offsets{0}, entry_grad;
  std::vector<float> entry_scale, grad;
};

Batch random_batch(std::int64_t rows, std::int64_t dim, int unique, bool scaled, std::mt19937_64& rng) {
  Batch b;
  std::vector<std::int64_t> all(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) all[static_cast<std::size_t>(r)] = r;
  std::shuffle(all.begin(), all.end(), rng);
  b.unique_rows.assign(all.begin(), all.begin() + unique);
  const int num_grads = 7;
  b.grad = normal(static_cast<std::size_t>(num_grads * dim), 0.5f, rng);
  std::uniform_int_distribution<int> count(1, 4), which(0, num_grads - 1);
  std::uniform_real_distribution<float> scale(0.25f, 2.f);
  for (int u = 0; u < unique; ++u) {
    const int c = count(rng);
    for (int e = 0; e < c; ++e) {
      b.entry_grad.push_back(which(rng));
      if (scaled) b.entry_scale.push_back(scale(rng));
    }
    b.entry_offsets.push_back(static_cast<std::int64_t>(b.entry_grad.size()));
  }
  return b;
}

UpdateRows fp32_update(SparseOptimizerKind kind, std::int64_t dim, float* weights, float* state, const Batch& b) {
  UpdateRows k{};
  k.weights = weights;
  k.state = state;
  k.dim = dim;
  k.kind = kind;
  k.lr = 0.05f;
  k.eps = 1e-6f;
  k.unique_rows = b.unique_rows.data();
  k.entry_offsets = b.entry_offsets.data();
  k.entry_grad = b.entry_grad.data();
  k.entry_scale = b.entry_scale.empty() ? nullptr : b.entry_scale.data();
  k.grad = b.grad.data();
  return k;
}

// A shard layout: the vectors behind a ShardRows, and each shard's row count.
struct Layout {
  std::vector<std::int64_t> base, row_begin, size;
  std::vector<int> table;
  ShardRows view() const {
    return {base.data(), table.data(), row_begin.data(), static_cast<std::int64_t>(base.size())};
  }
  std::int64_t rows() const { return base.back() + size.back(); }
  // The local row of row r of table t (-1: not held).
  std::int64_t local(int t, std::int64_t r) const {
    for (std::size_t s = 0; s < base.size(); ++s)
      if (table[s] == t && r >= row_begin[s] && r < row_begin[s] + size[s]) return base[s] + r - row_begin[s];
    return -1;
  }
};

UpdateRowsHalf half_update(const UpdateRows& update, std::uint16_t* weights, Storage storage, bool stochastic,
                           std::uint64_t seed, std::int64_t step, const Layout& layout) {
  UpdateRowsHalf k{};
  k.update = update;
  k.update.weights = nullptr;
  k.weights = weights;
  k.storage = storage;
  k.stochastic = stochastic;
  k.seed = seed;
  k.step = step;
  k.shards = layout.view();
  return k;
}

template <class Kernel>
void run_all(const Kernel& k, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) k(i);
}

const Layout kOneShard{{0}, {0}, {1 << 20}, {0}};

TEST(HalfKernels, PoolingEqualsFp32PoolingOfDecodedTable) {
  std::mt19937_64 rng(11);
  const std::int64_t rows = 40, bags = 24;
  for (Storage s : kStorages) {
    for (std::int64_t dim : {16, 80}) {
      const std::vector<std::uint16_t> table = encode(s, normal(static_cast<std::size_t>(rows * dim), 1.f, rng));
      const std::vector<float> decoded = decode(s, table);
      std::vector<std::int64_t> offsets{0}, idx, out_pos(static_cast<std::size_t>(bags));
      std::uniform_int_distribution<std::int64_t> len(0, 6), row(0, rows - 1);
      for (std::int64_t j = 0; j < bags; ++j) {
        for (std::int64_t l = len(rng); l > 0; --l) idx.push_back(row(rng));
        offsets.push_back(static_cast<std::int64_t>(idx.size()));
        out_pos[static_cast<std::size_t>(j)] = (j * 7 + 3) % bags;  // a permutation (7 and 24 coprime)
      }
      for (bool mean : {false, true}) {
        for (bool positioned : {false, true}) {
          SCOPED_TRACE(name_of(s) + " dim " + std::to_string(dim) + (mean ? " mean" : " sum") +
                       (positioned ? " out_pos" : ""));
          const std::int64_t* pos = positioned ? out_pos.data() : nullptr;
          std::vector<float> got(static_cast<std::size_t>(bags * dim), -1.f), want(got.size(), -2.f);
          run_all(PoolBagsHalf{table.data(), s, dim, offsets.data(), idx.data(), pos, got.data(), mean}, bags);
          run_all(PoolBags{decoded.data(), dim, offsets.data(), idx.data(), pos, want.data(), mean}, bags);
          expect_bits_equal(got, want, "pooled");
          // Against double precision: sequential fp32 sums of n terms err by at most about
          // n x 2^-24 x (sum of |terms|); the mean's scaling adds one more rounding.
          for (std::size_t j = 0; j < static_cast<std::size_t>(bags); ++j) {
            const std::int64_t n = offsets[j + 1] - offsets[j];
            const std::int64_t o = positioned ? out_pos[j] : static_cast<std::int64_t>(j);
            for (std::int64_t d = 0; d < dim; ++d) {
              double ref = 0, abs_sum = 0;
              for (std::int64_t k = offsets[j]; k < offsets[j + 1]; ++k) {
                const double v = decoded[static_cast<std::size_t>(idx[static_cast<std::size_t>(k)] * dim + d)];
                ref += v;
                abs_sum += std::fabs(v);
              }
              if (mean && n > 0) {
                ref /= static_cast<double>(n);
                abs_sum /= static_cast<double>(n);
              }
              const double bound = static_cast<double>(n + 1) * std::ldexp(abs_sum, -24) + 1e-30;
              ASSERT_NEAR(got[static_cast<std::size_t>(o * dim + d)], ref, bound) << "bag " << j << " dim " << d;
            }
          }
        }
      }
    }
  }
}

std::vector<float> initial_state(SparseOptimizerKind kind, std::int64_t rows, std::int64_t dim,
                                 std::mt19937_64& rng) {
  std::uniform_real_distribution<float> acc(0.05f, 1.f);
  std::vector<float> state(state_size(kind, rows, dim));
  for (float& x : state) x = acc(rng);
  return state;
}

std::string case_name(Storage s, SparseOptimizerKind kind, std::int64_t dim) {
  const char* k = kind == SparseOptimizerKind::sgd       ? "sgd"
                  : kind == SparseOptimizerKind::adagrad ? "adagrad"
                                                         : "rowwise_adagrad";
  return name_of(s) + " " + k + " dim " + std::to_string(dim);
}

// `steps` updates, rounded to nearest, of a table of `rows` rows, `unique` of them per batch:
// equal bit for bit to UpdateRows on the decoded table, encoded to nearest.
void check_nearest(Storage s, SparseOptimizerKind kind, std::int64_t dim, bool scaled, std::int64_t rows,
                   int unique, int steps, std::mt19937_64& rng) {
  SCOPED_TRACE(case_name(s, kind, dim) + (scaled ? " entry_scale" : "") + " rows " + std::to_string(rows));
  const std::vector<std::uint16_t> initial = encode(s, normal(static_cast<std::size_t>(rows * dim), 1.f, rng));
  std::vector<std::uint16_t> table = initial, want = initial;
  std::vector<float> state = initial_state(kind, rows, dim, rng), want_state = state;
  for (int step = 0; step < steps; ++step) {
    const Batch b = random_batch(rows, dim, unique, scaled, rng);
    std::vector<float> decoded = decode(s, want);
    run_all(fp32_update(kind, dim, decoded.data(), want_state.data(), b), unique);
    want = encode(s, decoded);
    // unique_count set: a launch past the count leaves the extra items alone.
    const std::int64_t count = unique;
    UpdateRowsHalf k =
        half_update(fp32_update(kind, dim, nullptr, state.data(), b), table.data(), s, false, 5, step, kOneShard);
    k.update.unique_count = &count;
    run_all(k, unique + 3);
    for (std::size_t i = 0; i < table.size(); ++i)
      ASSERT_EQ(table[i], want[i]) << "step " << step << " element " << i;
    expect_bits_equal(state, want_state, "state");
  }
  EXPECT_NE(table, initial);
}

TEST(HalfKernels, NearestUpdateEqualsFp32UpdateThenRounding) {
  std::mt19937_64 rng(12);
  for (Storage s : kStorages)
    for (SparseOptimizerKind kind : kKinds)
      for (std::int64_t dim : {16, 80})
        for (bool scaled : {false, true}) check_nearest(s, kind, dim, scaled, 12, 6, 3, rng);
}

// A one-ulp fp32 difference changes the 16-bit result only near a rounding midpoint (about 1 in
// 2^13 elements for fp16, 2^16 for bf16): many rows, so that an arithmetic that differs from
// UpdateRows' shows.
TEST(HalfKernels, NearestUpdateEqualsFp32UpdateOnManyRows) {
  std::mt19937_64 rng(15);
  for (Storage s : kStorages)
    for (SparseOptimizerKind kind : kKinds) check_nearest(s, kind, 80, true, 8192, 8192, 2, rng);
}

// One update per batch (optimizer steps 100, 101, ...) of a table laid out as `layout`: the
// batches' rows are local rows of `layout`.
void run_stochastic(Storage s, SparseOptimizerKind kind, std::int64_t dim, std::vector<std::uint16_t>& table,
                    std::vector<float>& state, const std::vector<Batch>& batches, const Layout& layout,
                    std::uint64_t seed, bool stochastic = true) {
  for (std::size_t step = 0; step < batches.size(); ++step) {
    const Batch& b = batches[step];
    run_all(half_update(fp32_update(kind, dim, nullptr, state.data(), b), table.data(), s, stochastic, seed,
                        static_cast<std::int64_t>(step) + 100, layout),
            static_cast<std::int64_t>(b.unique_rows.size()));
  }
}

TEST(HalfKernels, StochasticUpdateIsDeterministicAndKeyed) {
  std::mt19937_64 rng(13);
  const std::int64_t rows = 12, dim = 80;
  for (Storage s : kStorages) {
    for (SparseOptimizerKind kind : kKinds) {
      SCOPED_TRACE(case_name(s, kind, dim));
      const std::vector<std::uint16_t> initial = encode(s, normal(static_cast<std::size_t>(rows * dim), 1.f, rng));
      const std::vector<float> state0 = initial_state(kind, rows, dim, rng);
      std::vector<Batch> batches;
      for (int i = 0; i < 3; ++i) batches.push_back(random_batch(rows, dim, 8, i == 1, rng));
      auto run = [&](std::uint64_t seed, bool stochastic) {
        std::pair<std::vector<std::uint16_t>, std::vector<float>> out{initial, state0};
        run_stochastic(s, kind, dim, out.first, out.second, batches, kOneShard, seed, stochastic);
        return out;
      };
      const auto a = run(7, true), b = run(7, true);
      EXPECT_EQ(a.first, b.first);
      expect_bits_equal(a.second, b.second, "state");
      EXPECT_NE(a.first, run(8, true).first) << "the seed changes the rounding";
      EXPECT_NE(a.first, run(7, false).first) << "stochastic differs from nearest";
    }
  }
}

TEST(HalfKernels, ShardRowsLocatesTableRows) {
  // Table 1 rows 0..7 at local 0..7, table 0 rows 6..10 at 7..11, table 0 rows 0..6 at 11..17.
  const Layout split{{0, 7, 11}, {0, 6, 0}, {7, 4, 6}, {1, 0, 0}};
  const ShardRows v = split.view();
  for (int t = 0; t < 2; ++t)
    for (std::int64_t r = 0; r < (t == 0 ? 10 : 7); ++r) {
      const std::int64_t l = split.local(t, r);
      ASSERT_GE(l, 0);
      EXPECT_EQ(v.locate(l).table, t) << "local " << l;
      EXPECT_EQ(v.locate(l).row, r) << "local " << l;
    }
}

TEST(HalfKernels, StochasticUpdateIndependentOfShardLayout) {
  std::mt19937_64 rng(14);
  const std::int64_t dim = 80;
  // Two tables of 10 and 7 rows: one shard each (table 0 first), or table 1 first and table 0
  // split in two shards, its second half first; the unique rows listed in reverse order there.
  const Layout whole{{0, 10}, {0, 0}, {10, 7}, {0, 1}};
  const Layout split{{0, 7, 11}, {0, 6, 0}, {7, 4, 6}, {1, 0, 0}};
  const std::int64_t rows = whole.rows();
  ASSERT_EQ(split.rows(), rows);
  auto to_split = [&](std::int64_t l) { return l < 10 ? split.local(0, l) : split.local(1, l - 10); };
  for (Storage s : kStorages) {
    for (SparseOptimizerKind kind : kKinds) {
      SCOPED_TRACE(case_name(s, kind, dim));
      std::vector<std::uint16_t> a = encode(s, normal(static_cast<std::size_t>(rows * dim), 1.f, rng));
      std::vector<float> sa = initial_state(kind, rows, dim, rng);
      const std::size_t per_row = state_size(kind, 1, dim);
      std::vector<std::uint16_t> b(a.size());
      std::vector<float> sb(sa.size());
      for (std::int64_t l = 0; l < rows; ++l) {
        const std::int64_t m = to_split(l);
        std::copy_n(a.begin() + l * dim, dim, b.begin() + m * dim);
        const std::int64_t sp = static_cast<std::int64_t>(per_row);
        std::copy_n(sa.begin() + l * sp, per_row, sb.begin() + m * sp);
      }
      std::vector<Batch> batches_a, batches_b;
      for (int i = 0; i < 3; ++i) {
        const Batch ba = random_batch(rows, dim, 9, i == 2, rng);
        Batch bb;  // the same rows and entries in `split`'s local rows, unique order reversed
        for (std::size_t u = ba.unique_rows.size(); u-- > 0;) {
          bb.unique_rows.push_back(to_split(ba.unique_rows[u]));
          for (std::int64_t e = ba.entry_offsets[u]; e < ba.entry_offsets[u + 1]; ++e) {
            bb.entry_grad.push_back(ba.entry_grad[static_cast<std::size_t>(e)]);
            if (!ba.entry_scale.empty()) bb.entry_scale.push_back(ba.entry_scale[static_cast<std::size_t>(e)]);
          }
          bb.entry_offsets.push_back(static_cast<std::int64_t>(bb.entry_grad.size()));
        }
        bb.grad = ba.grad;
        batches_a.push_back(ba);
        batches_b.push_back(bb);
      }
      std::vector<std::uint16_t> nearest = a;
      std::vector<float> nearest_state = sa;
      run_stochastic(s, kind, dim, nearest, nearest_state, batches_a, whole, 3, false);
      run_stochastic(s, kind, dim, a, sa, batches_a, whole, 3);
      run_stochastic(s, kind, dim, b, sb, batches_b, split, 3);
      EXPECT_NE(a, nearest) << "stochastic differs from nearest";
      for (std::int64_t l = 0; l < rows; ++l) {
        const std::int64_t m = to_split(l);
        for (std::int64_t d = 0; d < dim; ++d)
          ASSERT_EQ(a[static_cast<std::size_t>(l * dim + d)], b[static_cast<std::size_t>(m * dim + d)])
              << "row " << l << " (local " << m << ") column " << d;
        for (std::size_t i = 0; i < per_row; ++i)
          ASSERT_EQ(half::bits_of(sa[static_cast<std::size_t>(l) * per_row + i]),
                    half::bits_of(sb[static_cast<std::size_t>(m) * per_row + i]));
      }
    }
  }
}

// SGD adds ulp/16 to weights of 1.0 at each step. Round to nearest loses it every time; the fp32
// trajectory reaches 1 + steps/16 ulp; stochastic rounding goes up one ulp with probability 1/16
// per step (exactly while in [1, 2)), so each weight's ulp count is Binomial(steps, 1/16).
TEST(HalfKernels, StochasticRoundingKeepsSmallUpdatesInExpectation) {
  const std::int64_t rows = 16, dim = 80, steps = 256;
  for (Storage s : kStorages) {
    SCOPED_TRACE(name_of(s));
    const float ulp = s == Storage::bf16 ? 0x1p-7f : 0x1p-10f;  // at 1.0
    Batch b;
    for (std::int64_t r = 0; r < rows; ++r) {
      b.unique_rows.push_back(r);
      b.entry_grad.push_back(0);
      b.entry_offsets.push_back(r + 1);
    }
    b.grad.assign(static_cast<std::size_t>(dim), -1.f);
    std::vector<float> exact(static_cast<std::size_t>(rows * dim), 1.f);
    std::vector<std::uint16_t> nearest = encode(s, exact), sr = nearest;
    for (std::int64_t step = 0; step < steps; ++step) {
      UpdateRows k = fp32_update(SparseOptimizerKind::sgd, dim, exact.data(), nullptr, b);
      k.lr = ulp / 16;
      run_all(k, rows);
      run_all(half_update(k, nearest.data(), s, false, 21, step, kOneShard), rows);
      run_all(half_update(k, sr.data(), s, true, 21, step, kOneShard), rows);
    }
    const double n = static_cast<double>(steps), p = 1.0 / 16;
    for (float x : exact) ASSERT_EQ(x, 1.f + static_cast<float>(n * p) * ulp);
    for (float x : decode(s, nearest)) ASSERT_EQ(x, 1.f) << "an update under half an ulp is lost";
    double mean = 0;
    for (float x : decode(s, sr)) {
      ASSERT_LT(x, 2.f);
      mean += (static_cast<double>(x) - 1.0) / ulp;
    }
    mean /= static_cast<double>(sr.size());
    const double sd_of_mean = std::sqrt(n * p * (1 - p) / static_cast<double>(sr.size()));
    EXPECT_NEAR(mean, n * p, 5 * sd_of_mean) << "ulps gained on average (exact: " << n * p << ")";
  }
}

// --- updates against a double reference of the rounding rule (docs/math.md) ---

// The 16-bit neighbours lo <= a < hi of a magnitude a > 0 and the spacing between them, in double.
struct Neighbours {
  double lo, ulp;
};
Neighbours neighbours(Storage s, double a) {
  const int e = static_cast<int>(std::floor(std::log2(a)));
  const double ulp = s == Storage::bf16 ? std::ldexp(1.0, e - 7) : std::ldexp(1.0, std::max(e, -14) - 10);
  return {std::floor(a / ulp) * ulp, ulp};
}

// One step of `kind` in double on the decoded row, from the batch's gradients; `state` updated.
std::vector<double> exact_step(SparseOptimizerKind kind, const UpdateRows& k, std::int64_t u,
                               const std::vector<float>& w, std::vector<double>& state) {
  const std::int64_t dim = k.dim;
  std::vector<double> g(static_cast<std::size_t>(dim), 0.0), out(w.begin(), w.end());
  for (std::int64_t e = k.entry_offsets[u]; e < k.entry_offsets[u + 1]; ++e)
    for (std::int64_t d = 0; d < dim; ++d)
      g[d] += static_cast<double>(k.grad[k.entry_grad[e] * dim + d]) * (k.entry_scale ? k.entry_scale[e] : 1.0);
  if (kind == SparseOptimizerKind::rowwise_adagrad) {
    double sum_sq = 0;
    for (double x : g) sum_sq += x * x;
    state[0] += sum_sq / static_cast<double>(dim);
    for (std::int64_t d = 0; d < dim; ++d) out[d] -= k.lr * g[d] / (std::sqrt(state[0]) + k.eps);
  } else {
    for (std::int64_t d = 0; d < dim; ++d) {
      if (kind == SparseOptimizerKind::adagrad) {
        state[d] += g[d] * g[d];
        out[d] -= k.lr * g[d] / (std::sqrt(state[d]) + k.eps);
      } else {
        out[d] -= k.lr * g[d];
      }
    }
  }
  return out;
}

// One update of a table laid out as two shards (table 1 rows 0..6 at local rows 0..6, table 0
// rows 100..104 at 7..11), against the double reference: the new weight x rounded to nearest, or
// to the neighbour above with probability (|x| - lo) / ulp decided by the element's random bits
// (bf16: the low 16 bits r go up when r >= 2^16 (1 - p); fp16: 32 bits r go up when r < 2^32 p).
// The fp32 step may differ from x by a few fp32 ulps (delta): where that could change the
// result, either neighbour is accepted; such elements (about 2 delta / ulp of them) are counted
// and must stay under 2%.
void check_against_double(Storage s, SparseOptimizerKind kind, bool stochastic, std::mt19937_64& rng) {
  const std::int64_t dim = 40, rows = 12, step = 321;
  const std::uint64_t seed = 99;
  const Layout layout{{0, 7}, {0, 100}, {7, 5}, {1, 0}};
  SCOPED_TRACE(case_name(s, kind, dim) + (stochastic ? " stochastic" : " nearest"));
  int ambiguous = 0, checked = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::uint16_t> table = encode(s, normal(static_cast<std::size_t>(rows * dim), 1.f, rng));
    const std::vector<float> before = decode(s, table);
    std::vector<float> state = initial_state(kind, rows, dim, rng);
    const std::vector<float> state_before = state;
    const Batch b = random_batch(rows, dim, 8, trial % 2 == 1, rng);
    const UpdateRows fp32 = fp32_update(kind, dim, nullptr, state.data(), b);
    run_all(half_update(fp32, table.data(), s, stochastic, seed, step, layout), 8);
    for (std::int64_t u = 0; u < 8; ++u) {
      const std::int64_t row = b.unique_rows[u];
      const std::size_t state_len = kind == SparseOptimizerKind::adagrad ? dim : kind == SparseOptimizerKind::sgd ? 0 : 1;
      const std::size_t state_at = row * state_len;  // 0 for SGD: its empty vector is not offset
      std::vector<double> st(state_before.begin() + state_at, state_before.begin() + state_at + state_len);
      const std::vector<float> w(before.begin() + row * dim, before.begin() + (row + 1) * dim);
      const std::vector<double> x = exact_step(kind, fp32, u, w, st);
      for (std::size_t i = 0; i < st.size(); ++i)
        ASSERT_NEAR(state[state_at + i], st[i], 1e-5 * st[i]) << "state of row " << row;
      const int t = row < 7 ? 1 : 0;
      const std::int64_t table_row = row < 7 ? row : 100 + row - 7;
      for (std::int64_t d = 0; d < dim; ++d) {
        const double got = half_to_float(s, table[row * dim + d]);
        const double a = std::fabs(x[d]);
        // fp32's errors: the subtraction one ulp of the result; the step, from at most 4 gradient
        // terms, a square, a root, a sum, a division and the rate, about 10 of its own.
        const double delta = 16 * std::ldexp(std::fabs(w[d]) + std::fabs(x[d] - w[d]), -24);
        const Neighbours n = neighbours(s, a);
        const double p = (a - n.lo) / n.ulp;  // in [0, 1)
        const double p_lo = (a - delta - n.lo) / n.ulp, p_hi = (a + delta - n.lo) / n.ulp;
        bool up, unsure;
        if (!stochastic) {
          up = p > 0.5;
          unsure = p_lo <= 0.5 && p_hi >= 0.5;
        } else if (s == Storage::bf16) {
          const double r = half::rounding_bits(seed, t, step, table_row * dim + d) & 0xffffu;
          up = r >= 65536.0 * (1 - p);
          unsure = (r >= 65536.0 * (1 - p_hi)) != (r >= 65536.0 * (1 - p_lo));
        } else {
          const double r = half::rounding_bits(seed, t, step, table_row * dim + d);
          up = r < 4294967296.0 * p;
          unsure = (r < 4294967296.0 * p_lo) != (r < 4294967296.0 * p_hi);
        }
        unsure = unsure || p_lo < 0 || p_hi >= 1;  // delta reaches past a neighbour
        const double want = std::copysign(up ? n.lo + n.ulp : n.lo, x[d]);
        ++checked;
        if (unsure) {
          ++ambiguous;
          ASSERT_TRUE(std::fabs(got) == n.lo || std::fabs(got) == n.lo + n.ulp || p_lo < 0 || p_hi >= 1)
              << "row " << row << " column " << d << ": " << got << " for " << x[d];
          continue;
        }
        ASSERT_EQ(got, want) << "row " << row << " column " << d << ": exact " << x[d] << ", p " << p;
      }
    }
  }
  EXPECT_LT(ambiguous, checked / 50) << "the reference decides too few elements";
}

TEST(HalfKernels, UpdatesRoundTheExactStepAsTheRuleSays) {
  std::mt19937_64 rng(16);
  for (Storage s : kStorages)
    for (SparseOptimizerKind kind : kKinds)
      for (bool stochastic : {false, true}) check_against_double(s, kind, stochastic, rng);
}

}  // namespace
