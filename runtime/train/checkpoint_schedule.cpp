#include "runtime/train/checkpoint_schedule.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/train/dlrm_model.hpp"

namespace recmix::runtime {

Trainer::CheckpointSchedule::CheckpointSchedule(Trainer& trainer, const TrainOptions& options, spdlog::logger& log,
                                                std::int64_t step)
    : t_(trainer), options_(options), log_(log), rank_(trainer.comm_.rank()) {
  const auto& spec = t_.spec_;
  if (spec.checkpoint.async && options.collective_io) {
    log_.info("checkpoint.async is not used by jobs of recmix run: checkpoints are written in the step");
  } else if (spec.checkpoint.async && spec.checkpoint.interval > 0) {
    const std::size_t bytes = describe_checkpoint(*t_.model_, t_.checkpoint_meta(step), rank_).bytes();
    writer_ = std::make_unique<AsyncCheckpointWriter>(t_.comm_, *t_.backend_, bytes);
    log_.info("checkpoints are written in the background from a {} copy in host memory on rank {}",
              device::format_bytes(bytes), rank_);
  }
}

void Trainer::CheckpointSchedule::written(const std::string& path) {
  if (rank_ == 0) t_.prune_checkpoints();
  last_ = path;
}

void Trainer::CheckpointSchedule::finish_background() {
  if (!writer_ || !writer_->in_flight()) return;
  const auto wait_start = Clock::now();  // Trainer::Clock
  const bool ended = writer_->finished();
  const std::string path = writer_->wait();
  const double waited = std::chrono::duration<double>(Clock::now() - wait_start).count();
  written(path);
  log_.info("checkpoint written in the background: {} ({} in {:.2f} s{})", path,
            device::format_bytes(writer_->snapshot_bytes()), writer_->write_seconds(),
            ended ? std::string() : fmt::format("; training waited {:.2f} s for it", waited));
}

void Trainer::CheckpointSchedule::write(std::int64_t step, bool final) {
  DlrmModel& model = *t_.model_;
  comm::Communicator& comm = t_.comm_;
  const std::string path = t_.checkpoint_path(step);
  // A diverged model is not written: the newest checkpoint stays the last good one. Agreed
  // before the write (and outside recmix run's write grant), so every rank stops together. A
  // background write checks the values as it copies them (one pass over the model, not two).
  const bool background = writer_ && !final;
  if (!background) require_finite_model(model, comm, step, path);
  if (background && writer_->in_flight() && t_.spec_.checkpoint.when_busy == WhenBusy::skip) {
    std::int32_t busy = writer_->finished() ? 0 : 1;  // every rank skips, or none
    comm.all_reduce_sum(&busy, &busy, 1, comm::DataType::i32);
    if (busy > 0) {
      require_finite_model(model, comm, step, path);  // skipped, but checked
      log_.warn("checkpoint of step {} skipped: the write of {} is still going (checkpoint.when_busy = \"skip\")",
                step, writer_->path());
      return;
    }
  }
  finish_background();
  if (final && last_ == path) return;  // a stop at a checkpoint's step: written
  if (background) {
    t_.inject_checkpoint_fault(step);
    agree_finite_model(writer_->snapshot(describe_checkpoint(model, t_.checkpoint_meta(step), rank_)), comm, step,
                       path);
    writer_->launch(path);
    log_.info("checkpoint of step {} copied to host memory in {:.3f} s ({}); writing {} in the background", step,
              writer_->snapshot_seconds(), device::format_bytes(writer_->snapshot_bytes()), path);
    return;
  }
  if (options_.collective_io)
    options_.collective_io([&] { t_.save(path, step); });
  else
    t_.save(path, step);
  written(path);
  log_.info("checkpoint written: {}", path);
}

}  // namespace recmix::runtime
