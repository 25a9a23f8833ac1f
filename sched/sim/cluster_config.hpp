#pragma once
// Cluster specs for the simulator: defaults from a machine model, overridden by a TOML file
// (docs/scheduler.md shows the keys) and then by command-line flags.
#include <string>

#include "sched/cluster_state.hpp"
#include "sched/machine_model.hpp"

namespace recmix::sched {

// nodes x the machine's GPUs per node, memory, bandwidths and host resources.
ClusterSpec cluster_spec_for(const MachineModel& machine, int nodes);

// Reads the [cluster] table of a TOML file over `base`. Unknown keys and wrong types throw
// ConfigError naming the file and key.
ClusterSpec load_cluster_spec(const std::string& toml_path, ClusterSpec base);

}  // namespace recmix::sched
