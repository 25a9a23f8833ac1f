#include "runtime/train/trainer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string_view>
#include <utility>

#include "comm/device_communicator.hpp"
#include "core/error.hpp"
#include "data/h5.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_write.hpp"
#include "runtime/train/device_metrics.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/input_checks.hpp"
#include "runtime/train/metrics.hpp"
#include "runtime/train/mllog.hpp"
#include "runtime/train/checkpoint_schedule.hpp"
#include "runtime/train/step_batches.hpp"
#include "runtime/train/train_evals.hpp"
#include "runtime/train/train_log.hpp"

namespace recmix::runtime {
namespace fs = std::filesystem;
namespace {


template <class T>
std::vector<T> gather_to_root(comm::Communicator& comm, const std::vector<T>& local) {
  const int p = comm.size();
  std::int64_t n = static_cast<std::int64_t>(local.size());
  std::vector<std::int64_t> counts(p);
  comm.all_gather(&n, counts.data(), 1, comm::DataType::i64);
  std::vector<std::size_t> send_counts(p, 0), send_displs(p, 0), recv_counts(p, 0), recv_displs(p, 0);
  send_counts[0] = local.size();
  std::size_t total = 0;
  if (comm.rank() == 0)
    for (int r = 0; r < p; ++r) {
      recv_counts[r] = counts[r];
      recv_displs[r] = total;
      total += counts[r];
    }
  std::vector<T> all(total);
  comm.all_to_all_v(local.data(), send_counts, send_displs, all.data(), recv_counts, recv_displs,
                    comm::data_type_of<T>());
  return all;
}

// Per-row access counts summed over the dataset's files (/access_counts/<t>, written by the
// converter and the generator); empty for a table when any file lacks them.
std::vector<std::vector<std::int64_t>> read_access_counts(const std::vector<std::string>& files,
                                                          const std::vector<std::int64_t>& table_rows) {
  std::vector<std::vector<std::int64_t>> counts(table_rows.size());
  std::vector<bool> complete(table_rows.size(), true);
  for (const auto& path : files) {
    const data::DatasetInfo info = data::open_file_info(path);
    auto file = h5::open_file(path);
    for (std::size_t t = 0; t < table_rows.size(); ++t) {
      std::string name = fmt::format("access_counts/{}", t);
      if (!complete[t]) continue;
      if (!h5::exists(file, name)) {
        complete[t] = false;
        continue;
      }
      // Each file's counts sum to at most its indices, so the sums over files stay in range.
      auto c = data::read_access_counts(path, info, static_cast<int>(t));  // one count per table row
      if (counts[t].empty()) counts[t].assign(c.size(), 0);
      for (std::size_t i = 0; i < c.size(); ++i) counts[t][i] += c[i];
    }
  }
  for (std::size_t t = 0; t < table_rows.size(); ++t)
    if (!complete[t]) counts[t].clear();
  return counts;
}

// The training data's reader: this rank's share of each global batch, one-hot indices packed.
data::ReaderOptions reader_options(const JobSpec& spec, const comm::Communicator& comm) {
  data::ReaderOptions ro;
  ro.global_batch = spec.train.batch_size;
  ro.rank = comm.rank();
  ro.world = comm.size();
  ro.shuffle = spec.data.shuffle;
  ro.seed = spec.seed;
  ro.shuffle_window = spec.data.shuffle_window;
  ro.prefetch = spec.data.prefetch;
  ro.drop_last = true;
  ro.packed_one_hot = true;
  return ro;
}

}  // namespace

Trainer::Trainer(JobSpec spec, comm::Communicator& comm, std::optional<DatasetShape> shape)
    : init_ms_(mllog_now_ms()), spec_(std::move(spec)), comm_(comm) {
  // The data's shape, and every check that needs no allocation, before anything is allocated.
  const bool from_checkpoint = shape.has_value();
  std::int64_t bag_rows = 1;  // the longest bag of the data (sizes the step's index buffers and tiers' staging)
  std::optional<data::DatasetInfo> train_info;
  std::vector<std::int64_t> init_rows;  // the tables' initial bounds, where the dataset gives them
  if (!shape) {
    train_info = data::open_dataset_info(spec_.data.train);
    shape = DatasetShape{train_info->table_rows, train_info->num_dense};
    bag_rows = std::max<std::int64_t>(1, train_info->max_bag_rows());
    init_rows = train_info->init_rows;
  }
  num_dense_ = shape->num_dense;
  table_rows_ = shape->table_rows;
  if (!spec_.model.table_rows.empty() && spec_.model.table_rows != table_rows_)
    throw ConfigError(fmt::format(
        "'model.tables' [{}] ({} tables) disagrees with the dataset '{}' [{}] ({} tables): remove the key to take the "
        "sizes from the data",
        fmt::join(spec_.model.table_rows, ", "), spec_.model.table_rows.size(), spec_.data.train.front(),
        fmt::join(table_rows_, ", "), table_rows_.size()));
  if (table_rows_.empty()) throw DataError(fmt::format("dataset '{}' has no categorical features", spec_.data.train.front()));
  if (spec_.train.batch_size < comm_.size())
    throw ConfigError(fmt::format("'train.batch_size' = {} is smaller than the number of ranks ({})",
                                  spec_.train.batch_size, comm_.size()));
  if (train_info) check_inputs(spec_, table_rows_, num_dense_, train_info->rows);

  const auto kind = spec_.device.kind;
  if (spec_.device.gemm == device::CpuGemm::onednn && !device::onednn_compiled())
    throw ConfigError("device.gemm = \"onednn\", but this build has no oneDNN (install libdnnl-dev and rebuild, "
                      "or use \"auto\" or \"openblas\")");
  // On CUDA the NCCL communicator comes first (comm/device_communicator.hpp).
  auto early_device_comm = comm::device_communicator_before_backend(comm_, kind);
  backend_ = device::make_backend(kind, spec_.device.threads, spec_.device.gemm);
  backend_->set_stream_priority(spec_.device.priority);  // before any stream is made
  device_pool_ = std::make_unique<device::MemoryPool>(*backend_, device::Tier::device, spec_.name,
                                                      spec_.device.memory_capacity);
  backend_->set_device_memory_share(spec_.device.memory_capacity);
  host_pool_ = std::make_unique<device::MemoryPool>(*backend_, device::Tier::host, spec_.name,
                                                    spec_.device.host_memory_capacity);
  // Co-located by recmix run (device.shared): device collectives of several jobs on one device
  // never interleave.
  device_comm_ = comm::device_communicator(comm_, *backend_, std::move(early_device_comm), spec_.device.shared);

  std::vector<embedding::TableSpec> tables;
  for (std::size_t t = 0; t < table_rows_.size(); ++t)
    tables.push_back({table_rows_[t], spec_.model.embedding_dim, t < init_rows.size() ? init_rows[t] : 0});
  // The automatic plan balances expected traffic by the dataset's access counts when it has them
  // (not when the shape comes from a checkpoint: evaluation places tables by size alone).
  std::vector<std::vector<std::int64_t>> access_counts;
  const EmbeddingSpec& es = spec_.embedding;
  const bool tier_counts = es.tiered() && es.hot_set == embedding::HotSet::counts && !from_checkpoint;
  if ((spec_.sharding == "auto" && !from_checkpoint && comm_.size() > 1) || tier_counts)
    access_counts = read_access_counts(spec_.data.train, table_rows_);
  plan_ = std::make_unique<embedding::ShardingPlan>(
      spec_.sharding == "auto" ? embedding::ShardingPlan::automatic(tables, comm_.size(), access_counts)
                               : embedding::ShardingPlan::parse(spec_.sharding, tables, comm_.size()));
  const std::int64_t max_local = (spec_.train.batch_size + comm_.size() - 1) / comm_.size();
  embedding::TierOptions tiers;
  if (es.tiered()) {
    tiers.hot_fraction = es.hot_fraction;
    tiers.device_budget = es.device_budget;
    tiers.hot_set = es.hot_set;
    tiers.rerank_interval = es.rerank_interval > 0 ? es.rerank_interval : es.hot_set == embedding::HotSet::lfu ? 100 : 0;
    tiers.cold_update = es.cold_update;
    tiers.global_batch = spec_.train.batch_size;
    tiers.bag_rows = bag_rows;  // multi-hot data without a max_bag attribute: grown on the first long step
    if (tier_counts) tiers.table_counts = access_counts;
    tiers.host_pool = host_pool_.get();
  }
  model_ = std::make_unique<DlrmModel>(spec_, tables, num_dense_, comm_, device_comm_ ? *device_comm_ : comm_,
                                       *backend_, *device_pool_, max_local, *plan_, std::move(tiers), bag_rows);
}

Trainer::~Trainer() = default;

// The step a run starts at: 0, or the one of the checkpoint options.resume names ("latest" and
// "auto": the newest that loads on every rank, saying which were skipped and why; without any,
// "latest" is an error and "auto" starts at step 0), with the reader moved to its position.
std::int64_t Trainer::resume(const TrainOptions& options, data::Reader& reader, spdlog::logger& log) {
  std::int64_t step = 0;
  const bool latest = options.resume == "latest" || options.resume == "auto";
  std::string resumed_from;
  if (latest) {
    const auto all = checkpoints();
    std::string newest_error;
    for (auto it = all.rbegin(); it != all.rend() && resumed_from.empty(); ++it) {
      std::string why;
      try {
        step = load(*it);
      } catch (const std::exception& e) {
        why = e.what();
      }
      std::int32_t failed = why.empty() ? 0 : 1;  // every rank moves on together
      comm_.all_reduce_sum(&failed, &failed, 1, comm::DataType::i32);
      if (failed == 0) {
        resumed_from = *it;
        break;
      }
      if (newest_error.empty()) newest_error = why.empty() ? "another rank could not load it" : why;
      log.warn("not resuming from {}: {}", *it, why.empty() ? "another rank could not load it" : why);
    }
    if (resumed_from.empty()) step = 0;  // a load that failed on another rank may have set it
    if (resumed_from.empty() && !all.empty())
      throw IoError(fmt::format("--resume: none of the {} checkpoint(s) in '{}' loads (the newest: {})", all.size(),
                                spec_.checkpoint.dir, newest_error));
    if (all.empty() && options.resume == "latest")
      throw IoError(fmt::format("--resume: no checkpoint in '{}'", spec_.checkpoint.dir));
    if (all.empty()) log.info("no checkpoint in '{}' to resume from: starting at step 0", spec_.checkpoint.dir);
  } else if (!options.resume.empty()) {
    step = load(options.resume);
    resumed_from = options.resume;
  }
  resumed_from_ = resumed_from;
  if (!resumed_from.empty()) {
    check_resume_settings(resumed_from, options.allow_changes, log);
    check_resume_step(resumed_from, step, reader.batches_per_epoch(), options.allow_changes);
    reader.seek(resume_position_);
    log.info("resumed from {} at step {} (epoch {}, batch {})", resumed_from, step, resume_position_.epoch,
              resume_position_.batch);
  }
  return step;
}

void Trainer::inject_nan() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto shards = model_->embedding().local_shards();
  if (shards.empty()) return;
  if (shards.back().host_memory || backend_->host_accessible(device::Tier::device)) {
    shards.back().weights[0] = nan;
    model_->embedding().shards_written();  // 16-bit tables: rounded back (a NaN stays one)
  } else {
    auto s = backend_->create_stream();
    backend_->copy(shards.back().weights, &nan, sizeof(float), *s);
    s->synchronize();
  }
}

// What train() keeps between log records: the loss summed on the device since the last one, the
// step and device counters at the last one, and the tiers' statistics over the run.
struct Trainer::Progress {
  Progress(device::DeviceCounts counts, std::int64_t step) : counts_at_log(counts), loss_from(step + 1) {}
  Clock::time_point start = Clock::now(), last_log = start;
  std::int64_t steps_since_log = 0, steps_this_run = 0;
  device::DeviceCounts counts_at_log;  // device_per_step's start
  double loss = 0;                     // the mean loss over the last log interval (DlrmModel::take_loss)
  std::int64_t loss_from;              // the first step of the interval being summed
  embedding::TierStats tier_total;
};

// The loss stays on the device until a log record: every rank reads it at the same steps.
void Trainer::read_loss(Progress& p, std::int64_t step) {
  p.loss = model_->take_loss();
  if (!std::isfinite(p.loss))
    throw DivergedError(fmt::format("training diverged: the loss is {} over steps {}-{} (learning rate {} too high?)",
                                    p.loss, p.loss_from, step, spec_.optimizer.lr));
  p.loss_from = step + 1;
}

// Rank 0's log line and metrics record at `step`.
void Trainer::log_progress(Progress& p, std::int64_t step, std::int64_t total_steps, Clock::time_point now,
                           MetricsWriter& metrics, spdlog::logger& log) {
  // A ReLU maps NaN to 0, so the loss can stay finite while the weights are not: the dense
  // parameters (the same on every rank) are checked at each log line; everything a rank
  // holds is checked before each checkpoint (save_checkpoint).
  if (const std::string bad = model_->dense_finite() ? std::string() : first_non_finite(*model_, true); !bad.empty())
    throw DivergedError(fmt::format("training diverged: at step {} {} (learning rate {} too high?)", step, bad,
                                    spec_.optimizer.lr));
  const double since = std::chrono::duration<double>(now - p.last_log).count();
  const double elapsed = std::chrono::duration<double>(now - p.start).count();
  const double rate = p.steps_since_log * spec_.train.batch_size / std::max(since, 1e-9);
  const double eta = (total_steps - step) * (elapsed / p.steps_this_run);
  log.info("step {}/{} ({:.0f}%)  epoch {}  loss {:.5f}  {:.0f} samples/s  ETA {}", step, total_steps,
           100.0 * step / total_steps, resume_position_.epoch, p.loss, rate, format_duration(eta));
  const device::DeviceCounts counts = backend_->counters().snapshot();
  nlohmann::json record = {{"type", "train"}, {"step", step}, {"epoch", resume_position_.epoch}, {"loss", p.loss},
                           {"samples_per_s", rate}, {"elapsed_s", elapsed},
                           {"device_peak_bytes", device_pool_->peak_bytes()},
                           {"device_per_step", device_per_step(counts - p.counts_at_log, p.steps_since_log)}};
  p.counts_at_log = counts;
  if (model_->embedding().tiered()) {
    const embedding::TierStats t = model_->embedding().take_tier_stats();
    p.tier_total.add(t);
    add_tier_metrics(record, t);
    log.info("  tiers (rank 0's shards): hot hit rate {:.1f}%, {:.0f} cold rows staged per step, {} to the "
             "device and {} to the host per step, staging {:.2f} ms per step{}",
             100.0 * record["hot_hit_rate"].get<double>(), record["cold_rows_per_step"].get<double>(),
             device::format_bytes(record["bytes_to_device_per_step"].get<std::size_t>()),
             device::format_bytes(record["bytes_to_host_per_step"].get<std::size_t>()),
             1e3 * record["staging_s_per_step"].get<double>(),
             t.reranks > 0 ? fmt::format(", {} re-rank(s) moved {} rows", t.reranks, t.rows_promoted + t.rows_demoted)
                           : std::string());
  }
  metrics.write(record);
  p.last_log = now;
  p.steps_since_log = 0;
}

// The faults a test injected (TrainOptions::faults): the one inside a step throws from the
// model's phase hook; the others act right after their step (after_step_faults).
void Trainer::arm_faults(const TrainFaults& faults) {
  faults_ = faults;
  fault_armed_ = false;
  if (faults_.where == TrainFaults::Where::mid && faults_.any())
    model_->set_phase_hook([this](DlrmModel::Phase) {
      if (!fault_armed_) return;
      fault_armed_ = false;
      throw Error(fmt::format("fault injected inside step {} (RECMIX_FAULT_INJECTION)", faults_.step));
    });
}

void Trainer::after_step_faults(std::int64_t step, const TrainOptions& options) {
  using Where = TrainFaults::Where;
  if (faults_.step_delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(faults_.step_delay_s));
  if (faults_.at(Where::after, step))
    throw Error(fmt::format("fault injected after step {} (RECMIX_FAULT_INJECTION)", step));
  if (faults_.at(Where::nan, step)) inject_nan();
  if (faults_.at(Where::stall, step) && options.stop_requested)
    while (!options.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TrainResult Trainer::train(const TrainOptions& options) {
  const int rank = comm_.rank();
  if (rank == 0) {
    fs::create_directories(spec_.run_dir);
    fs::create_directories(spec_.checkpoint.dir);
  }
  comm_.barrier();
  auto log = make_logger(spec_, rank, options.quiet);
  arm_faults(options.faults);
  data::Reader reader(spec_.data.train, reader_options(spec_, comm_));
  if (reader.batches_per_epoch() == 0)
    throw DataError(fmt::format("'{}' holds {} rows, fewer than one global batch of {}", spec_.data.train.front(),
                                reader.info().rows, spec_.train.batch_size));
  const std::int64_t total_steps =
      runtime::total_steps(spec_, reader.batches_per_epoch());

  // A write that never finished (the process was killed in it) leaves a temporary file behind.
  if (rank == 0) remove_unfinished_checkpoints(*log);
  std::int64_t step = resume(options, reader, *log);
  if (!resumed_from_.empty() && no_step_left(spec_, step, reader.batches_per_epoch())) {
    // Nothing to train: no checkpoint, metrics record or evaluation is written.
    log->info("{} is at step {}: the target of {} steps is already reached, nothing to do", resumed_from_, step,
              total_steps);
    TrainResult done;
    done.steps = step;
    done.last_checkpoint = resumed_from_;
    done.already_reached = true;
    return done;
  }
  log_job(*log, reader, total_steps);
  MetricsWriter metrics(spec_.run_dir, rank == 0);
  Progress p(backend_->counters().snapshot(), step);
  CheckpointSchedule checkpoints(*this, options, *log, step);
  MlLog mllog(spec_.run_dir, spec_.train.mllog && rank == 0);
  mllog.open_run(spec_, comm_.size(), init_ms_);
  TrainEvals evals(*this, *log, metrics, mllog, reader.batches_per_epoch(), total_steps, step);

  // Tiered tables look one batch ahead: the next batch is read before this step trains, and the
  // position a checkpoint saves is taken before that read.
  StepBatches batches(reader, comm_, model_->embedding().tiered(), options.stop_requested, spec_.name);
  data::Batch batch;
  bool stopped_early = false;
  auto step_start = Clock::now();
  while (step < total_steps) {
    const StepBatches::Got got = batches.next(batch, step, total_steps);
    if (got == StepBatches::Got::stop) {
      stopped_early = true;
      break;
    }
    if (got == StepBatches::Got::epoch_end) continue;
    fault_armed_ = faults_.at(TrainFaults::Where::mid, step + 1);
    // A run's last step (as every rank knows) is read alone: result.last_loss is its loss, equal
    // bit for bit whether or not the run was stopped and resumed on the way.
    const bool last_step = step + 1 == total_steps || (options.stop_after > 0 && p.steps_this_run + 1 >= options.stop_after);
    if (last_step && p.loss_from <= step) read_loss(p, step);
    backend_->counters().set_step(step);
    model_->train_step_async(batch, spec_.train.batch_size, batches.ahead());
    ++step;
    ++p.steps_this_run;
    ++p.steps_since_log;
    resume_position_ = batches.after_batch();
    after_step_faults(step, options);
    const auto now = Clock::now();
    // Rank 0's clock decides; the other ranks learn it from a host collective that waits on no device.
    const std::int64_t log_steps = spec_.train.log_interval;
    std::int32_t log_now = rank == 0 && (std::chrono::duration<double>(now - p.last_log).count() >= spec_.train.log_interval_s ||
                                         step == total_steps || (log_steps > 0 && step % log_steps == 0));
    if (comm_.size() > 1) comm_.all_reduce_sum(&log_now, &log_now, 1, comm::DataType::i32);
    if (log_now) read_loss(p, step);
    if (options.on_step) {
      StepSample sample;
      sample.step = step;
      sample.total_steps = total_steps;
      sample.step_s = std::chrono::duration<double>(now - step_start).count();
      sample.data_wait_s = std::chrono::duration<double>(batches.ready() - step_start).count();
      sample.loss = p.loss;
      sample.pool_current_bytes = device_pool_->current_bytes();
      sample.pool_peak_bytes = device_pool_->peak_bytes();
      options.on_step(sample);
    }
    if (rank == 0 && log_now) log_progress(p, step, total_steps, now, metrics, *log);
    if (spec_.checkpoint.interval > 0 && step % spec_.checkpoint.interval == 0 && step < total_steps)
      checkpoints.write(step, false);
    const bool target_reached = evals.after_step(step);  // evaluates when due
    if (target_reached) break;
    step_start = Clock::now();  // checkpoints and evaluations are not part of the next step
    if (options.stop_after > 0 && p.steps_this_run >= options.stop_after && step < total_steps) {
      stopped_early = true;
      break;
    }
  }

  TrainResult result;
  const double seconds = std::chrono::duration<double>(Clock::now() - p.start).count();
  result.steps = step;
  if (p.loss_from <= step) read_loss(p, step);  // steps after the last record (an early stop): every rank is here
  result.last_loss = p.loss;
  result.samples_per_second = p.steps_this_run * spec_.train.batch_size / std::max(seconds, 1e-9);
  result.stopped = stopped_early;
  checkpoints.write(step, true);
  result.last_checkpoint = checkpoints.last();
  evals.finish(step, stopped_early, result);
  if (model_->embedding().tiered() && rank == 0) {
    p.tier_total.add(model_->embedding().take_tier_stats());
    nlohmann::json t;
    add_tier_metrics(t, p.tier_total);
    result.hot_hit_rate = t.value("hot_hit_rate", 0.0);
    log->info("tiers over the run (rank 0's shards): hot hit rate {:.1f}%, {} rows staged, {} rows written back, {} "
              "re-rank(s)", 100.0 * result.hot_hit_rate, p.tier_total.rows_staged, p.tier_total.rows_written_back,
              p.tier_total.reranks);
  }
  log->info("{} after {} steps in {}: {:.0f} samples/s, peak device memory {}",
            stopped_early ? "stopped" : result.target && result.target->reached ? "target reached" : "done", step, format_duration(seconds), result.samples_per_second,
            device::format_bytes(device_pool_->peak_bytes()));
  return result;
}

EvalResult Trainer::evaluate(const std::vector<std::string>& files, std::int64_t max_batches) {
  data::ReaderOptions ro;
  ro.global_batch = spec_.train.batch_size;
  ro.rank = comm_.rank();
  ro.world = comm_.size();
  ro.prefetch = spec_.data.prefetch;
  ro.drop_last = false;
  ro.packed_one_hot = true;
  for (const auto& file : files) check_file_shape("eval", data::open_file_info(file), table_rows_, num_dense_);
  data::Reader reader(files, ro);
  std::vector<float> probs, labels;
  data::Batch batch;
  std::vector<float> buf;
  for (std::int64_t n = 0; (max_batches == 0 || n < max_batches) && reader.next(batch); ++n) {
    buf.resize(batch.size);
    model_->predict(batch, buf.data());
    probs.insert(probs.end(), buf.begin(), buf.end());
    labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
  }
  auto all_probs = gather_to_root(comm_, probs);
  auto all_labels = gather_to_root(comm_, labels);
  double out[3] = {0, 0, 0};
  if (comm_.rank() == 0) {
    out[0] = roc_auc(all_probs, all_labels);
    out[1] = log_loss(all_probs, all_labels);
    out[2] = static_cast<double>(all_probs.size());
  }
  comm_.broadcast(out, 3, comm::DataType::f64, 0);
  return {out[0], out[1], static_cast<std::int64_t>(out[2])};
}

}  // namespace recmix::runtime
