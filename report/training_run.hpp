#pragma once
// What `recmix train` leaves in its run directory, read back for a report: metrics.jsonl (train
// and eval records), train.log (the job line, the sharding plan, checkpoints written) and
// checkpoints/. Lines that cannot be read are skipped and counted, never fatal: the report says
// what it skipped.
#include <cstdint>
#include <istream>
#include <utility>
#include <string>
#include <vector>

namespace recmix::report {

struct TrainRecord {
  std::int64_t step = 0, epoch = 0;
  double loss = 0, samples_per_s = 0, elapsed_s = 0;
  double time_s = 0;  // training time: elapsed_s, continued across resumes (each restarts it at 0)
  double device_peak_bytes = 0;
};

struct EvalRecord {
  std::int64_t step = 0, samples = 0;
  double auc = 0, logloss = 0;  // NaN where the record holds null (no positives or negatives)
  double time_s = 0;            // training time at that step, interpolated from the train records
};

struct CheckpointRecord {
  std::int64_t step = 0;
  // The training time and loss at its step, in the last launch of the job (a run of train records
  // up to a resume) that reached the step: that launch wrote the file there is.
  double time_s = 0, loss = 0;
  std::string file;           // its name in checkpoints/
  bool present = false;       // false: named in train.log, since pruned
  std::uintmax_t bytes = 0;
};

// The sharding plan as train.log prints it (embedding/sharding_plan.cpp, ShardingPlan::describe).
struct PlanRow {
  std::string rank, memory, lookups_x_dim, shards;
};

struct TrainingRun {
  std::string name;  // as the report labels it
  std::string dir;
  std::vector<TrainRecord> train;
  std::vector<EvalRecord> eval;
  std::vector<CheckpointRecord> checkpoints;
  std::string job_line;           // "job 'x': 2 rank(s), ..." (the last one in train.log)
  std::string plan_title;         // "sharding plan: 4 tables over 2 ranks"
  std::vector<PlanRow> plan;      // the last plan in train.log
  int plans_in_log = 0;
  std::int64_t metrics_lines = 0;
  std::int64_t skipped_lines = 0;  // not JSON, or a record without its fields
  std::int64_t other_records = 0;  // JSON objects of another "type" (ignored)
  std::vector<std::string> notes;  // what was skipped or absent, one sentence each
};

// True where `dir` holds metrics.jsonl or train.log.
bool is_training_run(const std::string& dir);
// Reads a training run directory. An IoError names a directory that holds neither file; what is
// missing or unreadable inside a run is a note.
TrainingRun read_training_run(const std::string& dir, const std::string& name);

// Parses one metrics.jsonl line into `run` (exposed for tests). Returns false, with the reason,
// for a line that is not a record the report can use.
bool parse_metrics_line(const std::string& line, TrainingRun& run, std::string& reason);
// Where checkpoint `step` goes on the time axis (CheckpointRecord::time_s and loss; for tests).
std::pair<double, double> checkpoint_time_and_loss(const std::vector<TrainRecord>& train, std::int64_t step);
// Reads the sharding plan, the job line and the checkpoints out of train.log text (for tests).
void parse_train_log(std::istream& log, TrainingRun& run, std::vector<std::pair<std::int64_t, std::string>>& written);

}  // namespace recmix::report
