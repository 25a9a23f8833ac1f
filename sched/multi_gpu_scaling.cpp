#include "sched/multi_gpu_scaling.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "sched/pair_data.hpp"

namespace recmix::sched {

namespace {

// "('ResNet-50 (batch size 64)', 4)" -> name, 4. False for anything else.
bool parse_key(const std::string& key, std::string& name, int& gpus) {
  const auto open = key.find('\'');
  const auto close = key.rfind('\'');
  if (open == std::string::npos || close <= open) return false;
  const auto comma = key.find(',', close);
  if (comma == std::string::npos) return false;
  name = key.substr(open + 1, close - open - 1);
  gpus = std::atoi(key.c_str() + comma + 1);
  return gpus >= 1;
}

void read_section(const nlohmann::json& table, std::map<std::string, std::map<int, double>>& out) {
  for (const auto& [key, entry] : table.items()) {
    std::string name;
    int gpus = 0;
    if (!parse_key(key, name, gpus) || !entry.is_object() || !entry.contains("null")) continue;
    const double tput = entry.at("null").get<double>();
    if (tput > 0) out[name][gpus] = tput;
  }
}

// The type's own efficiency at its largest measured count above 1; negative when it has none.
double own_efficiency(const std::map<int, double>& counts) {
  const auto one = counts.find(1);
  if (one == counts.end() || counts.rbegin()->first <= 1) return -1;
  const auto& [largest, tput] = *counts.rbegin();
  return std::min(1.0, tput / (largest * one->second));
}

}  // namespace

MultiGpuScaling read_gavel_scaling(const std::string& json_path, std::string_view gpu) {
  const nlohmann::json j = read_gavel_throughputs(json_path, gpu);
  const std::string key(gpu);
  MultiGpuScaling s;
  s.source = "gavel-" + key;
  read_section(j.at(key), s.consolidated);
  if (j.contains(key + "_unconsolidated")) read_section(j.at(key + "_unconsolidated"), s.unconsolidated);
  std::vector<double> efficiencies;
  for (const auto& [type, counts] : s.consolidated)
    if (const double e = own_efficiency(counts); e > 0) efficiencies.push_back(e);
  if (!efficiencies.empty()) {
    std::sort(efficiencies.begin(), efficiencies.end());
    const std::size_t n = efficiencies.size();
    s.default_efficiency = n % 2 ? efficiencies[n / 2] : 0.5 * (efficiencies[n / 2 - 1] + efficiencies[n / 2]);
  }
  return s;
}

ScaledThroughput throughput_on(const MultiGpuScaling& scaling, const std::string& type, int gpus) {
  const auto it = scaling.consolidated.find(type);
  RECMIX_REQUIRE(it != scaling.consolidated.end() && !it->second.empty(), ConfigError,
                 scaling.source + ": no measured throughput for job type '" + type + "'");
  const std::map<int, double>& counts = it->second;
  ScaledThroughput out;
  if (const auto exact = counts.find(gpus); exact != counts.end()) {
    out.steps_per_s = exact->second;
    out.measured = true;
    out.from_gpus = gpus;
    return out;
  }
  int nearest = counts.begin()->first;
  for (const auto& [count, tput] : counts)
    if (std::abs(count - gpus) < std::abs(nearest - gpus)) nearest = count;
  out.from_gpus = nearest;
  if (gpus > nearest) {
    const double own = own_efficiency(counts);
    out.efficiency = own > 0 ? own : scaling.default_efficiency;
  }
  out.steps_per_s = counts.at(nearest) * gpus / nearest * out.efficiency;
  return out;
}

double measured_spread_slowdown(const MultiGpuScaling& scaling, const std::string& type, int gpus) {
  const auto c = scaling.consolidated.find(type);
  const auto u = scaling.unconsolidated.find(type);
  if (c == scaling.consolidated.end() || u == scaling.unconsolidated.end()) return 0;
  const auto ck = c->second.find(gpus);
  const auto uk = u->second.find(gpus);
  if (ck == c->second.end() || uk == u->second.end()) return 0;
  return std::max(1.0, ck->second / uk->second);
}

}  // namespace recmix::sched
