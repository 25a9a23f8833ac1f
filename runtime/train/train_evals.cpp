#include "runtime/train/train_evals.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "runtime/train/metrics.hpp"
#include "runtime/train/mllog.hpp"
#include "runtime/train/train_log.hpp"

namespace recmix::runtime {

namespace {

// train.eval_interval, or ceil(steps_per_epoch / train.eval_per_epoch).
std::int64_t eval_interval_steps(const TrainSpec& train, std::int64_t steps_per_epoch) {
  if (train.eval_per_epoch > 0) return (steps_per_epoch + train.eval_per_epoch - 1) / train.eval_per_epoch;
  return train.eval_interval;
}

}  // namespace

TrainEvals::TrainEvals(Trainer& trainer, spdlog::logger& log, MetricsWriter& metrics, MlLog& mllog,
                       std::int64_t steps_per_epoch, std::int64_t total_steps, std::int64_t step)
    : t_(trainer), spec_(trainer.spec()), log_(log), metrics_(metrics), mllog_(mllog),
      steps_per_epoch_(steps_per_epoch), total_steps_(total_steps) {
  if (!spec_.data.eval.empty()) interval_ = eval_interval_steps(spec_.train, steps_per_epoch);
  per_epoch_ = spec_.train.eval_per_epoch > 0;
  target_.target = spec_.train.target_auc;
  if (target_.target > 0)
    log_.info("quality target: eval AUC {}, evaluated {}", target_.target,
              interval_ > 0 ? fmt::format("every {} steps", interval_) : "at the end only");
  mllog_.event("train_samples", steps_per_epoch * spec_.train.batch_size);
  mllog_.start("epoch_start", {{"epoch_num", step / steps_per_epoch}});
}

EvalResult TrainEvals::evaluate(std::int64_t step) {
  const nlohmann::json epoch = {{"epoch_num", epoch_of(step)}};
  mllog_.start("eval_start", epoch);
  const EvalResult r = t_.evaluate(spec_.data.eval, spec_.train.eval_batches);
  log_.info("eval at step {}: AUC {:.6f}  logloss {:.6f}  ({} samples)", step, r.auc, r.log_loss, r.samples);
  metrics_.write({{"type", "eval"}, {"step", step}, {"auc", r.auc}, {"logloss", r.log_loss}, {"samples", r.samples}});
  mllog_.event("eval_accuracy", r.auc, epoch);
  mllog_.end("eval_stop", epoch);
  if (evaluations_++ == 0) mllog_.event("eval_samples", r.samples, epoch);
  last_ = r;
  if (target_.target > 0 && std::isfinite(r.auc) && (target_.best_step < 0 || r.auc > target_.best_auc))
    target_.best_auc = r.auc, target_.best_step = step;
  if (target_.target > 0 && r.auc >= target_.target && !target_.reached) {
    target_.reached = true;
    target_.step = step;
    target_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    log_.info("target AUC {} reached at step {} after {} ({:.1f}s): AUC {:.6f}", target_.target, step,
              format_duration(target_.seconds), target_.seconds, r.auc);
    metrics_.write({{"type", "target"}, {"reached", true}, {"target_auc", target_.target}, {"step", step},
                    {"auc", r.auc}, {"elapsed_s", target_.seconds}});
  }
  return r;
}

bool TrainEvals::after_step(std::int64_t step) {
  const std::int64_t in_epoch = (step - 1) % steps_per_epoch_ + 1;  // 1 .. steps_per_epoch
  const bool due = interval_ > 0 && (per_epoch_ ? in_epoch % interval_ == 0 || in_epoch == steps_per_epoch_
                                                : step % interval_ == 0);
  if (due && step < total_steps_) {
    evaluate(step);
    if (target_.reached) return true;
  }
  if (in_epoch == steps_per_epoch_ && step < total_steps_) {
    mllog_.end("epoch_stop", {{"epoch_num", step / steps_per_epoch_ - 1}});
    mllog_.start("epoch_start", {{"epoch_num", step / steps_per_epoch_}});
  }
  return false;
}

void TrainEvals::finish(std::int64_t step, bool stopped, TrainResult& result) {
  if (target_.reached)
    result.eval = last_;
  else if (!stopped && !spec_.data.eval.empty())
    result.eval = evaluate(step);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (target_.target > 0 && !target_.reached) {
    if (target_.best_step >= 0)
      log_.info("target AUC {} not reached in {} steps: best AUC {:.6f} at step {}", target_.target, step,
                target_.best_auc, target_.best_step);
    else
      log_.info("target AUC {} not reached in {} steps: no evaluation", target_.target, step);
    nlohmann::json record = {{"type", "target"}, {"reached", false}, {"target_auc", target_.target},
                             {"step", step}, {"elapsed_s", seconds}};
    if (target_.best_step >= 0) record["best_auc"] = target_.best_auc, record["best_step"] = target_.best_step;
    metrics_.write(record);
  }
  if (target_.target > 0) result.target = target_;
  const double epoch = epoch_of(step);
  mllog_.end("epoch_stop", {{"epoch_num", (step - 1) / steps_per_epoch_}});
  mllog_.end("run_stop", {{"status", target_.reached ? "success" : "aborted"}, {"epoch_num", epoch}});
}

}  // namespace recmix::runtime
