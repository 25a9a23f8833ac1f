#pragma once
// Trainer: runs one job on the ranks of a communicator: builds the backend, memory pool, reader
// and model from a JobSpec, trains with progress lines and JSON-lines metrics in the run
// directory, evaluates (exact AUC, log loss), writes and resumes checkpoints.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "data/reader.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "embedding/sharding_plan.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/train/train_faults.hpp"

namespace spdlog {
class logger;
}

namespace recmix::runtime {

class DlrmModel;
class MetricsWriter;

struct EvalResult {
  double auc = 0;
  double log_loss = 0;
  std::int64_t samples = 0;
};

// One training step as the co-location runtime samples it (every rank, after each step).
struct StepSample {
  std::int64_t step = 0;         // steps done, including those before a resume
  std::int64_t total_steps = 0;
  double step_s = 0;             // wall time of this step, waiting for data included
  double data_wait_s = 0;        // of which the reader kept the step waiting
  double loss = 0;
  std::size_t pool_current_bytes = 0;  // the job's device pool on this rank
  std::size_t pool_peak_bytes = 0;
};

// The quality target's outcome (train.target_auc): reached at the first evaluation whose AUC is
// at least the target; else the best AUC of the run's evaluations.
struct TargetOutcome {
  double target = 0;
  bool reached = false;
  std::int64_t step = 0;     // reached: the step of that evaluation
  double seconds = 0;        // reached: from the run's start (after initialisation) to its end
  double best_auc = 0;
  std::int64_t best_step = -1;  // -1: no evaluation
};

struct TrainResult {
  std::int64_t steps = 0;          // total steps done (including those before a resume)
  double last_loss = 0;            // loss of the last global batch
  std::optional<EvalResult> eval;  // the final evaluation when eval data is given
  std::string last_checkpoint;
  double samples_per_second = 0;
  bool stopped = false;            // stopped early (stop_after or stop_requested), checkpoint written
  std::optional<TargetOutcome> target;  // when train.target_auc is set (reached: the run ended there)
  double hot_hit_rate = -1;        // tiered tables: the share of rank 0's lookups served by hot rows
  bool already_reached = false;    // resumed at or past the target: nothing trained or written
};

struct TrainOptions {
  std::string resume;        // "" (none), "latest", "auto" (latest if any, else step 0) or a checkpoint path
  std::int64_t stop_after = 0;  // stop (with a checkpoint) after this many steps in this run; 0: never
  bool allow_changes = false;   // resume a checkpoint saved with another seed or global batch size
  bool quiet = false;        // no progress lines (tests)

  // Hooks of the co-location runtime (runtime/run/); recmix train leaves them empty.
  // Called on every rank after each step.
  std::function<void(const StepSample&)> on_step;
  // When set, the ranks exchange a status word before each step (one all-reduce of two integers):
  // whether this rank's stop_requested() says stop, and whether its read of the batch failed. The
  // job stops with a checkpoint before the first step at which any rank voted to stop; when a
  // rank's read failed, that rank throws its error and every other rank a PeerFailedError, so a
  // bad row on one rank ends the whole job instead of leaving its peers in a collective.
  std::function<bool()> stop_requested;
  // Runs each checkpoint write as collective_io(write). A checkpoint is collective parallel HDF5
  // under the process's HDF5 lock; jobs that share processes must not hold that lock in two
  // collective writes at once, or each rank waits for a peer that waits for the lock.
  std::function<void(const std::function<void()>&)> collective_io;
  // Faults the tests inject (none by default); the command line reads RECMIX_FAULT_INJECTION.
  TrainFaults faults;
};

// The shape a model is built for: from the training data, or from a checkpoint for eval.
struct DatasetShape {
  std::vector<std::int64_t> table_rows;
  int num_dense = 0;
};

class Trainer {
 public:
  // Without a shape, the training data's metadata gives it (and is checked against the spec).
  Trainer(JobSpec spec, comm::Communicator& comm, std::optional<DatasetShape> shape = std::nullopt);
  ~Trainer();

  TrainResult train(const TrainOptions& options = {});
  // Evaluates the current model on files (all of them, or max_batches global batches).
  EvalResult evaluate(const std::vector<std::string>& files, std::int64_t max_batches = 0);
  void save(const std::string& path, std::int64_t step);
  // Loads a checkpoint into the model; returns the step it was taken at.
  std::int64_t load(const std::string& path);

  DlrmModel& model() { return *model_; }
  const device::Backend& backend() const { return *backend_; }
  device::MemoryPool& device_pool() { return *device_pool_; }
  device::MemoryPool& host_pool() { return *host_pool_; }
  const JobSpec& spec() const { return spec_; }
  const embedding::ShardingPlan& plan() const { return *plan_; }

 private:
  std::string checkpoint_path(std::int64_t step) const;
  std::vector<std::string> checkpoints() const;
  std::string latest_checkpoint() const;
  void prune_checkpoints() const;
  void remove_unfinished_checkpoints(spdlog::logger& log) const;  // ckpt-*.h5.tmp (rank 0, at start)
  void check_resume_settings(const std::string& path, bool allowed, spdlog::logger& log) const;
  // A checkpoint's step lies in the epoch of its data position and within the run's epochs.
  void check_resume_step(const std::string& path, std::int64_t step, std::int64_t batches_per_epoch,
                         bool settings_changed) const;
  CheckpointMeta checkpoint_meta(std::int64_t step) const;
  void inject_checkpoint_fault(std::int64_t step) const;
  // Pieces of train(): the resumed step (the reader moved to its position), the opening log lines,
  // the loss read back at a log record, rank 0's log record, the injected faults and the NaN one
  // of them puts into a table after a step; and the checkpoints (checkpoint_schedule.hpp).
  using Clock = std::chrono::steady_clock;
  struct Progress;
  class CheckpointSchedule;
  std::int64_t resume(const TrainOptions& options, data::Reader& reader, spdlog::logger& log);
  void log_job(spdlog::logger& log, const data::Reader& reader, std::int64_t total_steps) const;
  void read_loss(Progress& p, std::int64_t step);
  void log_progress(Progress& p, std::int64_t step, std::int64_t total_steps, Clock::time_point now,
                    MetricsWriter& metrics, spdlog::logger& log);
  void arm_faults(const TrainFaults& faults);
  void after_step_faults(std::int64_t step, const TrainOptions& options);
  void inject_nan();

  std::int64_t init_ms_;  // when the constructor began (the MLPerf log's init_start)
  JobSpec spec_;
  comm::Communicator& comm_;
  std::unique_ptr<device::Backend> backend_;
  std::unique_ptr<device::MemoryPool> device_pool_;
  std::unique_ptr<device::MemoryPool> host_pool_;  // the host tier of tiered embedding tables
  // Collectives over device buffers: NCCL on CUDA, the staged communicator under cpu-strict; null
  // on the CPU, where comm_ takes device buffers (host memory there).
  std::unique_ptr<comm::Communicator> device_comm_;
  std::vector<std::int64_t> table_rows_;
  int num_dense_ = 0;
  std::unique_ptr<embedding::ShardingPlan> plan_;
  std::unique_ptr<DlrmModel> model_;
  data::ReaderPosition resume_position_;
  std::string resumed_from_;  // the checkpoint train() resumed from ("" for a fresh start)
  TrainFaults faults_;  // of the run in train()
  bool fault_armed_ = false;  // the step being trained is the one to fail inside
};

}  // namespace recmix::runtime
