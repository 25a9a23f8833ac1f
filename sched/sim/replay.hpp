#pragma once
// Replays a live `recmix run` through the simulator, from the run's events.jsonl: the same cluster
// of ranks, policy and settings, the same jobs (arrival, ranks, priority, the profile and memory
// estimate the scheduler service computed) running for the times they measured, queued and ended
// when the live service saw them arrive and end (not a few milliseconds earlier, as a simulator
// that decides at once would have it, which reorders events that close together). The live run's
// decisions are read from the same file, so the two lists can be compared: the policies are one
// code path, and a replay that decides otherwise points at a difference between the runtime's
// scheduler service and the simulator.
#include <map>
#include <string>
#include <vector>

#include "sched/cluster_state.hpp"
#include "sched/policy.hpp"
#include "sched/sim/simulator.hpp"

namespace recmix::sched {

struct RunReplay {
  ClusterSpec cluster;
  std::string policy;             // as make_policy names it
  PolicyOptions options;
  std::vector<Job> jobs;          // ids as in the live run; work_s is the measured run time
  std::vector<TimedDecision> live;  // the live scheduler service's starts and preemptions
  std::vector<ExternalStop> moves;  // its move-aparts (stops outside the policy), replayed as such
  std::vector<ProfileUpdate> profiles;  // the utilisation it measured, applied when it did
  // When each job ended there (finished or failed; the log's end for one still running): the
  // replay ends it then, and queues each job when the live service saw it arrive, so that the
  // simulator meets the events in the live run's order.
  std::map<JobId, double> end_times;
  std::map<JobId, double> queue_times;  // when it saw each job arrive
  std::vector<std::string> names;   // job name by id ("" for ids that never became jobs)
};

// Throws DataError naming the file and line when events.jsonl is not a recmix run's log.
RunReplay read_run_events(const std::string& events_path);

struct ReplayResult {
  std::vector<TimedDecision> live, simulated;
  bool same = false;                  // the same decisions (kind, job, GPUs) in the same order
  std::size_t first_difference = 0;  // index of the first difference when !same
};

ReplayResult replay_run(const RunReplay& run);

// A side-by-side table of both decision lists, the first difference marked.
std::string describe(const RunReplay& run, const ReplayResult& result);

}  // namespace recmix::sched
