#include "sched/cluster_state.hpp"

#include <algorithm>
#include <bit>

#include "core/error.hpp"

namespace recmix::sched {

void validate(const ClusterSpec& spec) {
  RECMIX_REQUIRE(spec.nodes >= 1, ConfigError, "cluster: nodes must be at least 1");
  RECMIX_REQUIRE(spec.gpus_per_node >= 1 && spec.gpus_per_node <= 65536, ConfigError,
                 "cluster: gpus_per_node must be in 1..65536");
  RECMIX_REQUIRE(spec.gpu_memory_bytes > 0, ConfigError, "cluster: gpu_memory must be positive");
  RECMIX_REQUIRE(spec.intra_node_bandwidth > 0 && spec.inter_node_bandwidth > 0, ConfigError,
                 "cluster: intra/inter-node bandwidth must be positive");
  RECMIX_REQUIRE(spec.max_jobs_per_gpu >= 1 && spec.max_jobs_per_gpu <= 8, ConfigError,
                 "cluster: max_jobs_per_gpu must be in 1..8");
  RECMIX_REQUIRE(spec.cores_per_gpu >= 0, ConfigError, "cluster: cores_per_gpu must not be negative");
}

ClusterState::ClusterState(ClusterSpec spec) : spec_(std::move(spec)) {
  validate(spec_);
  gpus_.resize(spec_.gpu_count());
  free_gpus_ = spec_.gpu_count();
  // Every GPU free: whole words of ones, and the last word of each node cut to its GPUs.
  words_per_node_ = (spec_.gpus_per_node + 63) / 64;
  free_mask_.assign(static_cast<std::size_t>(spec_.nodes) * words_per_node_, ~0ull);
  if (const int tail = spec_.gpus_per_node % 64; tail != 0)
    for (int n = 0; n < spec_.nodes; ++n) free_mask_[(n + 1) * words_per_node_ - 1] = (1ull << tail) - 1ull;
  free_on_node_.assign(spec_.nodes, spec_.gpus_per_node);
  nodes_by_free_count_.resize(spec_.gpus_per_node + 1);
  for (int n = 0; n < spec_.nodes; ++n) nodes_by_free_count_[spec_.gpus_per_node].insert(n);
}

int ClusterState::free_gpus_on_node(int node) const { return free_on_node_[node]; }

// Bit i of the node's words: its GPU i is free.
void ClusterState::set_free(int g, bool free) {
  const int node = node_of(g), i = g % spec_.gpus_per_node;
  std::uint64_t& word = free_mask_[static_cast<std::size_t>(node) * words_per_node_ + i / 64];
  const std::uint64_t bit = 1ull << (i % 64);
  word = free ? word | bit : word & ~bit;
  free_on_node_[node] += free ? 1 : -1;
}

bool ClusterState::fits(const Job& job, std::span<const int> gpus) const {
  if (static_cast<int>(gpus.size()) != job.gpus) return false;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const int g = gpus[i];
    if (g < 0 || g >= gpu_count()) return false;
    for (std::size_t k = 0; k < i; ++k)
      if (gpus[k] == g) return false;
    if (!fits_gpu(job, g)) return false;
  }
  return !running_.count(job.id);
}

bool ClusterState::fits_gpu(const Job& job, int g) const {
  const Gpu& gpu = gpus_[g];
  if (static_cast<int>(gpu.jobs.size()) >= spec_.max_jobs_per_gpu) return false;
  if (gpu.memory_used + job.profile.peak_memory_bytes > spec_.gpu_memory_bytes) return false;
  if (spec_.cores_per_gpu > 0 && gpu.cores_used + job.cores > spec_.cores_per_gpu) return false;
  for (JobId other : job.avoid)
    if (std::find(gpu.jobs.begin(), gpu.jobs.end(), other) != gpu.jobs.end()) return false;
  return true;
}

void ClusterState::unindex(int gpu) {
  const Gpu& g = gpus_[gpu];
  const std::pair<double, int> key{free_memory(gpu), gpu};
  shareable_.erase(key);
  if (g.jobs.size() == 1) {
    auto it = shareable_by_type_.find(g.types[0]);
    if (it != shareable_by_type_.end()) {
      it->second.erase(key);
      if (it->second.empty()) shareable_by_type_.erase(it);
    }
  }
}

void ClusterState::reindex(int gpu) {
  const Gpu& g = gpus_[gpu];
  const std::pair<double, int> key{free_memory(gpu), gpu};
  if (!g.jobs.empty() && static_cast<int>(g.jobs.size()) < spec_.max_jobs_per_gpu) {
    shareable_.insert(key);
    if (g.jobs.size() == 1) shareable_by_type_[g.types[0]].insert(key);
  }
}

bool ClusterState::place(const Job& job, std::span<const int> gpus, double now) {
  if (!fits(job, gpus)) return false;
  RunningJob r;
  r.job = &job;
  r.gpus.assign(gpus.begin(), gpus.end());
  r.start_s = now;
  std::vector<int> nodes;
  for (int g : gpus) {
    unindex(g);
    Gpu& gpu = gpus_[g];
    const int node = node_of(g);
    nodes.push_back(node);
    if (gpu.jobs.empty()) {
      const int before = free_gpus_on_node(node);
      nodes_by_free_count_[before].erase(node);
      set_free(g, false);
      nodes_by_free_count_[before - 1].insert(node);
      --free_gpus_;
    }
    gpu.jobs.push_back(job.id);
    gpu.types.push_back(job.type);
    gpu.memory_used += job.profile.peak_memory_bytes;
    gpu.cores_used += job.cores;
    for (std::size_t k = 0; k < kResourceCount; ++k) gpu.demand.share[k] += job.profile.util.share[k];
    reindex(g);
  }
  std::sort(nodes.begin(), nodes.end());
  r.nodes_used = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  running_.emplace(job.id, std::move(r));
  return true;
}

void ClusterState::set_job_utilisation(Job& job, const UtilisationVector& util) {
  if (const auto it = running_.find(job.id); it != running_.end())
    for (int g : it->second.gpus)
      for (std::size_t k = 0; k < kResourceCount; ++k) gpus_[g].demand.share[k] += util.share[k] - job.profile.util.share[k];
  job.profile.util = util;
}

RunningJob ClusterState::remove(JobId id) {
  auto it = running_.find(id);
  RECMIX_REQUIRE(it != running_.end(), ConfigError, "job " + std::to_string(id) + " is not running");
  RunningJob r = std::move(it->second);
  running_.erase(it);
  for (int g : r.gpus) {
    unindex(g);
    Gpu& gpu = gpus_[g];
    const auto pos = std::find(gpu.jobs.begin(), gpu.jobs.end(), id) - gpu.jobs.begin();
    gpu.jobs.erase(gpu.jobs.begin() + pos);
    gpu.types.erase(gpu.types.begin() + pos);
    gpu.memory_used -= r.job->profile.peak_memory_bytes;
    gpu.cores_used -= r.job->cores;
    for (std::size_t k = 0; k < kResourceCount; ++k) gpu.demand.share[k] -= r.job->profile.util.share[k];
    if (gpu.jobs.empty()) {
      gpu.memory_used = 0;  // no drift from floating-point sums
      gpu.demand = UtilisationVector{};
      const int node = node_of(g);
      const int before = free_gpus_on_node(node);
      nodes_by_free_count_[before].erase(node);
      set_free(g, true);
      nodes_by_free_count_[before + 1].insert(node);
      ++free_gpus_;
    }
    reindex(g);
  }
  return r;
}

const RunningJob* ClusterState::running(JobId id) const {
  const auto it = running_.find(id);
  return it == running_.end() ? nullptr : &it->second;
}

int ClusterState::best_fit_node(int n) const {
  for (int k = std::max(n, 1); k <= spec_.gpus_per_node; ++k)
    if (!nodes_by_free_count_[k].empty()) return *nodes_by_free_count_[k].begin();
  return -1;
}

std::vector<int> ClusterState::free_gpus_of(int node, int n) const {
  std::vector<int> out;
  for (int w = 0; w < words_per_node_ && static_cast<int>(out.size()) < n; ++w) {
    std::uint64_t mask = free_mask_[static_cast<std::size_t>(node) * words_per_node_ + w];
    while (mask && static_cast<int>(out.size()) < n) {
      const int bit = std::countr_zero(mask);
      out.push_back(node * spec_.gpus_per_node + w * 64 + bit);
      mask &= mask - 1;
    }
  }
  return out;
}

std::vector<int> ClusterState::free_gpus_spread(int n) const {
  std::vector<int> out;
  if (n > free_gpus_) return out;
  for (int k = spec_.gpus_per_node; k >= 1 && static_cast<int>(out.size()) < n; --k) {
    for (int node : nodes_by_free_count_[k]) {
      const auto take = free_gpus_of(node, n - static_cast<int>(out.size()));
      out.insert(out.end(), take.begin(), take.end());
      if (static_cast<int>(out.size()) >= n) break;
    }
  }
  return out;
}

const std::set<std::pair<double, int>>* ClusterState::shareable_with_type(int type) const {
  const auto it = shareable_by_type_.find(type);
  return it == shareable_by_type_.end() ? nullptr : &it->second;
}

}  // namespace recmix::sched
