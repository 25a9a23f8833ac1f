#pragma once
// The scheduler's view of a job spec (sched::JobSpec): the model's shape with the dataset's
// tables, the optimizers, the precision and the tiers, as the memory estimator and the
// utilisation profile read them. Beside the parser so that the spec's rules have one home.
#include "data/format.hpp"
#include "runtime/train/job_spec.hpp"
#include "sched/job_spec.hpp"

namespace recmix::runtime {

// ranks: the job's rank count; priority and arrival_s: as queued (recmix run's jobs file).
// An untiered spec (hot_fraction unset) keeps every row hot: tiering.hot_fraction = 1.
sched::JobSpec to_sched_spec(const JobSpec& spec, const data::DatasetInfo& info, int ranks, int priority = 0,
                             double arrival_s = 0);

}  // namespace recmix::runtime
