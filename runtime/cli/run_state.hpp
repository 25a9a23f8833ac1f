#pragma once
// What a run directory's status.json says of its run, and whether its scheduler still lives: the
// one file `recmix status`, `recmix submit` and `recmix close` read (docs/run.md, Run states).
#include <string>

#include <nlohmann/json.hpp>

namespace recmix::cli {

// A run's heartbeat is stale after this many of its rounds without one (round_interval_s, which
// status.json gives as heartbeat.interval_s), and never sooner than kStaleFloorSeconds: a loaded
// machine may delay a round, not ten.
constexpr double kStaleRounds = 10;
constexpr double kStaleFloorSeconds = 5;

struct RunState {
  nlohmann::json status;  // status.json as read
  // running, stopped (a clean stop: --resume continues it), finished, failed (it ended and no job
  // finished), or stale (status.json says running, but its scheduler is gone or silent).
  std::string state;
  std::string why;  // for stale: what shows the scheduler is gone
};

// Reads RUN_DIR/status.json only. Throws ConfigError when it is missing or unreadable.
RunState read_run_state(const std::string& run_dir);

// `recmix status RUN_DIR`: the run's state and each job's; reads status.json and nothing else.
void print_run_status(const std::string& run_dir);

}  // namespace recmix::cli
