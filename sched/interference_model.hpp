#pragma once
// Predicts each job's slowdown when it shares a GPU with others. Two layers:
//  1. a contention prior from utilisation vectors: a job's step splits over the resources in
//     proportion to its shares, and the part on a resource whose summed demand D exceeds 1 is
//     stretched by D^gamma; each co-runner adds a fixed context-switch overhead alpha;
//  2. a learned residual per (job type, co-runner type): log slowdown - log prior is fitted as
//     mu + b_type + c_other + p_type . q_other (biases plus a low-rank factorisation, ridge-
//     regularised alternating least squares), i.e. collaborative filtering over job types, so
//     pairs never measured are predicted from the types' other pairs.
// Observations come from measured pair data (calibration) and from the runtime or simulator
// (online: observe() then refit()).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sched/pair_data.hpp"
#include "sched/utilisation.hpp"

namespace recmix::sched {

struct InterferenceOptions {
  int rank = 3;                 // latent factors per type
  double ridge = 0.5;           // L2 weight on biases and factors
  int iterations = 25;          // ALS sweeps per refit
  double alpha = 0.05;          // prior: slowdown per co-runner from sharing the device at all
  double gamma = 1.0;           // prior: exponent on overloaded demand
  bool use_residuals = true;    // false: prior only
};

// The contention prior on its own: (1 + alpha x co-runners) x sum over resources of
// (own share / own total) x max(1, summed demand)^gamma.
double contention_slowdown(const UtilisationVector& self, std::span<const UtilisationVector> others,
                           double alpha, double gamma);

class InterferenceModel {
 public:
  explicit InterferenceModel(InterferenceOptions options = {});

  // Job types are named; utilisation feeds the prior (types without it get the overhead only).
  int type_index(std::string_view type);  // registers a new type
  int find_type(std::string_view type) const;  // -1 when unknown
  void set_utilisation(int type, const UtilisationVector& util);
  std::size_t type_count() const { return names_.size(); }
  const std::string& type_name(int type) const { return names_.at(type); }
  bool has_utilisation(int type) const { return has_util_.at(type); }
  const UtilisationVector& utilisation(int type) const { return util_.at(type); }

  // Contention prior for `self` sharing with `others` (utilisation vectors only).
  double prior_slowdown(const UtilisationVector& self, std::span<const UtilisationVector> others) const;
  // Predicted slowdown of `type` sharing with `others` (types): prior x exp(sum of residuals).
  double predict(int type, std::span<const int> others) const;
  // Same as predict() with one co-runner, from a table rebuilt after each change (O(1)).
  double predict_pair(int type, int other) const;

  // Records one measured slowdown of `type` next to `other` (2-job groups); refit() learns them.
  void observe(int type, int other, double slowdown);
  std::size_t observation_count() const { return observations_.size(); }
  // Refits the residual model on every observation so far. Cheap for a few hundred types.
  void refit();
  // Chooses alpha and gamma on a grid to minimise squared log error of the prior on the
  // observations (types need utilisation). Call before refit().
  void calibrate_prior();

  const InterferenceOptions& options() const { return options_; }

 private:
  struct Observation {
    int type;
    int other;
    double log_slowdown;
  };
  double residual(int type, int other) const;
  double prior_pair_log(int type, int other) const;

  InterferenceOptions options_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> index_;
  std::vector<UtilisationVector> util_;
  std::vector<bool> has_util_;
  std::vector<Observation> observations_;
  mutable std::vector<double> pair_cache_;  // types x types, empty when stale
  // Fitted residual model.
  double mu_ = 0;
  std::vector<double> row_bias_, col_bias_;
  std::vector<std::vector<double>> row_factor_, col_factor_;
};

// Held-out evaluation on a measured pair dataset: unordered pairs are split at random (both
// directions of a pair fall on the same side); models are fitted on the training side only.
// With two unordered pairs or more each side gets at least one; fewer is a DataError.
struct HeldOutReport {
  std::size_t train_pairs = 0, test_pairs = 0;
  double mean_baseline_mae = 0;   // predict the training mean slowdown
  double prior_mae = 0;           // utilisation prior only (calibrated on training pairs)
  double model_mae = 0;           // prior + collaborative-filtering residuals
  double model_mape = 0;          // mean |pred - true| / true
  double model_within_10pct = 0;  // share of test pairs predicted within 10%
};
HeldOutReport evaluate_held_out(const PairDataset& data, double test_fraction, std::uint64_t seed,
                                const InterferenceOptions& options = {});

// Loads every pair of `data` into `model` (types, utilisation, observations).
void add_pairs(InterferenceModel& model, const PairDataset& data);

}  // namespace recmix::sched
