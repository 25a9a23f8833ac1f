#pragma once
// A GPU's timeline over a stretch of a run, from its activity records (the kernels, copies and
// fills CUPTI reports with their start and end on the GPU's clock): how much of the stretch the GPU
// was busy, and where its idle time lies. A gap between two nodes of one graph launch is the
// GPU's own launch latency; a gap between two launches (graphs or lone kernels, copies, fills) is
// the host not having issued the next work yet, or a stream waiting. Pure code: the tests check it
// on the CPU, and cupti_timeline.cpp only collects the records on a GPU.
#include <cstdint>
#include <string>
#include <vector>

namespace recmix::bench {

struct GpuActivity {
  enum class Kind : std::uint8_t { kernel, copy, fill };
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t graph = 0;   // the graph the work is a node of; 0: launched on its own
  std::uint32_t launch = 0;  // the launching call's correlation id (a graph's launch, for a node)
  Kind kind = Kind::kernel;
};

struct GpuTimeline {
  std::uint64_t kernels = 0, copies = 0, fills = 0;  // records in the stretch
  std::uint64_t graph_launches = 0;                  // distinct graph launches among them
  double span_s = 0;         // from the first record's start to the last end
  double busy_s = 0;         // time at least one record ran (overlaps counted once)
  double in_graph_gap_s = 0;  // idle between two nodes of the same graph launch
  std::uint64_t in_graph_gaps = 0;
  double between_gap_s = 0;  // idle between two launches
  std::uint64_t between_gaps = 0;
  double largest_gap_s = 0;
  double idle_share() const { return span_s > 0 ? 1.0 - busy_s / span_s : 0.0; }
};

// Summarises the records from fraction `from` to fraction `to` of them, in order of start (0.2,
// 0.9: the first fifth, start-up and first steps, and the last tenth, the end of the run, left
// out). The records may come in any order and overlap (several streams).
GpuTimeline summarize(std::vector<GpuActivity> records, double from, double to);

// A few lines for a log: the counts, the busy and idle shares, the idle time split by kind.
std::string describe(const GpuTimeline& t);

}  // namespace recmix::bench
