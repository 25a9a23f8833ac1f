#pragma once
// Trainer::train's evaluations (private to the trainer's files): when they fall (every
// train.eval_interval steps, or train.eval_per_epoch times an epoch), their log lines and
// metrics.jsonl records, the quality target (train.target_auc: the run stops at the first
// evaluation whose AUC reaches it), and the MLPerf log's epoch, eval and run_stop events.
// Every rank calls in the same steps: an evaluation is collective and its result the same on all.
#include <chrono>
#include <cstdint>
#include <optional>

#include "runtime/train/trainer.hpp"

namespace recmix::runtime {

class MlLog;

class TrainEvals {
 public:
  // steps_per_epoch: the training set's global batches; step: the one the run starts at.
  TrainEvals(Trainer& trainer, spdlog::logger& log, MetricsWriter& metrics, MlLog& mllog,
             std::int64_t steps_per_epoch, std::int64_t total_steps, std::int64_t step);
  // After each step: evaluates when one is due (not after the run's last step: finish does) and
  // marks epoch ends in the MLPerf log; true when the evaluation reached the target (stop).
  bool after_step(std::int64_t step);
  // At the end of the run (after its closing checkpoint): the final evaluation when the run was
  // not stopped and the target not reached, the target's outcome, the MLPerf log's run_stop.
  void finish(std::int64_t step, bool stopped, TrainResult& result);
  // The steps between evaluations (0: none before the end).
  std::int64_t interval() const { return interval_; }

 private:
  EvalResult evaluate(std::int64_t step);
  double epoch_of(std::int64_t step) const { return double(step) / double(steps_per_epoch_); }

  Trainer& t_;
  const JobSpec& spec_;
  spdlog::logger& log_;
  MetricsWriter& metrics_;
  MlLog& mllog_;
  const std::int64_t steps_per_epoch_;
  const std::int64_t total_steps_;
  std::int64_t interval_ = 0;
  bool per_epoch_ = false;  // interval_ counts within each epoch, and each epoch's end evaluates
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int evaluations_ = 0;
  std::optional<EvalResult> last_;
  TargetOutcome target_;
};

}  // namespace recmix::runtime
