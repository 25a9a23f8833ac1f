#pragma once
// Synthetic click data with a planted signal. Categorical indices follow a Zipf law per table
// (a few rows get most accesses, as in real logs); labels are drawn from a hidden logistic model
// of the dense features and of one hidden weight per table row, so a model that learns can reach
// the hidden model's own AUC (the Bayes AUC, stored in the file). Every value is a function of
// (seed, row), so the output is the same for a seed whatever the chunking.
#include <cstdint>
#include <string>
#include <vector>

namespace recmix::data {

struct SynthOptions {
  std::string output;
  std::int64_t rows = 100'000;
  int num_dense = 13;
  std::vector<std::int64_t> table_rows = std::vector<std::int64_t>(8, 1000);
  std::vector<double> zipf = {1.1};   // one exponent for all tables, or one per table (> 0)
  bool multi_hot = false;
  int pooling_min = 1, pooling_max = 1;  // multi-hot: bag size uniform in [min, max] per row and table
  // Multi-hot bags made as `recmix data multihot` makes them (multihot.hpp, the MLPerf recipe): table
  // t's bag is the row's one-hot draw expanded to bag_sizes[t] indices, so the data equal the
  // one-hot data of the same seed expanded. Empty: bags of pooling_min..pooling_max draws.
  std::vector<int> bag_sizes;
  std::string preset;                  // recorded in the file when a preset set the options
  std::int64_t preset_scale = 1;
  std::vector<std::int64_t> init_rows;  // a preset's unscaled table rows (the embedding_init_rows attribute)
  std::uint64_t seed = 0;
  // Rows [first_row, first_row + rows) of the seed's infinite sequence: disjoint ranges of one seed
  // are train/eval splits drawn from the same hidden model.
  std::int64_t first_row = 0;
  // hidden model: logit = bias + w . dense + sum_t v_t[row]  (mean over a multi-hot bag)
  double bias = -1.0;
  double dense_signal = 2.0;   // ||w|| (dense features are N(0, 1))
  double sparse_signal = 1.0;  // std of sum_t v_t (each v_t[i] ~ N(0, sparse_signal^2 / tables))
  std::int64_t chunk_rows = 16384;
  int gzip_level = 0;
  std::int64_t access_counts_limit = std::int64_t{1} << 25;  // /access_counts/<t> when tables hold at most this many rows
};

struct SynthStats {
  std::int64_t rows = 0;
  double label_mean = 0;
  double bayes_auc = 0;  // expected AUC of the hidden model's probabilities (first 1M rows)
  double seconds = 0;
};

SynthStats synthesize(const SynthOptions& options);

// --preset mlperf-dcnv2: the MLPerf DLRM-DCNv2 benchmark's 26 tables (mlperf_dcnv2_table_rows)
// divided by `scale` and rounded up (at least one row each), 13 dense features and the
// benchmark's bag sizes, multi-hot; the file records the benchmark's rows as
// embedding_init_rows, so a model starts its tables as the benchmark's. ConfigError for a scale
// below 1.
void apply_mlperf_dcnv2_preset(SynthOptions& options, std::int64_t scale);
inline constexpr std::int64_t kMlperfDcnv2DefaultScale = 1000;

// Zipf(exponent) over {0, .., n-1} by rejection-inversion (Hoermann and Derflinger 1996):
// O(1) memory, so tables of any size. Returns the popularity rank (0 = most popular).
class ZipfSampler {
 public:
  ZipfSampler(std::int64_t n, double exponent);
  // `uniform` returns independent uniforms in [0, 1) (called at least once).
  template <class Uniform>
  std::int64_t operator()(Uniform&& uniform) const {
    while (true) {
      const double u = h_integral_n_ + uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      std::int64_t k = static_cast<std::int64_t>(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      const double kd = static_cast<double>(k);
      if (kd - x <= s_ || u >= h_integral(kd + 0.5) - h(kd)) return k - 1;
    }
  }

 private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;
  std::int64_t n_;
  double exponent_, h_integral_x1_, h_integral_n_, s_;
};

// Expected AUC of scores p (probabilities of a positive label) when labels are Bernoulli(p).
double expected_auc(std::vector<double> p);

}  // namespace recmix::data
