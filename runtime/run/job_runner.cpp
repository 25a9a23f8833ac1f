#include "runtime/run/job_runner.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <array>
#include <chrono>
#include <filesystem>

#include "core/error.hpp"
#include "device/gpu_usage.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::runtime::run {
namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

JobRunner::JobRunner(ControlPlane& plane, JobPlacement placement, std::unique_ptr<comm::Communicator> comm)
    : plane_(plane),
      placement_(std::move(placement)),
      comm_(std::make_unique<comm::GuardedCommunicator>(std::move(comm))) {
  thread_ = std::thread([this] { main(); });
}

JobRunner::~JobRunner() {
  if (thread_.joinable()) thread_.join();
}

void JobRunner::grant_io() {
  {
    std::lock_guard lock(io_mutex_);
    io_granted_ = true;
  }
  io_cv_.notify_all();
}

// A checkpoint is collective parallel HDF5 under the process's HDF5 lock. The scheduler grants
// one job at a time the right to write, so two jobs sharing ranks never each hold the lock on one
// rank while waiting for the other's rank. Only the job's rank 0 asks; its peers wait in a barrier
// (outside the lock).
void JobRunner::gated_write(const std::function<void()>& write) {
  const bool leader = comm_->rank() == 0;
  if (leader) {
    std::unique_lock lock(io_mutex_);
    io_granted_ = false;
    lock.unlock();
    plane_.send_to_scheduler(launch_message("io_request", placement_.job, placement_.launch));
    lock.lock();
    io_cv_.wait(lock, [&] { return io_granted_; });
  }
  comm_->barrier();
  std::exception_ptr failure;
  try {
    write();
  } catch (...) {
    failure = std::current_exception();
  }
  comm_->barrier();
  if (leader) plane_.send_to_scheduler(launch_message("io_release", placement_.job, placement_.launch));
  if (failure) std::rethrow_exception(failure);
}

// The job's spec for this placement: the run's directory, threads, backend, priority and memory
// share; device collectives in epochs, since other jobs may share the device.
JobSpec JobRunner::job_spec() const {
  const auto& p = placement_;
  JobSpec spec = parse_job_spec(p.spec_text, p.origin, p.base_dir);
  spec.run_dir = p.run_dir;
  spec.checkpoint.dir = (std::filesystem::path(p.run_dir) / "checkpoints").string();
  spec.device.threads = p.threads;
  spec.device.kind = p.device_kind;
  spec.device.shared = true;
  spec.device.priority = p.priority;
  if (p.memory_share > 0 && (spec.device.memory_capacity == 0 || spec.device.memory_capacity > p.memory_share))
    spec.device.memory_capacity = p.memory_share;
  return spec;
}

// Building the model allocates this rank's shards; a rank that fails here (its share is too
// small) must not leave its peers waiting in the first step: the ranks agree first.
std::unique_ptr<Trainer> JobRunner::build_trainer(const JobSpec& spec) {
  std::unique_ptr<Trainer> built;
  std::exception_ptr build_error;
  try {
    built = std::make_unique<Trainer>(spec, *comm_);
  } catch (const std::exception&) {
    build_error = std::current_exception();
  }
  std::int32_t failed = build_error ? 1 : 0;
  comm_->all_reduce_sum(&failed, &failed, 1, comm::DataType::i32);
  if (build_error) std::rethrow_exception(build_error);
  if (failed > 0)
    throw PeerFailedError(fmt::format("job '{}': {} other rank(s) failed to build the model", placement_.name, failed));
  return built;
}

// The samples a job sends the scheduler: means over sample_interval_s of the step time and its
// data wait, the phases' times, the pool's bytes, the share of the interval the job's thread was
// busy on a core, and on a GPU the device's own view (NVML, when the driver has it: shared by
// every job on it).
class JobRunner::Sampler {
 public:
  Sampler(JobRunner& runner, Trainer& trainer) : r_(runner), trainer_(trainer) {
    // Phase times (a stream synchronisation per phase: free on the CPU backend, where work is
    // synchronous anyway).
    trainer_.model().set_phase_timing(true);
    phases_start_ = phase_groups();
  }
  // After each step; sends a sample when the interval is over or the job's last step is done.
  void on_step(const StepSample& s) {
    step_sum_ += s.step_s;
    wait_sum_ += s.data_wait_s;
    ++steps_;
    peak_ = std::max(peak_, s.pool_peak_bytes);
    const auto now = Clock::now();
    const double wall = std::chrono::duration<double>(now - window_start_).count();
    if (wall < r_.placement_.sample_interval_s && s.step < s.total_steps) return;
    const double cpu = thread_cpu_seconds();
    const auto phases = phase_groups();
    const auto& p = r_.placement_;
    const double n = static_cast<double>(steps_);
    JobSample sample;
    sample.launch = p.launch;
    sample.rank = r_.plane_.rank();
    sample.step = s.step;
    sample.total_steps = s.total_steps;
    sample.step_s = step_sum_ / n;
    sample.data_wait_s = wait_sum_ / n;
    sample.dense_s = (phases[0] - phases_start_[0]) / n;
    sample.embedding_s = (phases[1] - phases_start_[1]) / n;
    sample.allreduce_update_s = (phases[2] - phases_start_[2]) / n;
    sample.loss = s.loss;
    sample.pool_current_bytes = s.pool_current_bytes;
    sample.pool_peak_bytes = s.pool_peak_bytes;
    sample.busy_share = std::min(1.0, (cpu - cpu_start_) / std::max(wall, 1e-9));
    if (const auto gpu = device::read_gpu_usage(trainer_.device_pool().backend().device_index()))
      sample.gpu = JobSample::Gpu{gpu->utilization, gpu->memory_utilization, gpu->memory_used_bytes};
    r_.plane_.send_to_scheduler({"sample", p.job, -1, sample.to_json()});
    window_start_ = now;
    cpu_start_ = cpu;
    phases_start_ = phases;
    step_sum_ = wait_sum_ = 0;
    steps_ = 0;
  }
  std::size_t peak() const { return peak_; }  // the pool's peak over the samples so far

 private:
  // Seconds in the dense work, the embedding exchange and the update, over the run so far.
  std::array<double, 3> phase_groups() const {
    using Phase = DlrmModel::Phase;
    const auto& t = trainer_.model().phase_seconds();
    const double embedding = t[Phase::embedding_forward_start] + t[Phase::embedding_forward_finish] +
                             t[Phase::embedding_backward_start] + t[Phase::embedding_backward_finish];
    const double update = t[Phase::dense_update];
    double total = 0;
    for (double v : t) total += v;
    return {total - embedding - update, embedding, update};
  }

  JobRunner& r_;
  Trainer& trainer_;
  Clock::time_point window_start_ = Clock::now();
  double cpu_start_ = thread_cpu_seconds();
  double step_sum_ = 0, wait_sum_ = 0;
  std::int64_t steps_ = 0;
  std::size_t peak_ = 0;
  std::array<double, 3> phases_start_{};
};

void JobRunner::main() {
  const auto& p = placement_;
  // Bound before the job creates any thread (OpenMP's, the reader's, the replicas'), which all
  // inherit the binding: co-located jobs then keep to their own cores like separate processes.
  if (!p.cores.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : p.cores) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  JobReport report;
  report.launch = p.launch;
  report.rank = plane_.rank();
  report.job_rank = comm_->rank();
  std::unique_ptr<Sampler> sampler;
  auto peak = [&] { return sampler ? sampler->peak() : std::size_t{0}; };
  std::string outcome = "failed";
  try {
    const std::unique_ptr<Trainer> trainer = build_trainer(job_spec());
    sampler = std::make_unique<Sampler>(*this, *trainer);
    TrainOptions options;
    options.quiet = true;
    if (p.resume) options.resume = "auto";  // a job stopped before its first checkpoint starts again
    options.stop_requested = [this] { return stop_.load(); };
    options.collective_io = [this](const std::function<void()>& write) { gated_write(write); };
    options.faults = TrainFaults::from_environment(trainer->spec().name, comm_->rank());
    options.on_step = [&](const StepSample& s) { sampler->on_step(s); };
    const TrainResult r = trainer->train(options);
    report.steps = r.steps;
    report.loss = r.last_loss;
    report.samples_per_s = r.samples_per_second;
    report.checkpoint = r.last_checkpoint;
    report.pool_peak_bytes = std::max(peak(), trainer->device_pool().peak_bytes());
    if (r.eval) report.eval = JobReport::Eval{r.eval->auc, r.eval->log_loss};
    outcome = r.stopped ? "stopped" : "finished";
  } catch (const Error& e) {
    report.error = fmt::format("{}: {}", e.kind(), e.what());
    report.pool_peak_bytes = peak();
    report.out_of_memory = dynamic_cast<const OutOfMemoryError*>(&e) != nullptr;
    report.peer = dynamic_cast<const PeerFailedError*>(&e) != nullptr;
  } catch (const std::exception& e) {
    report.error = fmt::format("error: {}", e.what());
    report.pool_peak_bytes = peak();
  }
  sampler.reset();
  finish(outcome, report);
}

// The job's last status word: a rank that failed by itself says so, and a rank whose training
// ended well learns whether a peer failed after the last collective they shared. Then the report.
void JobRunner::finish(std::string outcome, JobReport& report) {
  const auto& p = placement_;
  const bool failed_here = outcome == "failed" && !report.peer;
  // Said before the close, which waits for the peers' next collective: if they never get there
  // (stuck in a collective the guard does not see), the scheduler's watchdog still learns of it.
  if (failed_here) plane_.send_to_scheduler({"failing", p.job, -1, report.to_json()});
  try {
    const int failed_ranks = comm_->close(failed_here);
    if (outcome != "failed" && failed_ranks > 0) {
      outcome = "failed";
      report.error = fmt::format("peer failed: {} other rank(s) of the job failed after its last step", failed_ranks);
      report.peer = true;
    }
  } catch (const std::exception& e) {
    outcome = "failed";
    report.error = fmt::format("communication error: closing the job's communicator: {}", e.what());
  }
  // Done before the report leaves, so that this rank's executor frees the job's cores before the
  // scheduler's next start (sent on the report) can arrive.
  done_.store(true);
  plane_.send_to_scheduler({outcome, p.job, -1, report.to_json()});
}

}  // namespace recmix::runtime::run
