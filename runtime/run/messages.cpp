#include "runtime/run/messages.hpp"

#include "runtime/train/job_spec.hpp"

namespace recmix::runtime::run {

nlohmann::json JobPlacement::to_json() const {
  return {{"job", job},
          {"launch", launch},
          {"name", name},
          {"spec_text", spec_text},
          {"origin", origin},
          {"base_dir", base_dir},
          {"run_dir", run_dir},
          {"ranks", ranks},
          {"threads", threads},
          {"device_kind", std::string(spelling(device_kind))},
          {"memory_share", memory_share},
          {"priority", priority},
          {"resume", resume},
          {"sample_interval_s", sample_interval_s}};
}

JobPlacement JobPlacement::from_json(const nlohmann::json& j) {
  JobPlacement p;
  p.job = j.at("job").get<std::int64_t>();
  p.launch = j.at("launch").get<int>();
  p.name = j.at("name").get<std::string>();
  p.spec_text = j.at("spec_text").get<std::string>();
  p.origin = j.at("origin").get<std::string>();
  p.base_dir = j.at("base_dir").get<std::string>();
  p.run_dir = j.at("run_dir").get<std::string>();
  p.ranks = j.at("ranks").get<std::vector<int>>();
  p.threads = j.at("threads").get<int>();
  p.device_kind = parse_choice<device::BackendKind>(j.at("device_kind").get<std::string>(), "device_kind");
  p.memory_share = j.at("memory_share").get<std::uint64_t>();
  p.priority = j.value("priority", 0);
  p.resume = j.at("resume").get<bool>();
  p.sample_interval_s = j.at("sample_interval_s").get<double>();
  return p;
}

nlohmann::json JobSample::to_json() const {
  nlohmann::json j = {{"launch", launch},
                      {"rank", rank},
                      {"step", step},
                      {"total_steps", total_steps},
                      {"step_s", step_s},
                      {"data_wait_s", data_wait_s},
                      {"dense_s", dense_s},
                      {"embedding_s", embedding_s},
                      {"allreduce_update_s", allreduce_update_s},
                      {"loss", loss},
                      {"pool_current_bytes", pool_current_bytes},
                      {"pool_peak_bytes", pool_peak_bytes},
                      {"busy_share", busy_share}};
  if (gpu) {
    j["gpu_util"] = gpu->util;
    j["gpu_memory_util"] = gpu->memory_util;
    j["gpu_memory_used_bytes"] = gpu->memory_used_bytes;
  }
  return j;
}

JobSample JobSample::from_json(const nlohmann::json& j) {
  JobSample s;
  s.launch = j.at("launch").get<int>();
  s.rank = j.at("rank").get<int>();
  s.step = j.at("step").get<std::int64_t>();
  s.total_steps = j.at("total_steps").get<std::int64_t>();
  s.step_s = j.at("step_s").get<double>();
  s.data_wait_s = j.at("data_wait_s").get<double>();
  s.dense_s = j.at("dense_s").get<double>();
  s.embedding_s = j.at("embedding_s").get<double>();
  s.allreduce_update_s = j.at("allreduce_update_s").get<double>();
  s.loss = j.at("loss").get<double>();
  s.pool_current_bytes = j.at("pool_current_bytes").get<std::size_t>();
  s.pool_peak_bytes = j.at("pool_peak_bytes").get<std::size_t>();
  s.busy_share = j.at("busy_share").get<double>();
  if (j.contains("gpu_util"))
    s.gpu = Gpu{j.at("gpu_util").get<double>(), j.at("gpu_memory_util").get<double>(),
                j.at("gpu_memory_used_bytes").get<std::size_t>()};
  return s;
}

nlohmann::json JobReport::to_json() const {
  nlohmann::json j = {{"launch", launch}, {"rank", rank}};
  if (job_rank >= 0) j["job_rank"] = job_rank;
  if (steps) j["steps"] = *steps;
  if (loss) j["loss"] = *loss;
  if (samples_per_s) j["samples_per_s"] = *samples_per_s;
  if (checkpoint) j["checkpoint"] = *checkpoint;
  if (pool_peak_bytes) j["pool_peak_bytes"] = *pool_peak_bytes;
  if (eval) j["eval"] = {{"auc", eval->auc}, {"logloss", eval->logloss}};
  if (!error.empty()) {
    j["error"] = error;
    j["out_of_memory"] = out_of_memory;
    j["peer"] = peer;
  }
  return j;
}

JobReport JobReport::from_json(const nlohmann::json& j) {
  JobReport r;
  r.launch = j.at("launch").get<int>();
  r.rank = j.value("rank", -1);
  r.job_rank = j.value("job_rank", -1);
  if (j.contains("steps")) r.steps = j.at("steps").get<std::int64_t>();
  if (j.contains("loss")) r.loss = j.at("loss").get<double>();
  if (j.contains("samples_per_s")) r.samples_per_s = j.at("samples_per_s").get<double>();
  if (j.contains("checkpoint")) r.checkpoint = j.at("checkpoint").get<std::string>();
  if (j.contains("pool_peak_bytes")) r.pool_peak_bytes = j.at("pool_peak_bytes").get<std::size_t>();
  if (j.contains("eval")) r.eval = Eval{j.at("eval").at("auc").get<double>(), j.at("eval").at("logloss").get<double>()};
  r.error = j.value("error", std::string());
  r.out_of_memory = j.value("out_of_memory", false);
  r.peer = j.value("peer", false);
  return r;
}

Message launch_message(const std::string& kind, std::int64_t job, int launch) {
  return {kind, job, -1, {{"launch", launch}}};
}

int launch_of(const Message& m) { return m.body.value("launch", -1); }

}  // namespace recmix::runtime::run
