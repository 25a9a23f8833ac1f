#include "runtime/train/train_log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace recmix::runtime {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 9.95) return fmt::format("{:.1f}s", seconds);  // short runs: "0.2s", not "0s"
  auto s = static_cast<std::int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m{:02}s", s / 3600, (s / 60) % 60, s % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::shared_ptr<spdlog::logger> make_logger(const JobSpec& spec, int rank, bool quiet) {
  std::vector<spdlog::sink_ptr> sinks;
  auto console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  console->set_pattern(rank == 0 ? std::string("%v") : fmt::format("[rank {}] %v", rank));
  console->set_level(rank == 0 && !quiet ? spdlog::level::info : spdlog::level::warn);
  sinks.push_back(console);
  if (rank == 0) {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>((std::filesystem::path(spec.run_dir) / "train.log").string());
    file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    sinks.push_back(file);
  }
  auto logger = std::make_shared<spdlog::logger>(spec.name, sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

MetricsWriter::MetricsWriter(const std::string& run_dir, bool enabled) {
  if (enabled) out_.open(std::filesystem::path(run_dir) / "metrics.jsonl", std::ios::app);
}

void MetricsWriter::write(const nlohmann::json& j) {
  if (out_) out_ << j.dump() << '\n' << std::flush;
}

void add_tier_metrics(nlohmann::json& record, const embedding::TierStats& t) {
  const double steps = std::max<double>(1.0, static_cast<double>(t.steps));
  record["hot_hit_rate"] = t.lookups > 0 ? static_cast<double>(t.hot_hits) / static_cast<double>(t.lookups) : 1.0;
  record["cold_rows_per_step"] = static_cast<double>(t.rows_staged) / steps;
  record["bytes_to_device_per_step"] = static_cast<std::size_t>(static_cast<double>(t.bytes_to_device) / steps);
  record["bytes_to_host_per_step"] = static_cast<std::size_t>(static_cast<double>(t.bytes_to_host) / steps);
  record["staging_s_per_step"] = t.staging_s / steps;
  record["lookahead_wait_s_per_step"] = t.lookahead_wait_s / steps;
  record["reranks"] = t.reranks;
}

}  // namespace recmix::runtime
