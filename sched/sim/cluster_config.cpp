#include "sched/sim/cluster_config.hpp"

#include <toml++/toml.h>

#include <set>

#include "core/error.hpp"

namespace recmix::sched {

ClusterSpec cluster_spec_for(const MachineModel& machine, int nodes) {
  ClusterSpec spec;
  spec.machine = machine.name;
  spec.nodes = nodes;
  spec.gpus_per_node = machine.devices_per_node;
  spec.gpu_memory_bytes = machine.memory_capacity;
  spec.host_memory_bytes = machine.host_memory;
  spec.host_cores = machine.host_cores;
  spec.intra_node_bandwidth = machine.intra_node_bandwidth;
  spec.inter_node_bandwidth = machine.network_bandwidth;
  return spec;
}

ClusterSpec load_cluster_spec(const std::string& toml_path, ClusterSpec base) {
  toml::table file;
  try {
    file = toml::parse_file(toml_path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(toml_path + ": " + std::string(e.description()));
  }
  const toml::table* cluster = file["cluster"].as_table();
  RECMIX_REQUIRE(cluster != nullptr, ConfigError, toml_path + ": no [cluster] table");
  return read_cluster_table(*cluster, toml_path, std::move(base));
}

ClusterSpec read_cluster_table(const toml::table& table, const std::string& toml_path, ClusterSpec base) {
  const toml::table* cluster = &table;
  static const std::set<std::string> known = {"machine", "nodes", "gpus_per_node", "gpu_memory_gib",
                                              "host_memory_gib", "host_cores", "intra_node_gbps",
                                              "inter_node_gbps", "max_jobs_per_gpu"};
  for (const auto& [key, value] : *cluster)
    RECMIX_REQUIRE(known.count(std::string(key.str())), ConfigError,
                   toml_path + ": cluster." + std::string(key.str()) + " is not a known key");
  auto number = [&](const char* key, double fallback) {
    const auto node = (*cluster)[key];
    if (!node) return fallback;
    if (const auto v = node.value<double>()) return *v;
    throw ConfigError(toml_path + ": cluster." + key + " must be a number");
  };
  if (const auto m = (*cluster)["machine"]) {
    const auto name = m.value<std::string>();
    RECMIX_REQUIRE(name.has_value(), ConfigError, toml_path + ": cluster.machine must be a string");
    const int nodes = base.nodes;
    base = cluster_spec_for(machine_model(*name), nodes);
  }
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  base.nodes = static_cast<int>(number("nodes", base.nodes));
  base.gpus_per_node = static_cast<int>(number("gpus_per_node", base.gpus_per_node));
  base.gpu_memory_bytes = number("gpu_memory_gib", base.gpu_memory_bytes / kGiB) * kGiB;
  base.host_memory_bytes = number("host_memory_gib", base.host_memory_bytes / kGiB) * kGiB;
  base.host_cores = static_cast<int>(number("host_cores", base.host_cores));
  base.intra_node_bandwidth = number("intra_node_gbps", base.intra_node_bandwidth / 1e9) * 1e9;
  base.inter_node_bandwidth = number("inter_node_gbps", base.inter_node_bandwidth / 1e9) * 1e9;
  base.max_jobs_per_gpu = static_cast<int>(number("max_jobs_per_gpu", base.max_jobs_per_gpu));
  try {
    validate(base);
  } catch (const ConfigError& e) {
    throw ConfigError(toml_path + ": " + e.what());
  }
  return base;
}

}  // namespace recmix::sched
