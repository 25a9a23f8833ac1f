#pragma once
// What a training run writes as it goes: its log (rank 0 to stderr and <run_dir>/train.log, the
// other ranks' warnings and errors), its metrics.jsonl records, and the figures they carry.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <fstream>
#include <memory>
#include <string>

#include "embedding/tiered_rows.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {

// "0.2s", "42s", "3m05s", "1h02m03s"; "?" for a negative or non-finite time.
std::string format_duration(double seconds);

// Rank 0 logs to stderr (unless quiet: warnings only) and <run_dir>/train.log; other ranks only
// report warnings and errors, prefixed with their rank.
std::shared_ptr<spdlog::logger> make_logger(const JobSpec& spec, int rank, bool quiet);

// Appends one JSON object per line to <run_dir>/metrics.jsonl (rank 0 only).
class MetricsWriter {
 public:
  MetricsWriter(const std::string& run_dir, bool enabled);
  void write(const nlohmann::json& j);

 private:
  std::ofstream out_;
};

// The tier counters of one log interval, as per-step figures (metrics.jsonl "train" records).
void add_tier_metrics(nlohmann::json& record, const embedding::TierStats& t);

}  // namespace recmix::runtime
