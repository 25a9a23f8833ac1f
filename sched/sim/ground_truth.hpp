#pragma once
// The simulator's "real" slowdowns, which policies never see directly: measured values for
// type pairs in the pair data (Lucid, Gavel, and the DLRM pairs recmix runs measured, given with
// `recmix sim --pairs`), and for every other group (an unmeasured pair, or three jobs or more)
// the contention prior on the jobs' own utilisation vectors times a fixed per-pair log-normal
// factor, so an unmeasured pair still has its own character that a model must learn. Never
// below 1. Each slowdown can say where it came from, so the simulator can count the groups that
// fell back to the formula.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sched/cluster_state.hpp"
#include "sched/interference_model.hpp"
#include "sched/pair_data.hpp"

namespace recmix::sched {

class SlowdownTruth {
 public:
  // Where a slowdown comes from: the formula, or the pair data of sources()[index].
  static constexpr int kFormula = -1;

  // Types are those of `types` (same indices as Job::type); the prior uses its options.
  SlowdownTruth(const InterferenceModel& types, double noise_sigma, std::uint64_t seed);
  // Measured pairs override the prior for their (type, other) (mean over repeats); a later
  // dataset overrides an earlier one for the pairs both hold. Its name is data.source.
  void add_measured(const PairDataset& data, const InterferenceModel& types);
  double slowdown(const Job& job, std::span<const Job* const> co_runners) const;
  double pair(const Job& job, const Job& other) const;
  // Which source slowdown(job, co_runners) takes: kFormula or an index into sources().
  int source(const Job& job, std::span<const Job* const> co_runners) const;
  const std::vector<std::string>& sources() const { return sources_; }
  // The pair data that covers `type` (names of the sources holding a pair of it beside another
  // type, joined by '+', e.g. "measured" or "lucid"), or "formula" when none does.
  std::string type_source(int type) const;
  // A job alone on its GPUs while another GPU of its node runs a job: its type's measured
  // busy-neighbour slowdown (PairDataset::busy_neighbour), 1 where none is measured.
  double busy_neighbour(const Job& job) const;
  bool has_busy_neighbour() const { return any_neighbour_; }

 private:
  int measured_cell(const Job& job, std::span<const Job* const> co_runners) const;  // -1: none

  InterferenceOptions prior_;
  std::size_t types_ = 0;
  std::vector<double> measured_;  // types x types, NaN = not measured
  std::vector<int> source_;       // types x types, index into sources_ of measured cells
  std::vector<std::string> sources_;
  std::vector<double> noise_;     // types x types log factors
  std::vector<double> neighbour_; // per type, 1 = not measured
  bool any_neighbour_ = false;
};

}  // namespace recmix::sched
