// Time of one scheduling round per policy with 1,000 queued jobs on 1,000 GPUs (125 nodes x 8):
// (a) an empty cluster, every job placed; (b) every GPU already running one job, so each
// placement is a co-location search. Jobs are drawn from the dlrm-heavy mix over the Philly
// trace. Median of repetitions; the cluster state is copied before each round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sched/policy.hpp"
#include "sched/sim/cluster_config.hpp"
#include "sched/sim/trace_reader.hpp"
#include "sched/sim/workload.hpp"

using namespace recmix::sched;

int main(int argc, char** argv) {
  const char* shared = std::getenv("RECMIX_SHARED_DIR");
  const std::string dir = argc > 1 ? argv[1] : std::string(shared ? shared : "../shared") + "/traces";
  ClusterSpec cluster = cluster_spec_for(machine_model("a100-dgx"), 125);
  const Trace trace = read_trace(dir + "/philly_jobs.csv");
  auto env = make_environment(cluster, dir);
  WorkloadOptions wo;
  wo.max_jobs = 3000;
  Workload w = build_workload(trace, cluster, *env, wo);
  std::vector<Job> queued(w.jobs.begin(), w.jobs.begin() + 1000);
  std::vector<Job> resident(w.jobs.begin() + 1000, w.jobs.end());
  std::vector<Job*> queue;
  for (auto& j : queued) queue.push_back(&j);
  // (b): one single-GPU resident job per GPU.
  ClusterState busy(cluster);
  int g = 0;
  for (auto& j : resident) {
    if (g >= cluster.gpu_count()) break;
    if (j.gpus != 1) continue;
    j.id += 1'000'000;
    if (busy.place(j, std::vector<int>{g}, 0)) ++g;
  }
  std::printf("one scheduling round, 1000 queued jobs, %d GPUs (median of 15)\n", cluster.gpu_count());
  std::printf("%-20s %14s %10s %18s %10s\n", "policy", "empty: ms", "decisions", "all busy: ms", "decisions");
  for (const auto& name : policy_names()) {
    double result[2][2];
    for (int scenario = 0; scenario < 2; ++scenario) {
      std::vector<double> times;
      std::size_t started = 0;
      for (int rep = 0; rep < 15; ++rep) {
        PolicyOptions o;
        o.dispatch_interval_s = 0;  // every call is a batched round
        o.window = 1000;
        o.search_budget = 1000;
        auto policy = make_policy(name, o);
        ClusterState state = scenario == 0 ? ClusterState(cluster) : busy;
        RecordingActions actions(state, 1e9);
        const auto t0 = std::chrono::steady_clock::now();
        policy->schedule(SchedulingContext{1e9, state, queue, env->model}, actions);
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        started = actions.decisions().size();
      }
      std::nth_element(times.begin(), times.begin() + 7, times.end());
      result[scenario][0] = times[7];
      result[scenario][1] = static_cast<double>(started);
    }
    std::printf("%-20s %14.2f %10.0f %18.2f %10.0f\n", name.c_str(), result[0][0], result[0][1], result[1][0], result[1][1]);
  }
  return 0;
}
