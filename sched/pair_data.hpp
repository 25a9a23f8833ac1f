#pragma once
// Measured co-location pairs from public traces, as (job type, co-runner type, slowdown) rows:
// the Lucid pair measurements (with the solo utilisation of each type) and Gavel's pairwise
// space-sharing throughputs. These calibrate and evaluate the interference model.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sched/utilisation.hpp"

namespace recmix::sched {

// Slowdown of `type` while sharing a GPU with `other`: solo speed / co-located speed.
struct PairObservation {
  std::string type;
  std::string other;
  double slowdown = 1.0;
};

struct SoloProfile {
  UtilisationVector util;      // compute = gpu_util, memory_bandwidth = gmem_util (as shares)
  double memory_bytes = 0;     // device memory used alone
  double speed = 0;            // samples/s (Lucid) or steps/s (Gavel) alone
};

struct PairDataset {
  std::string source;
  std::map<std::string, SoloProfile> solo;  // per type; utilisation may be empty (Gavel)
  std::vector<PairObservation> pairs;       // both directions of every measured pair
  int infeasible_pairs = 0;                 // pairs measured as not fitting together
  // Slowdown of a type alone on its GPU while another GPU of its node runs a job (the node's
  // shared host: cores, caches, memory), per type where measured (recmix pairs files only).
  std::map<std::string, double> busy_neighbour;
};

// lucid_colocate_pairs.csv + lucid_single_jobs.csv (S-Lab-System-Group/Lucid). Type names are
// "model/dataset/b<batch>/amp<0|1>". Throws DataError naming file and line on a malformed row.
PairDataset read_lucid_pairs(const std::string& pairs_csv, const std::string& singles_csv);

// gavel_throughputs.json (stanford-futuredata/gavel): single-GPU job types on `gpu`
// ("k80", "p100", "v100"). Type names are Gavel's, e.g. "ResNet-18 (batch size 32)".
PairDataset read_gavel_pairs(const std::string& json_path, std::string_view gpu = "v100");
// Gavel's throughputs file, checked to be JSON and to hold the GPU's table; the errors name the
// file. Shared by the pair reader above and the k-GPU scaling (multi_gpu_scaling.hpp).
nlohmann::json read_gavel_throughputs(const std::string& json_path, std::string_view gpu);

}  // namespace recmix::sched
