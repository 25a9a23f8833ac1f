#pragma once
// Co-location measured by `recmix run`: per job type, its step time alone and beside each other
// type, taken from the sample events of one or more runs (RUN_DIR/events.jsonl), and the pair
// file that carries them to the simulator (`recmix pairs`, `recmix sim --pairs`; the format is in
// docs/scheduler.md, "Measured pairs").
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "sched/pair_data.hpp"

namespace recmix::sched {

// A job's type: its name up to the first '.', so that "small.1" and "small.2" are two jobs of
// type "small" (a pair of one type needs two jobs).
std::string job_type_of(std::string_view job_name);

// The pair file's `other` for a type alone on its rank beside a busy rank of the node.
inline constexpr const char* kBusyNeighbour = "*";

// One type measured alone: mean step time and the mean shares of it (dense compute, embedding,
// all-reduce and update, data wait) and of the thread's busy time, over `samples` samples. Means
// weight each sample by the steps it covers (its `step` less the previous sample's of the same
// job, rank and launch; 1 without a `step`): the mean step time is the steps' time over their count.
struct MeasuredType {
  std::string type;
  double solo_step_s = 0;
  double dense_share = 0, embedding_share = 0, allreduce_share = 0, data_wait_share = 0, busy_share = 0;
  int samples = 0;
};

// `type` beside exactly one job of `other`: mean step time then, over `samples` samples;
// slowdown = colocated_step_s / the type's solo_step_s.
struct MeasuredPair {
  std::string type, other;
  double colocated_step_s = 0, slowdown = 1;
  int samples = 0;
};

// `type` alone on its rank while another rank of the node runs a job (shared cores, caches and
// memory): mean step time then; slowdown = step_s / the type's solo_step_s (alone on an idle node).
struct MeasuredNeighbour {
  std::string type;
  double step_s = 0, slowdown = 1;
  int samples = 0;
};

struct MeasuredPairs {
  std::vector<MeasuredType> types;  // by type name
  std::vector<MeasuredPair> pairs;  // by (type, other); only types with a solo measurement
  std::vector<MeasuredNeighbour> neighbours;  // by type; only types also measured on an idle node
};

// From the sample events of every job of every run: samples with no partner measure the job's
// type alone, samples with exactly one partner measure the pair (type, the partner's type);
// samples beside two or more are left out. A sample alone on its rank is "alone" when no other
// rank of the run has a sample within 1.5 round intervals of it, and "beside a busy rank"
// otherwise; a type with samples of the second kind only takes them as alone (and gets no
// neighbour line). IoError / DataError naming the file and line.
MeasuredPairs measure_pairs(const std::vector<std::string>& run_dirs);

// The pair file: a header, then one line per type alone (other empty), one per pair, and one per
// type beside a busy rank (other "*": colocated_step_s is the step time then):
// type,other,solo_step_s,colocated_step_s,slowdown,samples,dense_share,embedding_share,
// allreduce_share,data_wait_share,busy_share
void write_pairs_csv(const MeasuredPairs& pairs, std::ostream& out);
MeasuredPairs read_pairs_csv(const std::string& path);

// A type's utilisation vector from its solo line: compute = dense + embedding shares, host_cpu =
// busy share, network = all-reduce share, each at most 1 (all 0 when the line has no parts).
UtilisationVector measured_utilisation(const MeasuredType& type);

// As the simulator's pair data: slowdown per (type, other), solo speed = 1 / step time, and the
// utilisation vector compute = dense + embedding shares, host_cpu = busy share, network =
// all-reduce share (the CPU backend's view of where a step goes).
PairDataset to_pair_dataset(const MeasuredPairs& pairs, std::string source);

}  // namespace recmix::sched
