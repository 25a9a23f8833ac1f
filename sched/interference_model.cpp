#include "sched/interference_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "core/random.hpp"

namespace recmix::sched {

InterferenceModel::InterferenceModel(InterferenceOptions options) : options_(options) {}

int InterferenceModel::find_type(std::string_view type) const {
  const auto it = index_.find(std::string(type));
  return it == index_.end() ? -1 : it->second;
}

int InterferenceModel::type_index(std::string_view type) {
  const int found = find_type(type);
  if (found >= 0) return found;
  const int id = static_cast<int>(names_.size());
  names_.emplace_back(type);
  index_.emplace(std::string(type), id);
  util_.emplace_back();
  has_util_.push_back(false);
  row_bias_.push_back(0);
  col_bias_.push_back(0);
  row_factor_.emplace_back(options_.rank, 0.0);
  col_factor_.emplace_back(options_.rank, 0.0);
  pair_cache_.clear();
  return id;
}

void InterferenceModel::set_utilisation(int type, const UtilisationVector& util) {
  util_.at(type) = util;
  has_util_.at(type) = true;
  pair_cache_.clear();
}

double contention_slowdown(const UtilisationVector& self, std::span<const UtilisationVector> others,
                           double alpha, double gamma) {
  const double overhead = 1.0 + alpha * static_cast<double>(others.size());
  const double busy = self.total();
  if (busy <= 0) return overhead;
  double stretch = 0;
  for (std::size_t r = 0; r < kResourceCount; ++r) {
    if (self.share[r] <= 0) continue;
    double demand = self.share[r];
    for (const auto& o : others) demand += o.share[r];
    const double over = std::max(1.0, demand);
    stretch += self.share[r] / busy * (gamma == 1.0 ? over : std::pow(over, gamma));
  }
  return overhead * stretch;
}

double InterferenceModel::prior_slowdown(const UtilisationVector& self,
                                         std::span<const UtilisationVector> others) const {
  return contention_slowdown(self, others, options_.alpha, options_.gamma);
}

double InterferenceModel::prior_pair_log(int type, int other) const {
  if (!has_util_[type]) return std::log1p(options_.alpha);
  const UtilisationVector o = has_util_[other] ? util_[other] : UtilisationVector{};
  return std::log(prior_slowdown(util_[type], std::span<const UtilisationVector>(&o, 1)));
}

double InterferenceModel::residual(int type, int other) const {
  if (!options_.use_residuals || observations_.empty()) return 0;
  double r = mu_ + row_bias_[type] + col_bias_[other];
  for (int k = 0; k < options_.rank; ++k) r += row_factor_[type][k] * col_factor_[other][k];
  return r;
}

double InterferenceModel::predict(int type, std::span<const int> others) const {
  if (others.empty()) return 1.0;
  double log_s = 0;
  if (has_util_[type]) {
    std::vector<UtilisationVector> u;
    u.reserve(others.size());
    for (int o : others) u.push_back(has_util_[o] ? util_[o] : UtilisationVector{});
    log_s = std::log(prior_slowdown(util_[type], u));
  } else {
    log_s = std::log1p(options_.alpha * static_cast<double>(others.size()));
  }
  for (int o : others) log_s += residual(type, o);
  return std::exp(log_s);
}

double InterferenceModel::predict_pair(int type, int other) const {
  const std::size_t n = names_.size();
  if (pair_cache_.size() != n * n) {
    pair_cache_.assign(n * n, 0.0);
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b) {
        const int o = static_cast<int>(b);
        pair_cache_[a * n + b] = predict(static_cast<int>(a), std::span<const int>(&o, 1));
      }
  }
  return pair_cache_[static_cast<std::size_t>(type) * n + other];
}

void InterferenceModel::observe(int type, int other, double slowdown) {
  RECMIX_REQUIRE(type >= 0 && type < static_cast<int>(names_.size()) && other >= 0 &&
                     other < static_cast<int>(names_.size()),
                 ConfigError, "interference observation for an unknown job type");
  RECMIX_REQUIRE(slowdown > 0 && std::isfinite(slowdown), DataError,
                 "interference observation for '" + names_[type] + "' has slowdown " + std::to_string(slowdown));
  observations_.push_back({type, other, std::log(slowdown)});
}

void InterferenceModel::calibrate_prior() {
  double best = INFINITY;
  InterferenceOptions best_options = options_;
  for (double alpha : {0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3}) {
    for (double gamma : {0.25, 0.5, 0.75, 1.0, 1.5, 2.0}) {
      options_.alpha = alpha;
      options_.gamma = gamma;
      double err = 0;
      for (const auto& o : observations_) {
        const double e = prior_pair_log(o.type, o.other) - o.log_slowdown;
        err += e * e;
      }
      if (err < best) {
        best = err;
        best_options = options_;
      }
    }
  }
  options_ = best_options;
  pair_cache_.clear();
}

namespace {
// Solves the (n x n) system a x = b in place (Gaussian elimination, partial pivoting).
std::vector<double> solve(std::vector<double> a, std::vector<double> b, int n) {
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(a[r * n + c]) > std::abs(a[pivot * n + c])) pivot = r;
    for (int k = 0; k < n; ++k) std::swap(a[c * n + k], a[pivot * n + k]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / a[c * n + c];
      for (int k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < n; ++k) s -= a[r * n + k] * x[k];
    x[r] = s / a[r * n + r];
  }
  return x;
}
}  // namespace

void InterferenceModel::refit() {
  const int types = static_cast<int>(names_.size());
  const int k = options_.rank;
  if (observations_.empty()) return;
  std::vector<double> target(observations_.size());
  for (std::size_t i = 0; i < observations_.size(); ++i) {
    const auto& o = observations_[i];
    target[i] = o.log_slowdown - prior_pair_log(o.type, o.other);
  }
  mu_ = std::accumulate(target.begin(), target.end(), 0.0) / static_cast<double>(target.size());
  std::vector<std::vector<std::size_t>> by_row(types), by_col(types);
  for (std::size_t i = 0; i < observations_.size(); ++i) {
    by_row[observations_[i].type].push_back(i);
    by_col[observations_[i].other].push_back(i);
  }
  // Deterministic small initial factors so ALS can break symmetry.
  for (int t = 0; t < types; ++t) {
    row_bias_[t] = col_bias_[t] = 0;
    for (int f = 0; f < k; ++f) {
      row_factor_[t][f] = 0.1 * (static_cast<double>(random::uniform01(7, static_cast<std::uint64_t>(t), f)) - 0.5);
      col_factor_[t][f] = 0.1 * (static_cast<double>(random::uniform01(8, static_cast<std::uint64_t>(t), f)) - 0.5);
    }
  }
  const int n = k + 1;
  // One side of ALS: for each type on `side`, solve for [bias, factors] with the other fixed.
  // One set of buffers for every type and observation of the sweeps.
  std::vector<double> a(n * n), b(n), x(n);
  auto sweep = [&](std::vector<std::vector<std::size_t>>& groups, std::vector<double>& bias,
                   std::vector<std::vector<double>>& factor, const std::vector<double>& other_bias,
                   const std::vector<std::vector<double>>& other_factor, bool rows) {
    for (int t = 0; t < types; ++t) {
      if (groups[t].empty()) continue;
      std::fill(a.begin(), a.end(), 0.0);
      std::fill(b.begin(), b.end(), 0.0);
      for (std::size_t i : groups[t]) {
        const int o = rows ? observations_[i].other : observations_[i].type;
        x[0] = 1.0;
        for (int f = 0; f < k; ++f) x[f + 1] = other_factor[o][f];
        const double y = target[i] - mu_ - other_bias[o];
        for (int r = 0; r < n; ++r) {
          b[r] += x[r] * y;
          for (int c = 0; c < n; ++c) a[r * n + c] += x[r] * x[c];
        }
      }
      for (int r = 0; r < n; ++r) a[r * n + r] += options_.ridge;
      const auto sol = solve(a, b, n);
      bias[t] = sol[0];
      for (int f = 0; f < k; ++f) factor[t][f] = sol[f + 1];
    }
  };
  for (int it = 0; it < options_.iterations; ++it) {
    sweep(by_row, row_bias_, row_factor_, col_bias_, col_factor_, true);
    sweep(by_col, col_bias_, col_factor_, row_bias_, row_factor_, false);
  }
  pair_cache_.clear();
}

void add_pairs(InterferenceModel& model, const PairDataset& data) {
  for (const auto& [name, solo] : data.solo) {
    const int t = model.type_index(name);
    if (solo.util.total() > 0) model.set_utilisation(t, solo.util);
  }
  for (const auto& p : data.pairs) model.observe(model.type_index(p.type), model.type_index(p.other), p.slowdown);
}

HeldOutReport evaluate_held_out(const PairDataset& data, double test_fraction, std::uint64_t seed,
                                const InterferenceOptions& options) {
  RECMIX_REQUIRE(test_fraction > 0 && test_fraction < 1, ConfigError, "held-out fraction must be in (0, 1)");
  // Unordered pair -> its draw, in order of first appearance, and whether it is held out.
  std::map<std::pair<std::string, std::string>, double> draw;
  std::uint64_t counter = 0;
  for (const auto& p : data.pairs) {
    auto key = std::minmax(p.type, p.other);
    if (!draw.count({key.first, key.second}))
      draw[{key.first, key.second}] = static_cast<double>(random::uniform01(seed, 0, counter++));
  }
  std::map<std::pair<std::string, std::string>, bool> held;
  for (const auto& [key, u] : draw) held[key] = u < test_fraction;
  // A few pairs (a handful of measured DLRM types) may all fall on one side: then the pair with
  // the smallest draw is held out, or the one with the largest is trained on. Larger datasets
  // split exactly as the draws say.
  if (draw.size() >= 2) {
    const auto by_draw = [](const auto& a, const auto& b) { return a.second < b.second; };
    const auto has = [&](bool side) {
      return std::any_of(held.begin(), held.end(), [&](const auto& h) { return h.second == side; });
    };
    if (!has(true)) held[std::min_element(draw.begin(), draw.end(), by_draw)->first] = true;
    if (!has(false)) held[std::max_element(draw.begin(), draw.end(), by_draw)->first] = false;
  }
  PairDataset train = data, test = data;
  train.pairs.clear();
  test.pairs.clear();
  for (const auto& p : data.pairs) {
    auto key = std::minmax(p.type, p.other);
    (held[{key.first, key.second}] ? test : train).pairs.push_back(p);
  }
  RECMIX_REQUIRE(!train.pairs.empty() && !test.pairs.empty(), DataError,
                 data.source + ": too few pairs for a held-out split");
  InterferenceModel prior_model(options);
  add_pairs(prior_model, train);
  prior_model.calibrate_prior();
  InterferenceOptions prior_only = prior_model.options();
  prior_only.use_residuals = false;
  InterferenceModel prior_eval(prior_only);
  InterferenceOptions full = prior_model.options();
  full.use_residuals = true;
  InterferenceModel model(full);
  add_pairs(prior_eval, train);
  add_pairs(model, train);
  model.refit();
  double mean = 0;
  for (const auto& p : train.pairs) mean += p.slowdown;
  mean /= static_cast<double>(train.pairs.size());
  HeldOutReport r;
  r.train_pairs = train.pairs.size();
  r.test_pairs = test.pairs.size();
  for (const auto& p : test.pairs) {
    const double pred = model.predict_pair(model.type_index(p.type), model.type_index(p.other));
    const double prior = prior_eval.predict_pair(prior_eval.type_index(p.type), prior_eval.type_index(p.other));
    r.mean_baseline_mae += std::abs(mean - p.slowdown);
    r.prior_mae += std::abs(prior - p.slowdown);
    r.model_mae += std::abs(pred - p.slowdown);
    r.model_mape += std::abs(pred - p.slowdown) / p.slowdown;
    r.model_within_10pct += std::abs(pred - p.slowdown) <= 0.1 * p.slowdown ? 1 : 0;
  }
  const double n = static_cast<double>(test.pairs.size());
  r.mean_baseline_mae /= n;
  r.prior_mae /= n;
  r.model_mae /= n;
  r.model_mape /= n;
  r.model_within_10pct /= n;
  return r;
}

}  // namespace recmix::sched
