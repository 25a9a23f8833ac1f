#include "sched/sim/ground_truth.hpp"

#include <algorithm>
#include <cmath>

#include "core/random.hpp"

namespace recmix::sched {

SlowdownTruth::SlowdownTruth(const InterferenceModel& types, double noise_sigma, std::uint64_t seed)
    : prior_(types.options()), types_(types.type_count()) {
  measured_.assign(types_ * types_, NAN);
  neighbour_.assign(types_, 1.0);
  source_.assign(types_ * types_, kFormula);
  noise_.resize(types_ * types_);
  for (std::size_t i = 0; i < noise_.size(); ++i)
    noise_[i] = static_cast<double>(random::normal(seed, 11, i, 0.0f, static_cast<float>(noise_sigma)));
}

void SlowdownTruth::add_measured(const PairDataset& data, const InterferenceModel& types) {
  std::vector<double> sum(types_ * types_, 0.0), count(types_ * types_, 0.0);
  for (const auto& p : data.pairs) {
    const int a = types.find_type(p.type), b = types.find_type(p.other);
    if (a < 0 || b < 0 || static_cast<std::size_t>(a) >= types_ || static_cast<std::size_t>(b) >= types_) continue;
    sum[a * types_ + b] += p.slowdown;
    count[a * types_ + b] += 1;
  }
  for (const auto& [type, slowdown] : data.busy_neighbour) {
    const int t = types.find_type(type);
    if (t < 0 || static_cast<std::size_t>(t) >= types_) continue;
    neighbour_[static_cast<std::size_t>(t)] = std::max(1.0, slowdown);
    any_neighbour_ = true;
  }
  const int index = static_cast<int>(sources_.size());
  sources_.push_back(data.source);
  for (std::size_t i = 0; i < sum.size(); ++i)
    if (count[i] > 0) {
      measured_[i] = sum[i] / count[i];
      source_[i] = index;
    }
}

int SlowdownTruth::measured_cell(const Job& job, std::span<const Job* const> co_runners) const {
  if (co_runners.size() != 1) return -1;  // alone, or three jobs or more: no pair measures it
  const int other = co_runners[0]->type;
  if (job.type < 0 || other < 0 || static_cast<std::size_t>(job.type) >= types_ ||
      static_cast<std::size_t>(other) >= types_)
    return -1;
  const std::size_t cell = static_cast<std::size_t>(job.type) * types_ + static_cast<std::size_t>(other);
  return std::isnan(measured_[cell]) ? -1 : static_cast<int>(cell);
}

int SlowdownTruth::source(const Job& job, std::span<const Job* const> co_runners) const {
  const int cell = measured_cell(job, co_runners);
  return cell < 0 ? kFormula : source_[static_cast<std::size_t>(cell)];
}

std::string SlowdownTruth::type_source(int type) const {
  if (type < 0 || static_cast<std::size_t>(type) >= types_) return "formula";
  std::vector<bool> used(sources_.size(), false);
  for (std::size_t other = 0; other < types_; ++other) {
    const int s = source_[static_cast<std::size_t>(type) * types_ + other];
    if (s != kFormula) used[static_cast<std::size_t>(s)] = true;
  }
  std::string out;
  for (std::size_t s = 0; s < sources_.size(); ++s)
    if (used[s] && out.find(sources_[s]) == std::string::npos) out += (out.empty() ? "" : "+") + sources_[s];
  return out.empty() ? "formula" : out;
}

double SlowdownTruth::busy_neighbour(const Job& job) const {
  if (job.type < 0 || static_cast<std::size_t>(job.type) >= types_) return 1.0;
  return neighbour_[static_cast<std::size_t>(job.type)];
}

double SlowdownTruth::pair(const Job& job, const Job& other) const {
  const Job* o = &other;
  return slowdown(job, std::span<const Job* const>(&o, 1));
}

double SlowdownTruth::slowdown(const Job& job, std::span<const Job* const> co_runners) const {
  if (co_runners.empty()) return 1.0;
  if (const int cell = measured_cell(job, co_runners); cell >= 0)
    return std::max(1.0, measured_[static_cast<std::size_t>(cell)]);
  const bool typed = job.type >= 0 && static_cast<std::size_t>(job.type) < types_;
  std::vector<UtilisationVector> others;
  others.reserve(co_runners.size());
  double log_noise = 0;
  for (const Job* o : co_runners) {
    others.push_back(o->profile.util);
    if (typed && o->type >= 0 && static_cast<std::size_t>(o->type) < types_) log_noise += noise_[job.type * types_ + o->type];
  }
  return std::max(1.0, contention_slowdown(job.profile.util, others, prior_.alpha, prior_.gamma) * std::exp(log_noise));
}

}  // namespace recmix::sched
