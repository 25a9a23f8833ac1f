#pragma once
// Trainer::train's checkpoints (private to the trainer's files): each one is written in the step,
// or copied to host memory and written in the background when checkpoint.async is on. At most one
// background write is in flight, on the writer's thread; it is finished, and its failure thrown on
// every rank, at the next checkpoint or at the end, points every rank reaches in the same step.
// recmix run's jobs write in the step, under the run's write grant (TrainOptions::collective_io).
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/checkpoint/checkpoint_write.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::runtime {

class Trainer::CheckpointSchedule {
 public:
  // step: the step the run starts at (sizes the background copy of the model).
  CheckpointSchedule(Trainer& trainer, const TrainOptions& options, spdlog::logger& log, std::int64_t step);
  // The checkpoint of `step`; final: the run's last, always written in the step, and not again
  // when this step's checkpoint was written already (a stop at a checkpoint's step).
  void write(std::int64_t step, bool final);
  const std::string& last() const { return last_; }  // the newest written ("" for none yet)

 private:
  void finish_background();
  void written(const std::string& path);

  Trainer& t_;
  const TrainOptions& options_;
  spdlog::logger& log_;
  const int rank_;
  std::unique_ptr<AsyncCheckpointWriter> writer_;  // null: every checkpoint is written in the step
  std::string last_;
};

}  // namespace recmix::runtime
