#pragma once
// The bodies of recmix run's control-plane messages (ControlPlane, docs/run.md), each written to
// and read from JSON in one place (messages.cpp). The scheduler service and the executors both
// include this, and neither needs the other's classes for it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  std::string device_kind = "cpu";  // the backend (the spec's device.kind, or recmix run --device)
  std::uint64_t memory_share = 0;  // bytes the job's pool may hold on each of its ranks
  int priority = 0;             // the job's priority (its streams' priority on a GPU)
  bool resume = false;          // resume from the job's latest checkpoint
  double sample_interval_s = 1.0;
  std::vector<int> cores;       // this rank's CPUs the job's threads are bound to (set locally; empty: unbound)

  nlohmann::json to_json() const;
  static JobPlacement from_json(const nlohmann::json& j);
};

// The messages that name one launch of a job and nothing else: "stop" and "io_grant" (scheduler
// to executor), "io_request" and "io_release" (a job's leader to the scheduler).
Message launch_message(const std::string& kind, std::int64_t job, int launch);
// The launch a message names (-1 when it names none).
int launch_of(const Message& m);

}  // namespace recmix::runtime::run
