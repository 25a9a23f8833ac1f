// recmix train / recmix eval.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "data/format.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/run_directory.hpp"
#include "runtime/cli/stop_signals.hpp"
#include "data/format.hpp"
#include "runtime/train/demo.hpp"
#include "runtime/train/input_checks.hpp"
#include "runtime/train/memory_fit.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/cli/mpi_session.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::cli {
namespace {

struct TrainArgs {
  std::string job_file;
  bool demo = false;
  std::string resume;
  bool resume_latest = false;
  bool allow_changes = false;
  std::int64_t steps = -1;
  std::int64_t stop_after = 0;
  int threads = 0;
  std::string gemm;
  std::string graphs;
  std::string l2_window;
  std::string device;
  std::string run_dir;
  bool force = false;
};

struct EvalArgs {
  std::string checkpoint;
  std::vector<std::string> data;
  std::int64_t batch_size = 0;
  std::int64_t max_batches = 0;
  int threads = 0;
  std::string gemm;
  std::string device;
  std::string tables;  // [precision] embedding for the evaluation
};

// With --resume, the line that says the job has no step left (its checkpoint is at or past its
// last step), or "". The newest checkpoint for auto and latest (the names sort by step), else the
// one given; one whose metadata does not read is the trainer's to judge.
std::string finished_job(const runtime::JobSpec& spec, const std::string& resume) {
  namespace fs = std::filesystem;
  std::string newest = resume;
  if (resume == "auto" || resume == "latest") {
    newest.clear();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(spec.checkpoint.dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("ckpt-") && name.ends_with(".h5") && e.path().string() > newest) newest = e.path().string();
    }
  }
  if (newest.empty()) return "";
  try {
    const auto meta = runtime::read_checkpoint_meta(newest);
    // The data is opened only when the job counts epochs.
    const std::int64_t batches_per_epoch =
        spec.train.steps > 0 ? 0 : data::open_dataset_info(spec.data.train).rows / spec.train.batch_size;
    if (!runtime::no_step_left(spec, meta.step, batches_per_epoch)) return "";
    const std::int64_t total = runtime::total_steps(spec, batches_per_epoch);
    return fmt::format("the job '{}' has no step left: {} is at step {}, {}; nothing to resume, every file left as it was",
                       spec.name, newest, meta.step,
                       meta.step > total ? fmt::format("past the job's last ({})", total) : "the job's last");
  } catch (const Error&) {
    return "";
  }
}

void run_train(const TrainArgs& a) {
  runtime::ensure_mpi();
  auto comm = comm::make_mpi_world_communicator();
  const bool resuming = a.resume_latest || !a.resume.empty();
  if (resuming && a.force) throw ConfigError("train: --resume continues the job in its run directory, --force starts over; give one");
  // A run directory that holds a job's run is continued (--resume) or moved aside (--force), never
  // mixed into: a second run would append to its metrics and overwrite its checkpoints.
  auto claim = [&](const std::string& run_dir) -> bool {
    const std::string taken =
        claim_run_directory(*comm, run_dir, {"train.log", "metrics.jsonl", "checkpoints"}, resuming, a.force, "train");
    if (taken.empty()) return true;
    runtime::error_known_to_every_rank();  // every rank ends with status 1; rank 0 prints it
    throw ConfigError(taken);
  };
  runtime::JobSpec spec;
  if (a.demo) {
    if (!a.job_file.empty()) throw ConfigError("train: give either a job spec or --demo, not both");
    const std::string run_dir = a.run_dir.empty() ? "runs/demo" : a.run_dir;
    if (!claim(run_dir)) return;
    spec = runtime::prepare_demo_job(run_dir, *comm);
  } else {
    if (a.job_file.empty()) throw ConfigError("train: a job spec (TOML) is required, or --demo for the built-in example");
    // Every rank reads the spec; rank 0's verdict, broadcast before any other collective, ends
    // every rank in order when it is wrong (one line, no MPI_Abort).
    std::string error;
    std::exception_ptr mine;
    try {
      spec = runtime::load_job_spec(a.job_file);
    } catch (const Error& e) {
      mine = std::current_exception();
      if (comm->rank() == 0) error = e.what();
    }
    error = from_rank0(*comm, error);
    if (!error.empty()) runtime::error_known_to_every_rank();
    if (mine) std::rethrow_exception(mine);  // alone (no verdict from rank 0): its line and MPI_Abort
    if (!error.empty()) throw ConfigError(error);
    if (!a.run_dir.empty()) {
      spec.run_dir = a.run_dir;
      spec.checkpoint.dir = (std::filesystem::path(a.run_dir) / "checkpoints").string();
    }
    if (!claim(spec.run_dir)) return;
  }
  runtime::set_failure_log((std::filesystem::path(spec.run_dir) / "train.log").string());
  if (a.steps >= 0) spec.train.steps = a.steps;
  if (a.threads > 0) spec.device.threads = a.threads;
  if (!a.gemm.empty()) spec.device.gemm = runtime::parse_choice<device::CpuGemm>(a.gemm, "--gemm");
  if (!a.device.empty()) spec.device.kind = runtime::parse_choice<device::BackendKind>(a.device, "--device");
  if (!a.graphs.empty()) spec.device.graphs = runtime::parse_choice<runtime::AutoSwitch>(a.graphs, "--graphs");
  if (!a.l2_window.empty()) spec.device.l2_window = runtime::parse_choice<runtime::AutoSwitch>(a.l2_window, "--l2-window");
  runtime::TrainOptions options;
  options.resume = a.resume_latest ? "latest" : a.resume;
  if (!options.resume.empty()) {  // a resume with nothing to do says so and touches nothing
    const std::string done = from_rank0(*comm, comm->rank() == 0 ? finished_job(spec, options.resume) : "");
    if (!done.empty()) {
      if (comm->rank() == 0) std::printf("%s\n", done.c_str());
      return;
    }
  }
  options.stop_after = a.stop_after;
  options.allow_changes = a.allow_changes;
  options.faults = runtime::TrainFaults::from_environment(spec.name, comm->rank());
  // A stop signal on any rank stops every rank at the same step (the trainer's status word), with
  // a checkpoint; the command then exits with kStoppedBySignal.
  const std::atomic<bool>& stop = install_stop_signals();
  options.stop_requested = [&stop] { return stop.load(); };
  // Sizes past the machine are refused by the estimate before anything is allocated (recmix run
  // makes the same check when a job is submitted); the data first, so that a batch larger than
  // the data is named as such.
  const data::DatasetInfo info = data::open_dataset_info(spec.data.train);
  runtime::check_inputs(spec, info.table_rows, info.num_dense, info.rows);
  runtime::check_memory_fits(spec, info, comm->size());
  runtime::TrainResult result;
  {
    runtime::Trainer trainer(spec, *comm);
    result = trainer.train(options);
  }
  if (comm->rank() == 0 && result.eval)
    std::printf("final: step %lld  loss %.6f  eval AUC %.6f  logloss %.6f\n", static_cast<long long>(result.steps),
                result.last_loss, result.eval->auc, result.eval->log_loss);
  if (comm->rank() == 0 && result.target) {
    const auto& t = *result.target;
    if (t.reached)
      std::printf("target: eval AUC %g reached at step %lld after %.1f s\n", t.target, static_cast<long long>(t.step),
                  t.seconds);
    else if (t.best_step >= 0)
      std::printf("target: eval AUC %g not reached; best AUC %.6f at step %lld\n", t.target, t.best_auc,
                  static_cast<long long>(t.best_step));
    else
      std::printf("target: eval AUC %g not reached; no evaluation\n", t.target);
  }
  if (result.stopped && a.stop_after == 0) {  // stopped by a signal, its checkpoint written
    if (comm->rank() == 0) {
      const std::string by = *stop_signal_name() ? fmt::format("{} on rank 0", stop_signal_name()) : "a signal to another rank";
      std::fprintf(stderr, "recmix train: stopped at step %lld by %s; checkpoint %s\ncontinue with: %s train %s --resume auto\n",
                   static_cast<long long>(result.steps), by.c_str(), result.last_checkpoint.c_str(),
                   relaunch_prefix(comm->size()).c_str(), a.demo ? "--demo" : a.job_file.c_str());
      std::fflush(stderr);
    }
    std::exit(kStoppedBySignal);  // MPI is finalised at exit
  }
}

void run_eval(const EvalArgs& a) {
  runtime::ensure_mpi();
  auto comm = comm::make_mpi_world_communicator();
  auto meta = runtime::read_checkpoint_meta(a.checkpoint);
  auto spec = runtime::parse_job_spec(meta.job_spec, a.checkpoint + " (job spec)");
  if (a.batch_size > 0) spec.train.batch_size = a.batch_size;
  if (a.threads > 0) spec.device.threads = a.threads;
  if (!a.gemm.empty()) spec.device.gemm = runtime::parse_choice<device::CpuGemm>(a.gemm, "--gemm");
  if (!a.device.empty()) spec.device.kind = runtime::parse_choice<device::BackendKind>(a.device, "--device");
  if (!a.tables.empty()) spec.precision.embedding = runtime::parse_choice<half::Storage>(a.tables, "--tables");
  spec.data.prefetch = 1;
  runtime::Trainer trainer(spec, *comm, runtime::DatasetShape{meta.table_rows, meta.num_dense});
  trainer.load(a.checkpoint);
  auto r = trainer.evaluate(a.data, a.max_batches);
  if (comm->rank() == 0)
    std::printf("checkpoint %s (step %lld): AUC %.6f  logloss %.6f  samples %lld\n", a.checkpoint.c_str(),
                static_cast<long long>(meta.step), r.auc, r.log_loss, static_cast<long long>(r.samples));
}

}  // namespace

void add_train_commands(CLI::App& app) {
  auto targs = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand("train", "Train one DLRM job from a job spec (TOML; see docs/job-spec.md)");
  train->add_option("job", targs->job_file, "Job spec file (TOML)")->check(CLI::ExistingFile);
  train->add_flag("--demo", targs->demo,
                  "Run the built-in example: a small synthetic dataset (generated into the run directory) and model");
  auto* resume = train->add_option("--resume", targs->resume,
                                   "Resume from this checkpoint file, or 'auto': from the newest checkpoint of the job "
                                   "that loads, or from step 0 when it has none (the one command for every start of a "
                                   "requeued job)");
  train->add_flag("--resume-latest", targs->resume_latest, "Resume from the newest checkpoint of the job")->excludes(resume);
  train->add_flag("--allow-changes", targs->allow_changes,
                  "Resume a checkpoint saved with another seed or global batch size (refused otherwise: the data "
                  "order and position would change)");
  train->add_option("--steps", targs->steps, "Override train.steps (total steps)")->check(CLI::NonNegativeNumber);
  train->add_option("--stop-after", targs->stop_after,
                    "Stop after this many steps of this run, writing a checkpoint (to resume later)")
      ->check(CLI::PositiveNumber);
  train->add_option("--threads", targs->threads, "Override device.threads (threads per rank)")->check(CLI::PositiveNumber);
  train->add_option("--gemm", targs->gemm, "Override device.gemm (the CPU backend's GEMM library)")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  train->add_option("--device", targs->device,
                    "Override device.kind: cpu, cuda, or cpu-strict (the strict device emulator: CUDA's code paths on the "
                  "CPU, device memory out of host code's reach; for tests)")
      ->check(CLI::IsMember({"cpu", "cuda", "cpu-strict"}));
  train->add_option("--graphs", targs->graphs,
                    "Override device.graphs: replay the step's dense pieces with their gradient all-reduces (and at "
                    "one rank the pooling and the sparse update) from captured graphs (true, false, or auto: on for "
                    "cuda, off elsewhere; cpu-strict emulates them, the cpu backend has none)")
      ->check(CLI::IsMember({"true", "false", "auto"}));
  train->add_option("--l2-window", targs->l2_window,
                    "Override device.l2_window: keep the embedding's hot rows in the GPU's persisting L2 (true, false, "
                    "or auto: on where the backend has one; cuda has it, cpu-strict emulates it, the cpu backend has "
                    "none)")
      ->check(CLI::IsMember({"true", "false", "auto"}));
  train->add_option("--run-dir", targs->run_dir, "Override run_dir (logs, metrics, checkpoints)");
  train->add_flag("--force", targs->force,
                  "Start over when the run directory holds a run (train.log, metrics.jsonl or checkpoints/): the old "
                  "one is moved aside to RUN_DIR.<UTC time> (never deleted); without it (or --resume) it is refused");
  train->footer(
      "Run under MPI for several ranks: launch/recmix-mpirun -np 4 recmix train job.toml\n"
      "The run directory receives train.log, metrics.jsonl and checkpoints/.");
  train->callback([targs] { run_train(*targs); });

  auto eargs = std::make_shared<EvalArgs>();
  auto* eval = app.add_subcommand("eval", "Evaluate a checkpoint on HDF5 data: exact AUC and logloss");
  eval->add_option("checkpoint", eargs->checkpoint, "Checkpoint file (.h5)")->required()->check(CLI::ExistingFile);
  eval->add_option("data", eargs->data, "Dataset file(s) (.h5)")->required()->check(CLI::ExistingFile);
  eval->add_option("--batch-size", eargs->batch_size, "Global batch size (default: the job's)")->check(CLI::PositiveNumber);
  eval->add_option("--max-batches", eargs->max_batches, "Evaluate only this many global batches")->check(CLI::PositiveNumber);
  eval->add_option("--threads", eargs->threads, "Threads per rank")->check(CLI::PositiveNumber);
  eval->add_option("--gemm", eargs->gemm, "The CPU backend's GEMM library (default: the job's device.gemm)")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  eval->add_option("--device", eargs->device, "The backend: cpu, cuda or cpu-strict (default: the job's device.kind)")
      ->check(CLI::IsMember({"cpu", "cuda", "cpu-strict"}));
  eval->add_option("--tables", eargs->tables,
                   "Store the tables as fp32, fp16 or bf16 for the evaluation (default: as the job did; the "
                   "checkpoint converts, docs/math.md)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  eval->callback([eargs] { run_eval(*eargs); });
}

}  // namespace recmix::cli
