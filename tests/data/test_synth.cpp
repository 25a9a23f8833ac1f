// The synthetic generator: Zipf draws against the exact law, the expected-AUC formula against a
// brute-force count, determinism, stored access counts against the data, the planted signal
// being learnable by a plain logistic model in a few hundred steps, inspect's report, and each bad
// option named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <utility>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data/h5.hpp"
#include "data/inspect.hpp"
#include "data/reader.hpp"
#include "data/synth.hpp"
#include "test_util.hpp"

namespace recmix::data {
namespace {

using test::ScratchDir;

TEST(Zipf, MatchesTheExactLaw) {
  for (double s : {0.5, 1.0, 1.1, 2.0}) {
    const std::int64_t n = 50;
    ZipfSampler zipf(n, s);
    random::CounterRng rng(7, static_cast<std::uint64_t>(s * 10));
    std::vector<double> seen(n, 0);
    const int draws = 200000;
    for (int i = 0; i < draws; ++i) {
      const std::int64_t k = zipf([&] { return static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53; });
      ASSERT_GE(k, 0);
      ASSERT_LT(k, n);
      ++seen[k];
    }
    double norm = 0;
    for (std::int64_t k = 1; k <= n; ++k) norm += std::pow(static_cast<double>(k), -s);
    for (std::int64_t k = 0; k < n; ++k) {
      const double p = std::pow(static_cast<double>(k + 1), -s) / norm;
      const double sd = std::sqrt(draws * p * (1 - p));
      EXPECT_NEAR(seen[k], draws * p, 5 * sd + 1) << "s " << s << " rank " << k;
    }
  }
}

TEST(ExpectedAuc, MatchesBruteForce) {
  random::CounterRng rng(3);
  std::vector<double> p(300);
  for (double& x : p) x = std::round(rng.next_uniform01() * 20) / 20;  // many ties
  double num = 0, den = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = 0; j < p.size(); ++j) {
      if (i == j) continue;
      const double w = p[i] * (1 - p[j]);  // i positive, j negative
      den += w;
      num += w * (p[i] > p[j] ? 1.0 : p[i] == p[j] ? 0.5 : 0.0);
    }
  EXPECT_NEAR(expected_auc(p), num / den, 1e-12);
  EXPECT_NEAR(expected_auc({0.5, 0.5, 0.5}), 0.5, 1e-12);
}

SynthOptions small(const std::string& out) {
  SynthOptions o;
  o.output = out;
  o.rows = 20000;
  o.num_dense = 5;
  o.table_rows = {1000, 50, 20000};
  o.zipf = {1.2, 0.8, 1.05};
  o.seed = 17;
  o.chunk_rows = 4096;
  return o;
}

TEST(Synth, DeterministicAndCountsMatchData) {
  ScratchDir dir;
  SynthOptions o = small(dir / "a.h5");
  SynthStats s = synthesize(o);
  o.output = dir / "b.h5";
  o.chunk_rows = 1000;  // chunking must not change values
  synthesize(o);
  h5::File a = h5::open_file(dir / "a.h5"), b = h5::open_file(dir / "b.h5");
  EXPECT_EQ(h5::read_array<float>(a, "dense"), h5::read_array<float>(b, "dense"));
  EXPECT_EQ(h5::read_array<std::int64_t>(a, "sparse"), h5::read_array<std::int64_t>(b, "sparse"));
  const auto labels = h5::read_array<float>(a, "labels");
  EXPECT_EQ(labels, h5::read_array<float>(b, "labels"));
  o.seed = 18;
  o.output = dir / "c.h5";
  synthesize(o);
  h5::File c = h5::open_file(dir / "c.h5");
  EXPECT_NE(h5::read_array<std::int64_t>(a, "sparse"), h5::read_array<std::int64_t>(c, "sparse"));

  EXPECT_NEAR(s.label_mean, std::accumulate(labels.begin(), labels.end(), 0.0) / labels.size(), 1e-9);
  EXPECT_NEAR(h5::read_double_attribute(a, "bayes_auc"), s.bayes_auc, 1e-12);
  const auto sparse = h5::read_array<std::int64_t>(a, "sparse");
  for (int t = 0; t < 3; ++t) {
    std::vector<std::int64_t> counted(static_cast<std::size_t>(o.table_rows[t]), 0);
    for (std::int64_t r = 0; r < o.rows; ++r) ++counted[sparse[r * 3 + t]];
    EXPECT_EQ(h5::read_array<std::int64_t>(a, "access_counts/" + std::to_string(t)), counted) << t;
  }
  // skew: the top 1% of rows of table 0 (10 rows, exponent 1.2) hold sum_{k<=10} k^-1.2 / sum_{k<=1000} k^-1.2
  double top = 0, all = 0;
  for (int k = 1; k <= 1000; ++k) (k <= 10 ? top : all) += std::pow(k, -1.2);
  all += top;
  InspectReport r = inspect_file(dir / "a.h5");
  ASSERT_TRUE(r.problem.empty()) << r.problem;
  EXPECT_EQ(r.rows_checked, 20000);
  EXPECT_NEAR(r.label_mean, s.label_mean, 1e-9);
  EXPECT_NEAR(r.tables[0].top1_share, top / all, 0.02);
  EXPECT_TRUE(r.tables[0].from_stored_counts);
  const std::string text = format_report(r);
  EXPECT_NE(text.find("bayes_auc"), std::string::npos);
  EXPECT_NE(text.find("valid: yes"), std::string::npos);
}

TEST(Synth, MultiHotPooling) {
  ScratchDir dir;
  SynthOptions o = small(dir / "m.h5");
  o.multi_hot = true;
  o.pooling_min = 0;
  o.pooling_max = 5;
  synthesize(o);
  h5::File f = h5::open_file(dir / "m.h5");
  const auto info = open_file_info(dir / "m.h5");
  ASSERT_EQ(info.max_bag.size(), 3u);
  for (int t = 0; t < 3; ++t) {
    const auto offsets = h5::read_array<std::int64_t>(f, "sparse/" + std::to_string(t) + "/offsets");
    const auto indices = h5::read_array<std::int64_t>(f, "sparse/" + std::to_string(t) + "/indices");
    std::vector<int> sizes(6, 0);
    for (std::int64_t r = 0; r < o.rows; ++r) {
      const std::int64_t len = offsets[r + 1] - offsets[r];
      ASSERT_GE(len, 0);
      ASSERT_LE(len, 5);
      ++sizes[len];
    }
    for (int len = 0; len <= 5; ++len) EXPECT_NEAR(sizes[len], o.rows / 6.0, 300) << len;  // uniform sizes
    std::int64_t longest = 0;
    for (int len = 0; len <= 5; ++len)
      if (sizes[len] > 0) longest = len;
    EXPECT_EQ(info.max_bag[t], longest) << "the max_bag attribute of table " << t;
    EXPECT_EQ(static_cast<std::int64_t>(indices.size()), offsets.back());
    for (std::int64_t v : indices) ASSERT_LT(v, o.table_rows[t]);
  }
  EXPECT_TRUE(inspect_file(dir / "m.h5").problem.empty());
}

// Area under the ROC curve of scores against 0/1 labels (ties count one half).
double auc(const std::vector<double>& score, const std::vector<float>& label) {
  std::vector<std::size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return score[a] < score[b]; });
  double pos = 0, neg = 0, num = 0;
  std::size_t i = 0;
  while (i < order.size()) {
    std::size_t j = i;
    double p = 0, n = 0;
    while (j < order.size() && score[order[j]] == score[order[i]]) (label[order[j++]] > 0.5 ? p : n) += 1;
    num += p * neg + 0.5 * p * n;
    pos += p;
    neg += n;
    i = j;
  }
  return num / (pos * neg);
}

// Every bad option is refused with the message naming it; a table's rows are checked with its
// exponent, table after table.
TEST(Synth, EachBadOptionIsNamed) {
  ScratchDir dir;
  const std::vector<std::pair<std::function<void(SynthOptions&)>, std::string>> cases = {
      {[](SynthOptions& o) { o.output.clear(); }, "synth: no output file (-o)"},
      {[](SynthOptions& o) { o.rows = -1; }, "synth: --rows must be non-negative"},
      {[](SynthOptions& o) { o.num_dense = -1; }, "synth: --dense must be non-negative"},
      {[](SynthOptions& o) { o.zipf = {1.0, 1.1}; }, "synth: --zipf needs one exponent or one per table"},
      {[](SynthOptions& o) { o.multi_hot = true, o.pooling_min = 3, o.pooling_max = 2; },
       "synth: pooling sizes need 0 <= min <= max"},
      {[](SynthOptions& o) { o.multi_hot = true, o.pooling_max = 257; }, "synth: pooling size at most 256"},
      {[](SynthOptions& o) { o.pooling_max = 2; }, "synth: pooling sizes other than 1 need --multi-hot"},
      {[](SynthOptions& o) { o.table_rows = {5, 0, 3}, o.zipf = {1.0, 1.0, -1.0}; },
       "synth: every table needs at least one row"},
      {[](SynthOptions& o) { o.table_rows = {5, 3, 0}, o.zipf = {1.0, -1.0, 1.0}; },
       "zipf: exponent must be positive"},
  };
  for (const auto& [spoil, message] : cases) {
    SynthOptions o;
    o.output = dir / "s.h5";
    o.rows = 10;
    spoil(o);
    try {
      synthesize(o);
      ADD_FAILURE() << "no error for: " << message;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  EXPECT_TRUE(dir.entries().empty());
}

// The defaults plant a signal that a plain logistic model (dense weights + one weight per table
// row, as a DLRM's embeddings) learns to AUC >= 0.75 in 300 steps of 128 samples.
TEST(Synth, DefaultsAreLearnableQuickly) {
  ScratchDir dir;
  SynthOptions o;
  o.output = dir / "d.h5";
  o.rows = 60000;
  SynthStats s = synthesize(o);
  EXPECT_GT(s.bayes_auc, 0.8);
  Reader reader({o.output}, {.global_batch = 128, .shuffle = true, .seed = 1, .prefetch = 2});
  const int D = reader.info().num_dense, T = reader.info().num_tables();
  std::vector<double> w(D, 0.0), b(1, 0.0);
  std::vector<std::vector<double>> v(T, std::vector<double>(1000, 0.0));
  auto logit = [&](const Batch& batch, std::int64_t i) {
    double z = b[0];
    for (int d = 0; d < D; ++d) z += w[d] * batch.dense[i * D + d];
    for (int t = 0; t < T; ++t) z += v[t][batch.indices[t][i]];
    return z;
  };
  Batch batch;
  for (int step = 0; step < 300; ++step) {
    ASSERT_TRUE(reader.next(batch));
    const double lr = 0.1;
    for (std::int64_t i = 0; i < batch.size; ++i) {
      const double g = 1.0 / (1.0 + std::exp(-logit(batch, i))) - batch.labels[i];
      b[0] -= lr * g / 8;
      for (int d = 0; d < D; ++d) w[d] -= lr * g * batch.dense[i * D + d] / 8;
      for (int t = 0; t < T; ++t) v[t][batch.indices[t][i]] -= lr * g;
    }
  }
  // held out: the last 10000 rows, read in file order
  Reader eval({o.output}, {.global_batch = 10000, .prefetch = 0});
  eval.seek({0, 5});
  ASSERT_TRUE(eval.next(batch));
  std::vector<double> score(batch.size);
  for (std::int64_t i = 0; i < batch.size; ++i) score[i] = logit(batch, i);
  const double learned = auc(score, batch.labels);
  std::fprintf(stderr, "logistic model after 300 steps: AUC %.4f (Bayes AUC %.4f)\n", learned, s.bayes_auc);
  EXPECT_GE(learned, 0.75) << "Bayes AUC " << s.bayes_auc;
  EXPECT_LE(learned, s.bayes_auc + 0.02);
}

}  // namespace
}  // namespace recmix::data
