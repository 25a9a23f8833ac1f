#pragma once
// The simulator's "real" slowdowns, which policies never see directly: measured values for
// type pairs in the public pair data (Lucid, Gavel), and for every other group the contention
// prior on the jobs' own utilisation vectors times a fixed per-pair log-normal factor, so an
// unmeasured pair still has its own character that a model must learn. Never below 1.
#include <cstdint>
#include <span>
#include <vector>

#include "sched/cluster_state.hpp"
#include "sched/interference_model.hpp"
#include "sched/pair_data.hpp"

namespace recmix::sched {

class SlowdownTruth {
 public:
  // Types are those of `types` (same indices as Job::type); the prior uses its options.
  SlowdownTruth(const InterferenceModel& types, double noise_sigma, std::uint64_t seed);
  // Measured pairs override the prior for their (type, other) (mean over repeats).
  void add_measured(const PairDataset& data, const InterferenceModel& types);
  double slowdown(const Job& job, std::span<const Job* const> co_runners) const;
  double pair(const Job& job, const Job& other) const;

 private:
  InterferenceOptions prior_;
  std::size_t types_ = 0;
  std::vector<double> measured_;  // types x types, NaN = not measured
  std::vector<double> noise_;     // types x types log factors
};

}  // namespace recmix::sched
