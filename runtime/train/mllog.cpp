#include "runtime/train/mllog.hpp"

#include <chrono>
#include <filesystem>

#include "core/error.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {

std::int64_t mllog_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

// The source file from the project's root ("runtime/train/trainer.cpp"), as the library trims
// its root_dir from the caller's path.
std::string project_path(const char* file) {
  const std::string f = file;
  const auto at = f.rfind("/runtime/");
  return at == std::string::npos ? f : f.substr(at + 1);
}

// mlperf_logging writes a value that float() accepts as a float: numbers and booleans.
nlohmann::ordered_json as_logged(const nlohmann::json& v) {
  if (v.is_number() || v.is_boolean()) return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>();
  return v;
}

}  // namespace

MlLog::MlLog(const std::string& run_dir, bool enabled) {
  if (!enabled) return;
  const auto path = std::filesystem::path(run_dir) / "mllog.txt";
  out_.open(path, std::ios::trunc);
  if (!out_) throw IoError("cannot write '" + path.string() + "'");
}

void MlLog::write(const char* type, const std::string& key, const nlohmann::json& value,
                  const nlohmann::json& metadata, std::int64_t time_ms, LogSite where) {
  if (!out_.is_open()) return;
  nlohmann::ordered_json meta = {{"file", project_path(where.file)}, {"lineno", where.line}};
  for (auto& [k, v] : metadata.items()) meta[k] = v;
  nlohmann::ordered_json line;
  line["namespace"] = "";
  line["time_ms"] = time_ms > 0 ? time_ms : mllog_now_ms();
  line["event_type"] = type;
  line["key"] = key;
  line["value"] = as_logged(value);
  line["metadata"] = meta;
  out_ << ":::MLLOG " << line.dump() << '\n';
  out_.flush();
}

void MlLog::event(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata,
                  std::int64_t time_ms, LogSite where) {
  write("POINT_IN_TIME", key, value, metadata, time_ms, where);
}
void MlLog::start(const std::string& key, const nlohmann::json& metadata, std::int64_t time_ms,
                  LogSite where) {
  write("INTERVAL_START", key, nullptr, metadata, time_ms, where);
}
void MlLog::end(const std::string& key, const nlohmann::json& metadata, std::int64_t time_ms,
                LogSite where) {
  write("INTERVAL_END", key, nullptr, metadata, time_ms, where);
}

void MlLog::open_run(const JobSpec& spec, int ranks, std::int64_t init_ms) {
  // recmix clears no cache before a run (nor does the reference; submissions must).
  event("cache_clear", false, {}, init_ms);
  start("init_start", {}, init_ms);
  event("submission_benchmark", "dlrm_dcnv2");
  event("submission_division", "closed");
  event("submission_org", "recmix");
  event("submission_platform", std::to_string(ranks) + "x" + std::string(spelling(spec.device.kind)));
  event("submission_status", "research");
  event("global_batch_size", spec.train.batch_size);
  event("gradient_accumulation_steps", 1);
  event("seed", spec.seed);
  const OptimizerSpec& o = spec.optimizer;
  event("opt_name", std::string(spelling(o.dense)));
  event("opt_base_learning_rate", o.lr);
  if (o.dense == DenseOptimizerKind::adagrad) {
    event("opt_adagrad_learning_rate_decay", 0);
    event("opt_adagrad_initial_accumulator_value", o.initial_accumulator);
    event("opt_adagrad_epsilon", o.eps >= 0 ? double(o.eps) : 1e-10);  // torch's default, as recmix's
  }
  event("opt_weight_decay", 0);
  event("opt_learning_rate_warmup_steps", o.schedule.warmup_steps);
  event("opt_learning_rate_decay_start_step", o.schedule.decay_start);
  event("opt_learning_rate_decay_steps", o.schedule.decay_steps);
  end("init_stop");
  start("run_start");
}

}  // namespace recmix::runtime
