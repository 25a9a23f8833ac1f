// The trainer's checkpoint files: their names, listing, pruning and clean-up, their metadata,
// and saving, loading and the checks before resuming from one.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::runtime {
namespace fs = std::filesystem;

std::string Trainer::checkpoint_path(std::int64_t step) const {
  return (fs::path(spec_.checkpoint.dir) / fmt::format("ckpt-{:09}.h5", step)).string();
}

// The job's checkpoints (ckpt-<step>.h5, step zero-padded), oldest first.
std::vector<std::string> Trainer::checkpoints() const {
  std::vector<std::string> all;
  if (!fs::exists(spec_.checkpoint.dir)) return all;
  static const std::regex pattern("ckpt-[0-9]+\\.h5");
  for (auto& e : fs::directory_iterator(spec_.checkpoint.dir))
    if (std::regex_match(e.path().filename().string(), pattern)) all.push_back(e.path().string());
  std::sort(all.begin(), all.end());
  return all;
}

std::string Trainer::latest_checkpoint() const {
  auto all = checkpoints();
  return all.empty() ? std::string() : all.back();
}

void Trainer::remove_unfinished_checkpoints(spdlog::logger& log) const {
  if (!fs::exists(spec_.checkpoint.dir)) return;
  static const std::regex pattern("ckpt-[0-9]+\\.h5\\.tmp");
  for (auto& e : fs::directory_iterator(spec_.checkpoint.dir)) {
    if (!e.is_regular_file() || !std::regex_match(e.path().filename().string(), pattern)) continue;
    std::error_code ec;
    const auto bytes = e.file_size(ec);
    fs::remove(e.path(), ec);
    if (ec)
      log.warn("could not remove the unfinished checkpoint {}: {}", e.path().string(), ec.message());
    else
      log.warn("removed the unfinished checkpoint {} ({}), left by a write that never completed", e.path().string(),
               device::format_bytes(bytes));
  }
}

void Trainer::prune_checkpoints() const {
  auto all = checkpoints();
  for (std::size_t i = 0; i + spec_.checkpoint.keep < all.size(); ++i) fs::remove(all[i]);
}

CheckpointMeta Trainer::checkpoint_meta(std::int64_t step) const {
  CheckpointMeta meta;
  meta.step = step;
  meta.position = resume_position_;
  meta.seed = spec_.seed;
  meta.world_size = comm_.size();
  meta.job_spec = spec_.source_text;
  meta.table_rows = table_rows_;
  meta.num_dense = num_dense_;
  return meta;
}

void Trainer::inject_checkpoint_fault(std::int64_t step) const {
  if (faults_.at(TrainFaults::Where::checkpoint, step))
    throw IoError(fmt::format("fault injected in the checkpoint write of step {} (RECMIX_FAULT_INJECTION)", step));
}

void Trainer::save(const std::string& path, std::int64_t step) {
  inject_checkpoint_fault(step);
  save_checkpoint(path, *model_, checkpoint_meta(step), comm_);
}

// Resuming with another seed or global batch size is not the same run continued: the data
// order and the position in it change. Refused unless allowed, and then logged.
void Trainer::check_resume_settings(const std::string& path, bool allowed, spdlog::logger& log) const {
  const CheckpointMeta meta = read_checkpoint_meta(path);
  std::vector<std::string> changes;
  if (meta.seed != spec_.seed) changes.push_back(fmt::format("seed {} (this job: {})", meta.seed, spec_.seed));
  try {
    const JobSpec saved = parse_job_spec(meta.job_spec, path + " (job spec)");
    if (saved.train.batch_size != spec_.train.batch_size)
      changes.push_back(fmt::format("global batch {} (this job: {})", saved.train.batch_size, spec_.train.batch_size));
  } catch (const Error& e) {
    log.warn("{}: its job spec cannot be read back ({}); the batch size is not compared", path, e.what());
  }
  if (changes.empty()) return;
  const std::string what = fmt::format("{} was saved with {}", path, fmt::format("{}", fmt::join(changes, ", ")));
  if (!allowed)
    throw ConfigError(what + ": resuming would not continue that run (the data order and position change); resume "
                             "with --allow-changes to do it anyway, or start afresh");
  log.warn("{}: resuming anyway (--allow-changes)", what);
}

// A step taken as found could report steps never trained and name checkpoints after them: it
// must lie in the epoch of the checkpoint's data position (steps epoch x batches per epoch ..
// (epoch + 1) x batches per epoch; unless --allow-changes let the batch size change, which
// changes the batches per epoch), and within the epochs the job trains for.
void Trainer::check_resume_step(const std::string& path, std::int64_t step, std::int64_t batches_per_epoch,
                                bool settings_changed) const {
  const data::ReaderPosition& at = resume_position_;
  std::int64_t first = 0, last = 0;
  const bool epoch_in_range = !__builtin_mul_overflow(at.epoch, batches_per_epoch, &first) &&
                              !__builtin_add_overflow(first, batches_per_epoch, &last);
  if (!settings_changed && (!epoch_in_range || step < first || step > last))
    throw DataError(fmt::format("checkpoint {}: its step {} lies outside the epoch of the data position it saved (epoch "
                                "{}, batch {}; at {} batches per epoch of {}, steps {}..{}): the checkpoint is damaged "
                                "or not of this data",
                                path, step, at.epoch, at.batch, batches_per_epoch, fmt::join(spec_.data.train, ", "),
                                epoch_in_range ? std::to_string(first) : std::string("?"),
                                epoch_in_range ? std::to_string(last) : std::string("?")));
  std::int64_t epoch_steps = 0;
  if (spec_.train.steps == 0 && !__builtin_mul_overflow(spec_.train.epochs, batches_per_epoch, &epoch_steps) &&
      step > epoch_steps)
    throw DataError(fmt::format("checkpoint {}: its step {} lies beyond the {} epoch(s) of {} steps this job trains for",
                                path, step, spec_.train.epochs, batches_per_epoch));
}

std::int64_t Trainer::load(const std::string& path) {
  auto meta = read_checkpoint_meta(path);
  if (meta.num_dense != num_dense_)
    throw DataError(fmt::format("{}: checkpoint has {} dense features, the dataset {}", path, meta.num_dense, num_dense_));
  load_checkpoint(path, *model_);
  resume_position_ = meta.position;
  return meta.step;
}

}  // namespace recmix::runtime
