#include "runtime/run/messages.hpp"

namespace recmix::runtime::run {

nlohmann::json JobPlacement::to_json() const {
  return {{"job", job},           {"launch", launch},     {"name", name},       {"spec_text", spec_text},
          {"origin", origin},     {"base_dir", base_dir}, {"run_dir", run_dir}, {"ranks", ranks},
          {"threads", threads},   {"device_kind", device_kind}, {"memory_share", memory_share}, {"priority", priority}, {"resume", resume},
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
  p.device_kind = j.at("device_kind").get<std::string>();
  p.memory_share = j.at("memory_share").get<std::uint64_t>();
  p.priority = j.value("priority", 0);
  p.resume = j.at("resume").get<bool>();
  p.sample_interval_s = j.at("sample_interval_s").get<double>();
  return p;
}

Message launch_message(const std::string& kind, std::int64_t job, int launch) {
  return {kind, job, -1, {{"launch", launch}}};
}

int launch_of(const Message& m) { return m.body.value("launch", -1); }

}  // namespace recmix::runtime::run
