#include "data/synth.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data/multihot.hpp"
#include "data/writer.hpp"

namespace recmix::data {

namespace {

__extension__ typedef unsigned __int128 uint128;

double log1p_over_x(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x / 3.0); }
double expm1_over_x(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0); }

// Random streams of the generator (one per kind of value).
enum Stream : std::uint64_t {
  kDense = 1,
  kLabel = 2,
  kDenseWeight = 3,
  kPool = 4,
  kTableBase = 1000,      // + table: index draws
  kRowWeightBase = 5000,  // + table: hidden per-row weights
};

std::uint64_t coprime_stride(std::int64_t n, std::uint64_t seed, int t) {
  if (n <= 1) return 1;
  std::uint64_t a = random::hash(seed, 77, static_cast<std::uint64_t>(t)) % static_cast<std::uint64_t>(n);
  auto un = static_cast<std::uint64_t>(n);
  while (std::gcd(a, un) != 1) a = (a + 1) % un;
  return a == 0 ? 1 : a;
}

double zipf_exponent(const SynthOptions& o, int t) { return o.zipf.size() == 1 ? o.zipf[0] : o.zipf[t]; }

// The checks of the options that need no table; those of each table come with its sampler.
void check_options(const SynthOptions& o) {
  RECMIX_REQUIRE(!o.output.empty(), ConfigError, "synth: no output file (-o)");
  RECMIX_REQUIRE(o.rows >= 0, ConfigError, "synth: --rows must be non-negative");
  RECMIX_REQUIRE(o.num_dense >= 0, ConfigError, "synth: --dense must be non-negative");
  const int T = static_cast<int>(o.table_rows.size());
  RECMIX_REQUIRE(o.zipf.size() == 1 || static_cast<int>(o.zipf.size()) == T, ConfigError,
                 "synth: --zipf needs one exponent or one per table");
  RECMIX_REQUIRE(o.pooling_min >= 0 && o.pooling_max >= o.pooling_min, ConfigError,
                 "synth: pooling sizes need 0 <= min <= max");
  RECMIX_REQUIRE(o.pooling_max <= 256, ConfigError, "synth: pooling size at most 256");
  RECMIX_REQUIRE(o.multi_hot || (o.pooling_min == 1 && o.pooling_max == 1), ConfigError,
                 "synth: pooling sizes other than 1 need --multi-hot");
  RECMIX_REQUIRE(o.bag_sizes.empty() || (o.multi_hot && static_cast<int>(o.bag_sizes.size()) == T), ConfigError,
                 "synth: bag sizes need multi-hot data and one size per table");
  for (int b : o.bag_sizes) RECMIX_REQUIRE(b >= 1, ConfigError, "synth: every bag size must be at least 1");
}

// The hidden dense weights: N(0, 1) draws scaled to norm dense_signal.
std::vector<double> hidden_dense_weights(const SynthOptions& o) {
  std::vector<double> w(static_cast<std::size_t>(o.num_dense));
  double norm = 0;
  for (int d = 0; d < o.num_dense; ++d) {
    w[d] = random::normal(o.seed, kDenseWeight, static_cast<std::uint64_t>(d), 0.0f, 1.0f);
    norm += w[d] * w[d];
  }
  for (double& x : w) x *= norm > 0 ? o.dense_signal / std::sqrt(norm) : 0.0;
  return w;
}

// The rows of the seed's sequence under the hidden model: per table a Zipf law over popularity
// ranks and a stride coprime with the table size that scatters the popular rows, and one hidden
// weight per table row. Counts the accesses of each table row when the tables are small enough.
class RowGenerator {
 public:
  explicit RowGenerator(const SynthOptions& o);

  // Row `row`: its dense features into x, its indices into sparse (one-hot: one per table) or bags
  // (multi-hot). Returns p(click) under the hidden model.
  double draw(std::uint64_t row, float* x, std::int64_t* sparse, std::vector<std::vector<std::int64_t>>& bags);

  const std::vector<double>& dense_weights() const { return dense_weights_; }
  void write_access_counts(hid_t file) const;

 private:
  std::int64_t draw_index(int t, std::uint64_t counter);
  double draw_bag(int t, std::uint64_t row, std::vector<std::int64_t>& bag);
  double row_weight(int t, std::int64_t row) const;

  const SynthOptions& options_;
  int tables_;
  std::vector<ZipfSampler> zipf_;
  std::vector<std::uint64_t> stride_;
  bool record_counts_;
  std::vector<std::vector<std::int64_t>> counts_;  // per table and row, when recorded
  std::vector<double> dense_weights_;
  double row_weight_std_;
};

RowGenerator::RowGenerator(const SynthOptions& o) : options_(o), tables_(static_cast<int>(o.table_rows.size())) {
  std::int64_t total_rows = 0;
  for (int t = 0; t < tables_; ++t) {
    RECMIX_REQUIRE(o.table_rows[t] >= 1, ConfigError, "synth: every table needs at least one row");
    zipf_.emplace_back(o.table_rows[t], zipf_exponent(o, t));
    stride_.push_back(coprime_stride(o.table_rows[t], o.seed, t));
    total_rows += o.table_rows[t];
  }
  record_counts_ = total_rows <= o.access_counts_limit;
  counts_.resize(record_counts_ ? tables_ : 0);
  for (int t = 0; t < tables_ && record_counts_; ++t) counts_[t].assign(static_cast<std::size_t>(o.table_rows[t]), 0);
  dense_weights_ = hidden_dense_weights(o);
  row_weight_std_ = tables_ > 0 ? o.sparse_signal / std::sqrt(static_cast<double>(tables_)) : 0.0;
}

// The hidden weight of row `row` of table t, v_t[row] ~ N(0, sparse_signal^2 / tables).
double RowGenerator::row_weight(int t, std::int64_t row) const {
  return row_weight_std_ * random::normal(options_.seed, kRowWeightBase + static_cast<std::uint64_t>(t),
                                          static_cast<std::uint64_t>(row), 0.0f, 1.0f);
}

// A row of table t for draw `counter`: popularity rank -> row by the table's stride.
std::int64_t RowGenerator::draw_index(int t, std::uint64_t counter) {
  const SynthOptions& o = options_;
  random::CounterRng rng(random::hash(o.seed, 0xD7A, counter), kTableBase + static_cast<std::uint64_t>(t));
  const std::int64_t rank = zipf_[t]([&] { return static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53; });
  const auto n = static_cast<std::uint64_t>(o.table_rows[t]);
  const auto r = static_cast<std::int64_t>((static_cast<uint128>(rank) * stride_[t] + random::hash(o.seed, 78, t) % n) % n);
  if (record_counts_) ++counts_[t][r];
  return r;
}

// The multi-hot bag of table t for row `row` (its size uniform in [pooling_min, pooling_max]);
// returns the sum of its rows' weights.
double RowGenerator::draw_bag(int t, std::uint64_t row, std::vector<std::int64_t>& bag) {
  const SynthOptions& o = options_;
  const std::uint64_t span = static_cast<std::uint64_t>(o.pooling_max - o.pooling_min + 1);
  const int size = o.pooling_min +
                   static_cast<int>(random::hash(o.seed, kPool, row * static_cast<std::uint64_t>(tables_) + t) % span);
  bag.resize(static_cast<std::size_t>(size));
  double sum = 0;
  for (int k = 0; k < size; ++k) {
    bag[k] = draw_index(t, (row << 8) + static_cast<std::uint64_t>(k) + (std::uint64_t{1} << 63));
    sum += row_weight(t, bag[k]);
  }
  return sum;
}

double RowGenerator::draw(std::uint64_t row, float* x, std::int64_t* sparse,
                          std::vector<std::vector<std::int64_t>>& bags) {
  double logit = options_.bias;
  for (int d = 0; d < options_.num_dense; ++d) {
    x[d] = random::normal(options_.seed, kDense, row * static_cast<std::uint64_t>(options_.num_dense) + d, 0.0f, 1.0f);
    logit += dense_weights_[d] * x[d];
  }
  for (int t = 0; t < tables_; ++t) {
    if (!options_.multi_hot) {
      sparse[t] = draw_index(t, row);
      logit += row_weight(t, sparse[t]);
    } else if (!options_.bag_sizes.empty()) {  // the one-hot draw, expanded (its label is the one-hot one's)
      const std::int64_t index = draw_index(t, row);
      logit += row_weight(t, index);
      multi_hot_bag(options_.seed, t, index, options_.bag_sizes[t], options_.table_rows[t], bags[t]);
      for (std::size_t k = 1; k < bags[t].size() && record_counts_; ++k) ++counts_[t][bags[t][k]];
    } else {
      const double sum = draw_bag(t, row, bags[t]);
      if (!bags[t].empty()) logit += sum / static_cast<double>(bags[t].size());  // the bag's mean
    }
  }
  return 1.0 / (1.0 + std::exp(-logit));
}

void RowGenerator::write_access_counts(hid_t file) const {
  if (!record_counts_) return;
  for (int t = 0; t < tables_; ++t)
    h5::write_array(file, "access_counts/" + std::to_string(t), counts_[t].data(),
                    {static_cast<hsize_t>(options_.table_rows[t])});
}

constexpr std::int64_t kAucSample = 1 << 20;  // rows whose probabilities give the Bayes AUC

// What the labels drawn came to: their sum, and the probabilities of the first kAucSample rows.
struct LabelDraws {
  double sum = 0;
  std::vector<double> probabilities;
};

// Rows [first_row, first_row + rows) into the writer, a block at a time.
LabelDraws write_rows(const SynthOptions& o, RowGenerator& generator, DatasetWriter& writer) {
  constexpr std::int64_t kBlock = 4096;
  const int T = static_cast<int>(o.table_rows.size());
  LabelDraws drawn;
  drawn.probabilities.reserve(static_cast<std::size_t>(std::min(o.rows, kAucSample)));
  std::vector<float> dense, labels;
  std::vector<std::int64_t> sparse;
  std::vector<std::vector<std::int64_t>> bags(T);
  for (std::int64_t b = 0; b < o.rows; b += kBlock) {
    const std::int64_t n = std::min(kBlock, o.rows - b);
    dense.resize(static_cast<std::size_t>(n * o.num_dense));
    labels.resize(static_cast<std::size_t>(n));
    sparse.resize(static_cast<std::size_t>(n * T));
    for (std::int64_t i = 0; i < n; ++i) {
      const auto row = static_cast<std::uint64_t>(o.first_row + b + i);
      float* x = dense.data() + i * o.num_dense;
      const double p = generator.draw(row, x, sparse.data() + i * T, bags);
      labels[i] = random::uniform01(o.seed, kLabel, row) < p ? 1.0f : 0.0f;
      drawn.sum += labels[i];
      if (b + i < kAucSample) drawn.probabilities.push_back(p);
      if (o.multi_hot) writer.append_multi_hot(x, labels[i], bags);
    }
    if (!o.multi_hot) writer.append(n, dense.data(), labels.data(), sparse.data());
  }
  return drawn;
}

void write_attributes(hid_t file, const SynthOptions& o, const RowGenerator& generator, const SynthStats& stats) {
  h5::write_attribute(file, "producer", std::string("recmix data synth"));
  h5::write_attribute(file, "seed", static_cast<std::int64_t>(o.seed));
  std::vector<double> exponents;
  for (int t = 0; t < static_cast<int>(o.table_rows.size()); ++t) exponents.push_back(zipf_exponent(o, t));
  h5::write_attribute(file, "zipf_exponents", exponents);
  h5::write_attribute(file, "pooling", std::vector<std::int64_t>{o.pooling_min, o.pooling_max});
  if (!o.bag_sizes.empty()) {
    h5::write_attribute(file, "multi_hot_sizes", std::vector<std::int64_t>(o.bag_sizes.begin(), o.bag_sizes.end()));
    h5::write_attribute(file, "multi_hot_seed", static_cast<std::int64_t>(o.seed));
  }
  if (!o.preset.empty()) {
    h5::write_attribute(file, "preset", o.preset);
    h5::write_attribute(file, "preset_scale", o.preset_scale);
    // The benchmark's rows, so that the scaled tables start as the benchmark's do.
    h5::write_attribute(file, "embedding_init_rows", o.init_rows);
  }
  h5::write_attribute(file, "hidden_model",
                      std::string("p(click) = sigmoid(bias + dense_weights . dense + sum_t v_t[row]); dense ~ N(0,1); "
                                  "v_t[row] ~ N(0, sparse_signal^2 / tables), averaged over a multi-hot bag"));
  h5::write_attribute(file, "hidden_bias", o.bias);
  h5::write_attribute(file, "hidden_dense_weights", generator.dense_weights());
  h5::write_attribute(file, "hidden_sparse_signal", o.sparse_signal);
  h5::write_attribute(file, "bayes_auc", stats.bayes_auc);
  h5::write_attribute(file, "label_mean", stats.label_mean);
  generator.write_access_counts(file);
}

}  // namespace

ZipfSampler::ZipfSampler(std::int64_t n, double exponent) : n_(n), exponent_(exponent) {
  RECMIX_REQUIRE(n >= 1, ConfigError, "zipf: need at least one row");
  RECMIX_REQUIRE(exponent > 0, ConfigError, "zipf: exponent must be positive");
  h_integral_x1_ = h_integral(1.5) - 1.0;
  h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
  s_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
}

double ZipfSampler::h(double x) const { return std::exp(-exponent_ * std::log(x)); }

double ZipfSampler::h_integral(double x) const {
  const double lx = std::log(x);
  return expm1_over_x((1.0 - exponent_) * lx) * lx;
}

double ZipfSampler::h_integral_inverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;
  return std::exp(log1p_over_x(t) * x);
}

double expected_auc(std::vector<double> p) {
  std::sort(p.begin(), p.end());
  double neg_below = 0, pos_total = 0, neg_total = 0, self = 0, num = 0;
  std::size_t i = 0;
  while (i < p.size()) {
    std::size_t j = i;
    double pos_group = 0, neg_group = 0, self_group = 0;
    while (j < p.size() && p[j] == p[i]) {
      pos_group += p[j];
      neg_group += 1.0 - p[j];
      self_group += p[j] * (1.0 - p[j]);
      ++j;
    }
    // positives of this group beat every lower negative, and tie with the group's other negatives
    num += pos_group * neg_below + 0.5 * (pos_group * neg_group - self_group);
    neg_below += neg_group;
    pos_total += pos_group;
    neg_total += neg_group;
    self += self_group;
    i = j;
  }
  const double den = pos_total * neg_total - self;
  return den > 0 ? num / den : 0.5;
}

void apply_mlperf_dcnv2_preset(SynthOptions& o, std::int64_t scale) {
  RECMIX_REQUIRE(scale >= 1, ConfigError, "--scale: must be at least 1 (table rows are divided by it)");
  o.table_rows.clear();
  for (std::int64_t rows : mlperf_dcnv2_table_rows()) o.table_rows.push_back(std::max<std::int64_t>(1, (rows + scale - 1) / scale));
  o.num_dense = 13;
  o.multi_hot = true;
  o.bag_sizes = mlperf_dcnv2_bag_sizes();
  const auto [lo, hi] = std::minmax_element(o.bag_sizes.begin(), o.bag_sizes.end());
  o.pooling_min = *lo;
  o.pooling_max = *hi;
  o.preset = "mlperf-dcnv2";
  o.preset_scale = scale;
  o.init_rows = mlperf_dcnv2_table_rows();
}

SynthStats synthesize(const SynthOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  check_options(o);
  RowGenerator generator(o);
  WriterOptions wopt;
  wopt.chunk_rows = o.chunk_rows;
  wopt.gzip_level = o.gzip_level;
  DatasetWriter writer(o.output, o.num_dense, o.table_rows, o.multi_hot, wopt);
  LabelDraws drawn = write_rows(o, generator, writer);

  SynthStats stats;
  stats.rows = o.rows;
  stats.label_mean = o.rows > 0 ? drawn.sum / static_cast<double>(o.rows) : 0.0;
  stats.bayes_auc = expected_auc(std::move(drawn.probabilities));
  write_attributes(writer.file(), o, generator, stats);
  writer.finish();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace recmix::data
