#pragma once
// How fast a job type runs on k GPUs, from measured throughputs: Gavel's throughputs file keys a
// job by (type, GPU count) under each GPU ("v100": the k GPUs on one server) and under
// "<gpu>_unconsolidated" (the same job with its GPUs spread over servers). A k-GPU job's run time
// is its steps over its k-GPU throughput; where k was not measured a stated scaling rule stands in,
// and the spread placement's slowdown is consolidated over unconsolidated throughput where both
// were measured.
#include <map>
#include <string>
#include <string_view>

namespace recmix::sched {

struct MultiGpuScaling {
  std::string source;                                              // e.g. "gavel-v100"
  std::map<std::string, std::map<int, double>> consolidated;       // type -> GPUs -> steps/s
  std::map<std::string, std::map<int, double>> unconsolidated;     // type -> GPUs -> steps/s
  // Efficiency for a type measured on one GPU only: the median over the types measured on more
  // of their own efficiency (throughput_on's rule), 1 when no type was.
  double default_efficiency = 1.0;
  bool has(std::string_view type) const { return consolidated.count(std::string(type)) > 0; }
};

// gavel_throughputs.json: every "(type, k)" key's solo throughput ("null") under `gpu` and
// `gpu`_unconsolidated (that section may be absent). Throws IoError / DataError naming the file.
MultiGpuScaling read_gavel_scaling(const std::string& json_path, std::string_view gpu = "v100");

// Steps/s of `type` on `gpus` consolidated GPUs.
// measured: the file's figure for that count. Otherwise (a fallback) the nearest measured count m
// (ties: the smaller) scaled linearly, times the type's data-parallel efficiency when growing:
//   gpus > m: tput(m) x gpus/m x e      gpus < m: tput(m) x gpus/m
// e = tput(M) / (M x tput(1)) at the type's largest measured count M > 1, capped at 1 (some
// measurements are super-linear), else scaling.default_efficiency.
struct ScaledThroughput {
  double steps_per_s = 0;
  bool measured = false;
  int from_gpus = 1;       // the measured count it comes from
  double efficiency = 1;   // e applied (1 when measured or scaled down)
};
// Throws ConfigError when the type has no measured throughput at all.
ScaledThroughput throughput_on(const MultiGpuScaling& scaling, const std::string& type, int gpus);

// Slowdown of a `gpus`-GPU job of `type` spread over servers: consolidated / unconsolidated
// throughput at that count, floored at 1 (a spread placement is never taken as faster; a few
// measurements are); 0 when either figure is missing (the bandwidth model applies).
double measured_spread_slowdown(const MultiGpuScaling& scaling, const std::string& type, int gpus);

}  // namespace recmix::sched
