#pragma once
// Factories of the built-in policies, one file each (make_policy() picks by name), and the
// co-location search they share.
#include <functional>
#include <memory>
#include <vector>

#include "sched/policy.hpp"

namespace recmix::sched {

std::unique_ptr<Policy> make_exclusive_fifo(const PolicyOptions& options);
std::unique_ptr<Policy> make_memory_first(const PolicyOptions& options);
std::unique_ptr<Policy> make_complementary(const PolicyOptions& options);
std::unique_ptr<Policy> make_interference_aware(const PolicyOptions& options);
std::unique_ptr<Policy> make_delay_scheduling(const PolicyOptions& options);
std::unique_ptr<Policy> make_least_attained_service(const PolicyOptions& options);

// Picks job.gpus shared GPUs (already running at least one job, with memory and a free slot).
// GPUs holding one job are grouped by that job's type: `score(gpu)` is evaluated once per type
// (on the group's best-fitting GPU) and groups are taken best score first; GPUs holding more
// jobs are scored one by one (at most `scan_limit`). Scores of -infinity reject a GPU.
// Returns an empty vector when fewer than job.gpus acceptable GPUs exist.
std::vector<int> find_shared_placement(const ClusterState& cluster, const Job& job,
                                       const std::function<double(int gpu)>& score, int scan_limit = 64);

}  // namespace recmix::sched
