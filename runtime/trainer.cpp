#include "runtime/trainer.hpp"

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
#include "runtime/checkpoint.hpp"
#include "runtime/checkpoint_write.hpp"
#include "runtime/device_metrics.hpp"
#include "runtime/dlrm_model.hpp"
#include "runtime/metrics.hpp"
#include "runtime/train_log.hpp"

namespace recmix::runtime {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

Trainer::Trainer(JobSpec spec, comm::Communicator& comm, std::optional<DatasetShape> shape)
    : spec_(std::move(spec)), comm_(comm) {
  const auto kind = device::parse_backend_kind(spec_.device.kind);
  if (spec_.device.gemm == "onednn" && !device::onednn_compiled())
    throw ConfigError("device.gemm = \"onednn\", but this build has no oneDNN (install libdnnl-dev and rebuild, "
                      "or use \"auto\" or \"openblas\")");
  // On CUDA the NCCL communicator comes first (comm/device_communicator.hpp).
  auto early_device_comm = comm::device_communicator_before_backend(comm_, kind);
  backend_ = device::make_backend(kind, spec_.device.threads, device::parse_cpu_gemm(spec_.device.gemm));
  backend_->set_stream_priority(spec_.device.priority);  // before any stream is made
  device_pool_ = std::make_unique<device::MemoryPool>(*backend_, device::Tier::device, spec_.name,
                                                      spec_.device.memory_capacity);
  backend_->set_device_memory_share(spec_.device.memory_capacity);
  host_pool_ = std::make_unique<device::MemoryPool>(*backend_, device::Tier::host, spec_.name,
                                                    spec_.device.host_memory_capacity);
  // Co-located by recmix run (device.shared): device collectives of several jobs on one device
  // never interleave.
  device_comm_ = comm::device_communicator(comm_, *backend_, std::move(early_device_comm), spec_.device.shared);

  const bool from_checkpoint = shape.has_value();
  std::int64_t bag_rows = 1;  // the longest bag of the data (sizes the staging slots of tiered tables)
  if (!shape) {
    auto info = data::open_dataset_info(spec_.data.train);
    shape = DatasetShape{info.table_rows, info.num_dense};
    bag_rows = std::max<std::int64_t>(1, info.max_bag_rows());
  }
  num_dense_ = shape->num_dense;
  table_rows_ = shape->table_rows;
  if (!spec_.model.table_rows.empty() && spec_.model.table_rows != table_rows_)
    throw ConfigError(fmt::format(
        "'model.tables' ({} tables) disagrees with the dataset '{}' ({} tables of {} rows): remove the key to "
        "take the sizes from the data",
        spec_.model.table_rows.size(), spec_.data.train.front(), table_rows_.size(), fmt::join(table_rows_, ", ")));
  if (table_rows_.empty()) throw DataError(fmt::format("dataset '{}' has no categorical features", spec_.data.train.front()));
  if (spec_.train.batch_size < comm_.size())
    throw ConfigError(fmt::format("'train.batch_size' = {} is smaller than the number of ranks ({})",
                                  spec_.train.batch_size, comm_.size()));

  std::vector<embedding::TableSpec> tables;
  for (auto rows : table_rows_) tables.push_back({rows, spec_.model.embedding_dim});
  // The automatic plan balances expected traffic by the dataset's access counts when it has them
  // (not when the shape comes from a checkpoint: evaluation places tables by size alone).
  std::vector<std::vector<std::int64_t>> access_counts;
  const EmbeddingSpec& es = spec_.embedding;
  const bool tier_counts = es.tiered() && es.hot_set == "counts" && !from_checkpoint;
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
    tiers.hot_set = es.hot_set == "lfu" ? embedding::HotSet::lfu : embedding::HotSet::counts;
    tiers.rerank_interval = es.rerank_interval > 0 ? es.rerank_interval : es.hot_set == "lfu" ? 100 : 0;
    tiers.cold_update = es.cold_update == "host" ? embedding::ColdUpdate::host : embedding::ColdUpdate::device;
    tiers.global_batch = spec_.train.batch_size;
    tiers.bag_rows = bag_rows;  // multi-hot data without a max_bag attribute: grown on the first long step
    if (tier_counts) tiers.table_counts = access_counts;
    tiers.host_pool = host_pool_.get();
  }
  model_ = std::make_unique<DlrmModel>(spec_, table_rows_, num_dense_, comm_, device_comm_ ? *device_comm_ : comm_,
                                       *backend_, *device_pool_, max_local, *plan_, std::move(tiers));
  // For tests of failure handling: RECMIX_FAULT_INJECTION="<job>:<step>:<rank>[:<where>]" makes
  // that rank of that job throw at that step, as a crash would: `after` (the default) right after
  // the step, between two steps' collectives; `mid` inside the step, after its forward exchange
  // and before its backward collectives; `checkpoint` in that step's checkpoint write, before the
  // file is opened (which its peers then wait for inside parallel HDF5); `nan` puts a NaN in the
  // first row of the rank's last embedding shard after that step (a divergence the loss need not show);
  // `stall` holds that rank after that step until a stop is requested (a signal), so that a test's
  // signal always finds the run unfinished, however fast the machine.
  if (const char* fault = std::getenv("RECMIX_FAULT_INJECTION")) {
    std::string text(fault);
    using namespace std::string_view_literals;
    for (const auto& [suffix, where] : {std::pair{":mid"sv, FaultWhere::mid},
                                        std::pair{":checkpoint"sv, FaultWhere::checkpoint},
                                        std::pair{":nan"sv, FaultWhere::nan},
                                        std::pair{":stall"sv, FaultWhere::stall},
                                        std::pair{":after"sv, FaultWhere::after}})
      if (text.size() > suffix.size() && text.ends_with(suffix)) {
        fault_where_ = where;
        text.resize(text.size() - suffix.size());
        break;
      }
    const auto a = text.rfind(':'), b = a == std::string::npos ? a : text.rfind(':', a - 1);
    if (b != std::string::npos && text.substr(0, b) == spec_.name &&
        std::atoi(text.c_str() + a + 1) == comm_.rank())
      fault_step_ = std::atoll(text.c_str() + b + 1);
  }
  if (fault_step_ > 0 && fault_where_ == FaultWhere::mid)
    model_->set_phase_hook([this](DlrmModel::Phase) {
      if (!fault_armed_) return;
      fault_armed_ = false;
      throw Error(fmt::format("fault injected inside step {} (RECMIX_FAULT_INJECTION)", fault_step_));
    });
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
  if (!resumed_from.empty()) {
    check_resume_settings(resumed_from, options.allow_changes, log);
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

TrainResult Trainer::train(const TrainOptions& options) {
  const int rank = comm_.rank();
  if (rank == 0) {
    fs::create_directories(spec_.run_dir);
    fs::create_directories(spec_.checkpoint.dir);
  }
  comm_.barrier();
  auto log = make_logger(spec_, rank, options.quiet);
  MetricsWriter metrics(spec_.run_dir, rank == 0);

  data::ReaderOptions ro;
  ro.global_batch = spec_.train.batch_size;
  ro.rank = rank;
  ro.world = comm_.size();
  ro.shuffle = spec_.data.shuffle;
  ro.seed = spec_.seed;
  ro.shuffle_window = spec_.data.shuffle_window;
  ro.prefetch = spec_.data.prefetch;
  ro.drop_last = true;
  ro.packed_one_hot = true;
  data::Reader reader(spec_.data.train, ro);
  if (reader.batches_per_epoch() == 0)
    throw DataError(fmt::format("'{}' holds {} rows, fewer than one global batch of {}", spec_.data.train.front(),
                                reader.info().rows, spec_.train.batch_size));
  const std::int64_t total_steps =
      spec_.train.steps > 0 ? spec_.train.steps : spec_.train.epochs * reader.batches_per_epoch();

  // A write that never finished (the process was killed in it) leaves a temporary file behind.
  if (rank == 0) remove_unfinished_checkpoints(*log);
  std::int64_t step = resume(options, reader, *log);
  log_job(*log, reader, total_steps);
  TrainResult result;
  embedding::TierStats tier_total;
  data::Batch batch;
  const auto start = Clock::now();
  auto last_log = start;
  std::int64_t steps_since_log = 0, steps_this_run = 0;
  device::DeviceCounts counts_at_log = backend_->counters().snapshot();  // device_per_step's start
  double loss = 0;           // the mean loss over the last log interval (DlrmModel::take_loss)
  std::int64_t loss_from = step + 1;  // the first step of the interval being summed
  // The loss stays on the device until a log record: every rank reads it at the same steps.
  auto read_loss = [&] {
    loss = model_->take_loss();
    if (!std::isfinite(loss))
      throw DivergedError(fmt::format("training diverged: the loss is {} over steps {}-{} (learning rate {} too high?)",
                                      loss, loss_from, step, spec_.optimizer.lr));
    loss_from = step + 1;
  };
  auto do_eval = [&](std::int64_t at_step) {
    auto r = evaluate(spec_.data.eval, spec_.train.eval_batches);
    log->info("eval at step {}: AUC {:.6f}  logloss {:.6f}  ({} samples)", at_step, r.auc, r.log_loss, r.samples);
    metrics.write({{"type", "eval"}, {"step", at_step}, {"auc", r.auc}, {"logloss", r.log_loss}, {"samples", r.samples}});
    return r;
  };
  // Asynchronous checkpoints: at most one write in flight on the writer's thread, finished (and
  // its failure thrown on every rank) at the next checkpoint or at the end, points every rank
  // reaches in the same step. recmix run's jobs write in the step, under the run's write grant.
  std::unique_ptr<AsyncCheckpointWriter> writer;
  if (spec_.checkpoint.async && options.collective_io)
    log->info("checkpoint.async is not used by jobs of recmix run: checkpoints are written in the step");
  else if (spec_.checkpoint.async && spec_.checkpoint.interval > 0) {
    const std::size_t bytes = describe_checkpoint(*model_, checkpoint_meta(step), rank).bytes();
    writer = std::make_unique<AsyncCheckpointWriter>(comm_, *backend_, bytes);
    log->info("checkpoints are written in the background from a {} copy in host memory on rank {}",
              device::format_bytes(bytes), rank);
  }
  auto checkpoint_written = [&](const std::string& path) {
    if (rank == 0) prune_checkpoints();
    result.last_checkpoint = path;
  };
  auto finish_write = [&] {
    if (!writer || !writer->in_flight()) return;
    const auto wait_start = Clock::now();
    const bool ended = writer->finished();
    const std::string path = writer->wait();
    const double waited = std::chrono::duration<double>(Clock::now() - wait_start).count();
    checkpoint_written(path);
    log->info("checkpoint written in the background: {} ({} in {:.2f} s{})", path,
              device::format_bytes(writer->snapshot_bytes()), writer->write_seconds(),
              ended ? std::string() : fmt::format("; training waited {:.2f} s for it", waited));
  };
  auto do_checkpoint = [&](std::int64_t at_step, bool final) {
    std::string path = checkpoint_path(at_step);
    // A diverged model is not written: the newest checkpoint stays the last good one. Agreed
    // before the write (and outside recmix run's write grant), so every rank stops together. A
    // background write checks the values as it copies them (one pass over the model, not two).
    const bool background = writer && !final;
    if (!background) require_finite_model(*model_, comm_, at_step, path);
    if (background && writer->in_flight() && spec_.checkpoint.when_busy == "skip") {
      std::int32_t busy = writer->finished() ? 0 : 1;  // every rank skips, or none
      comm_.all_reduce_sum(&busy, &busy, 1, comm::DataType::i32);
      if (busy > 0) {
        require_finite_model(*model_, comm_, at_step, path);  // skipped, but checked
        log->warn("checkpoint of step {} skipped: the write of {} is still going (checkpoint.when_busy = \"skip\")",
                  at_step, writer->path());
        return;
      }
    }
    finish_write();
    if (final && result.last_checkpoint == path) return;  // a stop at a checkpoint's step: written
    if (background) {
      inject_checkpoint_fault(at_step);
      agree_finite_model(writer->snapshot(describe_checkpoint(*model_, checkpoint_meta(at_step), rank)), comm_,
                         at_step, path);
      writer->launch(path);
      log->info("checkpoint of step {} copied to host memory in {:.3f} s ({}); writing {} in the background", at_step,
                writer->snapshot_seconds(), device::format_bytes(writer->snapshot_bytes()), path);
      return;
    }
    if (options.collective_io)
      options.collective_io([&] { save(path, at_step); });
    else
      save(path, at_step);
    checkpoint_written(path);
    log->info("checkpoint written: {}", path);
  };

  bool stopped_early = false;
  // Tiered tables look one batch ahead (DlrmModel::train_step's `next`): the next batch is read
  // before this step trains, and the position a checkpoint saves is taken before that read.
  const bool lookahead = model_->embedding().tiered();
  data::Batch ahead, no_batch;
  bool have_ahead = false;
  std::exception_ptr ahead_error;
  auto step_start = Clock::now();
  while (step < total_steps) {
    bool have_batch = false;
    std::exception_ptr read_error;
    try {
      if (ahead_error) {
        std::exception_ptr e = ahead_error;
        ahead_error = nullptr;
        std::rethrow_exception(e);
      }
      if (have_ahead) {
        std::swap(batch, ahead);
        have_ahead = false;
        have_batch = true;
      } else {
        have_batch = reader.next(batch);
      }
    } catch (const std::exception&) {
      if (!options.stop_requested) throw;
      read_error = std::current_exception();
    }
    if (options.stop_requested) {  // the status word: stop votes, failed reads
      std::int32_t status[2] = {options.stop_requested() ? 1 : 0, read_error ? 1 : 0};
      comm_.all_reduce_sum(status, status, 2, comm::DataType::i32);
      if (read_error) std::rethrow_exception(read_error);
      if (status[1] > 0)
        throw PeerFailedError(fmt::format("job '{}' stops at step {}: {} other rank(s) failed to read the batch",
                                          spec_.name, step + 1, status[1]));
      if (status[0] > 0) {
        stopped_early = true;
        break;
      }
    }
    if (!have_batch) continue;  // end of an epoch: the next call starts the next one
    const auto data_ready = Clock::now();
    const data::ReaderPosition after_batch = reader.position();
    const data::Batch* next = nullptr;
    if (lookahead && step + 1 < total_steps) {
      try {
        while (!reader.next(ahead)) {  // an epoch's end: the next call starts the next epoch
        }
        have_ahead = true;
        next = &ahead;
      } catch (const std::exception&) {  // reported when that batch's turn comes
        ahead_error = std::current_exception();
        next = &no_batch;
      }
    }
    fault_armed_ = fault_where_ == FaultWhere::mid && step + 1 == fault_step_;
    // A run's last step (as every rank knows) is read alone: result.last_loss is its loss, equal
    // bit for bit whether or not the run was stopped and resumed on the way.
    const bool last_step = step + 1 == total_steps || (options.stop_after > 0 && steps_this_run + 1 >= options.stop_after);
    if (last_step && loss_from <= step) read_loss();
    backend_->counters().set_step(step);
    model_->train_step_async(batch, spec_.train.batch_size, next);
    ++step;
    ++steps_this_run;
    ++steps_since_log;
    resume_position_ = after_batch;
    if (fault_where_ == FaultWhere::after && fault_step_ == step)
      throw Error(fmt::format("fault injected after step {} (RECMIX_FAULT_INJECTION)", step));
    if (fault_where_ == FaultWhere::nan && fault_step_ == step) inject_nan();
    if (fault_where_ == FaultWhere::stall && fault_step_ == step && options.stop_requested)
      while (!options.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto now = Clock::now();
    double since = std::chrono::duration<double>(now - last_log).count();
    // Rank 0's clock decides; the other ranks learn it from a host collective that waits on no device.
    std::int32_t log_now = rank == 0 && (since >= spec_.train.log_interval_s || step == total_steps);
    if (comm_.size() > 1) comm_.all_reduce_sum(&log_now, &log_now, 1, comm::DataType::i32);
    if (log_now) read_loss();
    if (options.on_step) {
      StepSample sample;
      sample.step = step;
      sample.total_steps = total_steps;
      sample.step_s = std::chrono::duration<double>(now - step_start).count();
      sample.data_wait_s = std::chrono::duration<double>(data_ready - step_start).count();
      sample.loss = loss;
      sample.pool_current_bytes = device_pool_->current_bytes();
      sample.pool_peak_bytes = device_pool_->peak_bytes();
      options.on_step(sample);
    }
    if (rank == 0 && log_now) {
      // A ReLU maps NaN to 0, so the loss can stay finite while the weights are not: the dense
      // parameters (the same on every rank) are checked at each log line; everything a rank
      // holds is checked before each checkpoint (save_checkpoint).
      if (const std::string bad = model_->dense_finite() ? std::string() : first_non_finite(*model_, true); !bad.empty())
        throw DivergedError(fmt::format("training diverged: at step {} {} (learning rate {} too high?)", step, bad,
                                        spec_.optimizer.lr));
      double elapsed = std::chrono::duration<double>(now - start).count();
      double rate = steps_since_log * spec_.train.batch_size / std::max(since, 1e-9);
      double eta = (total_steps - step) * (elapsed / steps_this_run);
      log->info("step {}/{} ({:.0f}%)  epoch {}  loss {:.5f}  {:.0f} samples/s  ETA {}", step, total_steps,
                100.0 * step / total_steps, resume_position_.epoch, loss, rate, format_duration(eta));
      const device::DeviceCounts counts = backend_->counters().snapshot();
      nlohmann::json record = {{"type", "train"}, {"step", step}, {"epoch", resume_position_.epoch}, {"loss", loss},
                               {"samples_per_s", rate}, {"elapsed_s", elapsed},
                               {"device_peak_bytes", device_pool_->peak_bytes()},
                               {"device_per_step", device_per_step(counts - counts_at_log, steps_since_log)}};
      counts_at_log = counts;
      if (model_->embedding().tiered()) {
        const embedding::TierStats t = model_->embedding().take_tier_stats();
        tier_total.add(t);
        add_tier_metrics(record, t);
        log->info("  tiers (rank 0's shards): hot hit rate {:.1f}%, {:.0f} cold rows staged per step, {} to the "
                  "device and {} to the host per step, staging {:.2f} ms per step{}",
                  100.0 * record["hot_hit_rate"].get<double>(), record["cold_rows_per_step"].get<double>(),
                  device::format_bytes(record["bytes_to_device_per_step"].get<std::size_t>()),
                  device::format_bytes(record["bytes_to_host_per_step"].get<std::size_t>()),
                  1e3 * record["staging_s_per_step"].get<double>(),
                  t.reranks > 0 ? fmt::format(", {} re-rank(s) moved {} rows", t.reranks, t.rows_promoted + t.rows_demoted)
                                : std::string());
      }
      metrics.write(record);
      last_log = now;
      steps_since_log = 0;
    }
    if (spec_.checkpoint.interval > 0 && step % spec_.checkpoint.interval == 0 && step < total_steps)
      do_checkpoint(step, false);
    if (!spec_.data.eval.empty() && spec_.train.eval_interval > 0 && step % spec_.train.eval_interval == 0 &&
        step < total_steps)
      do_eval(step);
    step_start = Clock::now();  // checkpoints and evaluations are not part of the next step
    if (options.stop_after > 0 && steps_this_run >= options.stop_after && step < total_steps) {
      stopped_early = true;
      break;
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.steps = step;
  if (loss_from <= step) read_loss();  // steps after the last record (an early stop): every rank is here
  result.last_loss = loss;
  result.samples_per_second = steps_this_run * spec_.train.batch_size / std::max(seconds, 1e-9);
  result.stopped = stopped_early;
  do_checkpoint(step, true);
  if (!stopped_early && !spec_.data.eval.empty()) result.eval = do_eval(step);
  if (model_->embedding().tiered() && rank == 0) {
    tier_total.add(model_->embedding().take_tier_stats());
    nlohmann::json t;
    add_tier_metrics(t, tier_total);
    result.hot_hit_rate = t.value("hot_hit_rate", 0.0);
    log->info("tiers over the run (rank 0's shards): hot hit rate {:.1f}%, {} rows staged, {} rows written back, {} "
              "re-rank(s)", 100.0 * result.hot_hit_rate, tier_total.rows_staged, tier_total.rows_written_back,
              tier_total.reranks);
  }
  log->info("{} after {} steps in {}: {:.0f} samples/s, peak device memory {}",
            stopped_early ? "stopped" : "done", step, format_duration(seconds), result.samples_per_second,
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
  data::Reader reader(files, ro);
  if (reader.info().num_dense != num_dense_ || reader.info().table_rows != table_rows_)
    throw DataError(fmt::format("'{}' has {} dense features and {} tables; the model was built for {} and {}",
                                files.front(), reader.info().num_dense, reader.info().table_rows.size(), num_dense_,
                                table_rows_.size()));
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
