#include "sched/profile_library.hpp"

#include <algorithm>
#include <cctype>

#include "core/error.hpp"
#include "sched/dlrm_profile.hpp"

namespace recmix::sched {

const JobProfile& ProfileLibrary::dlrm(std::string_view preset, int ranks) {
  const auto key = std::make_pair(std::string(preset), ranks);
  auto it = dlrm_.find(key);
  if (it == dlrm_.end()) {
    JobSpec spec = dlrm_preset(preset);
    spec.ranks = ranks;
    spec.table_bytes = table_bytes_;
    if (bf16_gemms_) spec.gemm_math = GemmMath::bf16;
    it = dlrm_.emplace(key, dlrm_profile(spec, machine_)).first;
  }
  return it->second;
}

void ProfileLibrary::set_table_bytes(int bytes) {
  if (bytes != 2 && bytes != 4)
    throw ConfigError("the DLRM presets' tables take 4 bytes a weight (fp32) or 2 (fp16, bf16), not " +
                      std::to_string(bytes));
  table_bytes_ = bytes;
  dlrm_.clear();
}

void ProfileLibrary::set_bf16_gemms(bool on) {
  bf16_gemms_ = on;
  dlrm_.clear();
}

double default_comm_fraction(std::string_view model_name) {
  std::string m(model_name);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("vgg")) return 0.12;
  if (has("bert") || has("transformer") || has("gpt") || has("lm")) return 0.08;
  if (has("resnet-50") || has("resnet50")) return 0.05;
  return 0.03;
}

std::vector<std::string> ProfileLibrary::add_measured(const PairDataset& data, double default_memory_bytes) {
  std::vector<std::string> names;
  for (const auto& [name, solo] : data.solo) {
    JobProfile p;
    p.type = name;
    p.util = solo.util;
    p.solo_step_s = solo.speed > 0 ? 1.0 / solo.speed : 1.0;
    p.peak_memory_bytes = solo.memory_bytes > 0 ? solo.memory_bytes : default_memory_bytes;
    p.comm_fraction = default_comm_fraction(name);
    measured_[name] = p;
    names.push_back(name);
  }
  return names;
}

void ProfileLibrary::add(const JobProfile& profile) { measured_[profile.type] = profile; }

const JobProfile* ProfileLibrary::find(std::string_view type) const {
  const auto it = measured_.find(std::string(type));
  return it == measured_.end() ? nullptr : &it->second;
}

JobProfile muri_profile(std::string_view model, double iteration_time, double cpu_time, double gpu_time,
                        double network_time, double memory_bytes) {
  JobProfile p;
  p.type = "muri:" + std::string(model);
  const double t = std::max(iteration_time, 1e-9);
  p.util[Resource::host_cpu] = std::clamp(cpu_time / t, 0.0, 1.0);
  p.util[Resource::compute] = std::clamp(gpu_time / t, 0.0, 1.0);
  p.util[Resource::network] = std::clamp(network_time / t, 0.0, 1.0);
  p.comm_fraction = std::clamp(network_time / t, 0.0, 1.0);
  p.solo_step_s = iteration_time / 1000.0;
  p.peak_memory_bytes = memory_bytes;
  return p;
}

}  // namespace recmix::sched
