#pragma once
// Cluster specs for the simulator: defaults from a machine model, overridden by a TOML file
// (docs/scheduler.md shows the keys) and then by command-line flags.
#include <string>

#include "sched/cluster_state.hpp"
#include "sched/machine_model.hpp"

#include <toml++/toml.h>

namespace recmix::sched {

// nodes x the machine's GPUs per node, memory, bandwidths and host resources.
ClusterSpec cluster_spec_for(const MachineModel& machine, int nodes);

// Reads the [cluster] table of a TOML file over `base`. Unknown keys and wrong types throw
// ConfigError naming the file and key.
ClusterSpec load_cluster_spec(const std::string& toml_path, ClusterSpec base);

// The keys of a [cluster] table over `base` (machine first: its preset, then each key given);
// errors name `origin` and the key. The simulator's --cluster file and recmix run's jobs file both
// read theirs with it.
ClusterSpec read_cluster_table(const toml::table& cluster, const std::string& origin, ClusterSpec base);

}  // namespace recmix::sched
