#pragma once
// The bodies of recmix run's control-plane messages (ControlPlane, docs/run.md), each written to
// and read from JSON in one place (messages.cpp). The scheduler service and the executors both
// include this, and neither needs the other's classes for it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/types.hpp"
#include "runtime/run/control_plane.hpp"

namespace recmix::runtime::run {

// The body of a start message: everything a rank needs to run its part of a job.
struct JobPlacement {
  std::int64_t job = -1;
  int launch = 0;               // distinct per start of any job: the job communicator's tag
  std::string name;
  std::string spec_text;        // the job's TOML (runtime/train/job_spec.hpp)
  std::string origin;
  std::string base_dir;
  std::string run_dir;          // RUN_DIR/jobs/<name>
  std::vector<int> ranks;       // world ranks, in the job's rank order
  int threads = 1;
  device::BackendKind device_kind = device::BackendKind::cpu;  // the spec's device.kind, or recmix run --device
  std::uint64_t memory_share = 0;  // bytes the job's pool may hold on each of its ranks
  int priority = 0;             // the job's priority (its streams' priority on a GPU)
  bool resume = false;          // resume from the job's latest checkpoint
  double sample_interval_s = 1.0;
  std::vector<int> cores;       // this rank's CPUs the job's threads are bound to (set locally; empty: unbound)

  nlohmann::json to_json() const;
  static JobPlacement from_json(const nlohmann::json& j);
};

// The body of a "sample" (a job's rank to the scheduler, every sample_interval_s and after the
// job's last step): means over the interval of the step time, its data wait and its phases, the
// pool's bytes, and the share of the interval the job's thread was busy on a core. The scheduler
// logs it as the event "sample" (events.jsonl) with these keys.
struct JobSample {
  int launch = 0;
  int rank = 0;  // world rank
  std::int64_t step = 0, total_steps = 0;
  double step_s = 0, data_wait_s = 0;
  double dense_s = 0, embedding_s = 0, allreduce_update_s = 0;  // the step's phases
  double loss = 0;
  std::size_t pool_current_bytes = 0, pool_peak_bytes = 0;
  double busy_share = 0;
  // On a GPU whose driver answers NVML: the device's own view, shared by every job on it.
  struct Gpu {
    double util = 0, memory_util = 0;
    std::size_t memory_used_bytes = 0;
  };
  std::optional<Gpu> gpu;

  nlohmann::json to_json() const;
  static JobSample from_json(const nlohmann::json& j);
};

// The body of a job's end report, one per rank: the message kind is the outcome ("finished",
// "stopped", "failed"; "failing" when a rank failed by itself, before its peers know). A job
// whose training ran carries its results; a failed one its error.
struct JobReport {
  int launch = 0;
  int rank = -1;      // world rank; -1: the sender's
  int job_rank = -1;  // rank in the job; -1: the job never started on this rank
  std::optional<std::int64_t> steps;
  std::optional<double> loss, samples_per_s;
  std::optional<std::string> checkpoint;
  std::optional<std::size_t> pool_peak_bytes;
  struct Eval {
    double auc = 0, logloss = 0;
  };
  std::optional<Eval> eval;
  std::string error;           // "<kind>: <what>"; empty: none
  bool out_of_memory = false;  // the error is the job's pool running out
  bool peer = false;           // the error is a peer's failure, not this rank's

  nlohmann::json to_json() const;
  static JobReport from_json(const nlohmann::json& j);
};

// The messages that name one launch of a job and nothing else: "stop" and "io_grant" (scheduler
// to executor), "io_request" and "io_release" (a job's leader to the scheduler).
Message launch_message(const std::string& kind, std::int64_t job, int launch);
// The launch a message names (-1 when it names none).
int launch_of(const Message& m);

}  // namespace recmix::runtime::run
