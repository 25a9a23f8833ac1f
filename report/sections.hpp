#pragma once
// The sections of a report, one per kind of input: training runs (one or several, overlaid), a
// `recmix run` directory, a `recmix sim` result and its timeline.
#include <string>
#include <vector>

#include "report/html_page.hpp"
#include "report/sched_run.hpp"
#include "report/sim_results.hpp"
#include "report/training_run.hpp"

namespace recmix::report {

// Curves of every run overlaid (one colour per run), checkpoints, sharding plans.
void add_training_section(Page& page, const std::vector<TrainingRun>& runs, const std::string& title);
void add_sched_run_section(Page& page, const SchedRun& run);
void add_sim_section(Page& page, const SimFile& sim);
void add_timeline_section(Page& page, const SimTimeline& timeline);

}  // namespace recmix::report
