#pragma once
// A naive, unsharded embedding-bag model for tests: per-table weights, pooling with plain loops,
// gradients accumulated per row in double, and each sparse optimizer written out by hand.
// It shares nothing with embedding/ but the documented initial_weight() formula.
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "core/optimizer_kind.hpp"
#include "embedding/initial_weight.hpp"
#include "embedding/types.hpp"

namespace recmix::embedding::test {

// The sparse optimizer a test case names ("sgd", "adagrad", "rowwise_adagrad"; the reference
// below takes the name), as embedding/ takes it.
inline SparseOptimizerKind sparse_kind(std::string_view name) {
  if (name == "sgd") return SparseOptimizerKind::sgd;
  if (name == "adagrad") return SparseOptimizerKind::adagrad;
  if (name == "rowwise_adagrad") return SparseOptimizerKind::rowwise_adagrad;
  throw std::invalid_argument("no sparse optimizer named " + std::string(name));
}

// One table's bags over a batch, owning its storage.
struct TableBatch {
  std::vector<std::int64_t> offsets, indices;
  Bags view() const { return {offsets, indices}; }
  // The bags [begin, end) as a batch of their own.
  TableBatch slice(int begin, int end) const {
    TableBatch s;
    s.offsets.push_back(0);
    for (int b = begin; b < end; ++b) {
      for (std::int64_t k = offsets[b]; k < offsets[b + 1]; ++k) s.indices.push_back(indices[k]);
      s.offsets.push_back(static_cast<std::int64_t>(s.indices.size()));
    }
    return s;
  }
};

// Random bags: lengths in [0, max_len] (or exactly 1 when one_hot), indices from the first
// `hot_rows` rows so repeats within and across bags are common.
inline std::vector<TableBatch> random_batch(const std::vector<TableSpec>& tables, int batch,
                                            int max_len, bool one_hot, std::mt19937_64& rng) {
  std::vector<TableBatch> out(tables.size());
  for (std::size_t t = 0; t < tables.size(); ++t) {
    auto& tb = out[t];
    tb.offsets.push_back(0);
    const std::int64_t hot = std::max<std::int64_t>(1, std::min<std::int64_t>(tables[t].rows, 5 + tables[t].rows / 3));
    for (int b = 0; b < batch; ++b) {
      int len = one_hot ? 1 : static_cast<int>(rng() % (max_len + 1));
      for (int k = 0; k < len; ++k) {
        bool anywhere = rng() % 4 == 0;
        std::int64_t r = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(anywhere ? tables[t].rows : hot));
        tb.indices.push_back(r);
      }
      tb.offsets.push_back(static_cast<std::int64_t>(tb.indices.size()));
    }
  }
  return out;
}

// A one-hot batch (one index a bag) as datasets store it: int32, [batch x tables], row-major.
inline std::vector<std::int32_t> packed_one_hot(const std::vector<TableBatch>& batch, int b_size) {
  const std::size_t tables = batch.size();
  std::vector<std::int32_t> packed(std::size_t(b_size) * tables);
  for (int b = 0; b < b_size; ++b)
    for (std::size_t t = 0; t < tables; ++t)
      packed[std::size_t(b) * tables + t] = static_cast<std::int32_t>(batch[t].indices[b]);
  return packed;
}

inline std::vector<float> random_vector(std::size_t n, std::mt19937_64& rng, float scale = 1.f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

class ReferenceEmbedding {
 public:
  ReferenceEmbedding(std::vector<TableSpec> tables, bool mean, std::string kind, float lr, float eps,
                     float initial_accumulator, std::uint64_t seed)
      : tables_(std::move(tables)), mean_(mean), kind_(std::move(kind)), lr_(lr), eps_(eps) {
    for (std::size_t t = 0; t < tables_.size(); ++t) {
      const auto& s = tables_[t];
      std::vector<double> w(s.rows * s.dim);
      for (std::int64_t r = 0; r < s.rows; ++r)
        for (int c = 0; c < s.dim; ++c)
          w[r * s.dim + c] = initial_weight(seed, static_cast<int>(t), s.rows, s.dim, r, c);
      weights_.push_back(std::move(w));
      std::size_t state_n = kind_ == "adagrad" ? s.rows * s.dim : kind_ == "rowwise_adagrad" ? s.rows : 0;
      state_.push_back(std::vector<double>(state_n, initial_accumulator));
    }
  }

  // out: [batch x tables x dim]
  std::vector<double> forward(const std::vector<TableBatch>& batch) const {
    const int T = static_cast<int>(tables_.size()), D = tables_[0].dim;
    const int B = static_cast<int>(batch[0].offsets.size()) - 1;
    std::vector<double> out(std::size_t(B) * T * D, 0.0);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b) {
        const auto begin = batch[t].offsets[b], end = batch[t].offsets[b + 1];
        for (auto k = begin; k < end; ++k)
          for (int d = 0; d < D; ++d)
            out[(std::size_t(b) * T + t) * D + d] += weights_[t][batch[t].indices[k] * D + d];
        if (mean_ && end > begin)
          for (int d = 0; d < D; ++d) out[(std::size_t(b) * T + t) * D + d] /= double(end - begin);
      }
    return out;
  }

  void backward(const std::vector<TableBatch>& batch, const std::vector<float>& grad_out) {
    const int T = static_cast<int>(tables_.size()), D = tables_[0].dim;
    const int B = static_cast<int>(batch[0].offsets.size()) - 1;
    for (int t = 0; t < T; ++t) {
      std::vector<double> g(tables_[t].rows * D, 0.0);
      std::vector<bool> touched(tables_[t].rows, false);
      for (int b = 0; b < B; ++b) {
        const auto begin = batch[t].offsets[b], end = batch[t].offsets[b + 1];
        const double scale = mean_ && end > begin ? 1.0 / double(end - begin) : 1.0;
        for (auto k = begin; k < end; ++k) {
          const auto r = batch[t].indices[k];
          touched[r] = true;
          for (int d = 0; d < D; ++d) g[r * D + d] += grad_out[(std::size_t(b) * T + t) * D + d] * scale;
        }
      }
      for (std::int64_t r = 0; r < tables_[t].rows; ++r) {
        if (!touched[r]) continue;
        double* w = &weights_[t][r * D];
        const double* gr = &g[r * D];
        if (kind_ == "sgd") {
          for (int d = 0; d < D; ++d) w[d] -= lr_ * gr[d];
        } else if (kind_ == "adagrad") {
          for (int d = 0; d < D; ++d) {
            double& s = state_[t][r * D + d];
            s += gr[d] * gr[d];
            w[d] -= lr_ * gr[d] / (std::sqrt(s) + eps_);
          }
        } else {
          double sq = 0;
          for (int d = 0; d < D; ++d) sq += gr[d] * gr[d];
          double& s = state_[t][r];
          s += sq / D;
          for (int d = 0; d < D; ++d) w[d] -= lr_ * gr[d] / (std::sqrt(s) + eps_);
        }
      }
    }
  }

  double weight(int t, std::int64_t r, int d) const { return weights_[t][r * tables_[t].dim + d]; }
  const std::vector<double>& state(int t) const { return state_[t]; }

 private:
  std::vector<TableSpec> tables_;
  bool mean_;
  std::string kind_;
  double lr_, eps_;
  std::vector<std::vector<double>> weights_, state_;
};

// |a - b| <= atol + rtol * |b|
inline bool close(double a, double b, double rtol = 1e-5, double atol = 1e-6) {
  return std::abs(a - b) <= atol + rtol * std::abs(b);
}

}  // namespace recmix::embedding::test
