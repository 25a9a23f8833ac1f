#pragma once
// The MLPerf log of a training run ([train] mllog = true): <run_dir>/mllog.txt on rank 0, one
// event a line as the MLPerf logging library (mlcommons/logging, mlperf_logging.mllog) formats
// it: `:::MLLOG {"namespace": "", "time_ms": <epoch ms>, "event_type": <POINT_IN_TIME |
// INTERVAL_START | INTERVAL_END>, "key": .., "value": .., "metadata": {"file": .., "lineno": ..,
// ...}}`, the fields in that order; a number or boolean value is written as a float, as the
// library's does. The keys recmix writes and their sources: docs/job-spec.md, "MLPerf log".
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>

namespace recmix::runtime {

struct JobSpec;

// Where an event was logged (the metadata's file and lineno): the caller's place, as
// std::source_location gives it, but also under clang 14, whose libstdc++ headers lack it.
struct LogSite {
  static LogSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { return {file, line}; }
  const char* file;
  int line;
};

// Milliseconds since the Unix epoch (the log's time_ms).
std::int64_t mllog_now_ms();

class MlLog {
 public:
  // Writes <run_dir>/mllog.txt (replacing one of an earlier run) when enabled; else does nothing.
  MlLog(const std::string& run_dir, bool enabled);
  bool enabled() const { return out_.is_open(); }

  void event(const std::string& key, const nlohmann::json& value = nullptr, const nlohmann::json& metadata = {},
             std::int64_t time_ms = 0, LogSite where = LogSite::here());
  void start(const std::string& key, const nlohmann::json& metadata = {}, std::int64_t time_ms = 0,
             LogSite where = LogSite::here());
  void end(const std::string& key, const nlohmann::json& metadata = {}, std::int64_t time_ms = 0,
           LogSite where = LogSite::here());

  // The run's opening events, from cache_clear to run_start: the submission, the hyper-parameters
  // and the initialisation interval (init_start at init_ms, when the trainer began building).
  void open_run(const JobSpec& spec, int ranks, std::int64_t init_ms);

 private:
  void write(const char* type, const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata,
             std::int64_t time_ms, LogSite where);
  std::ofstream out_;
};

}  // namespace recmix::runtime
