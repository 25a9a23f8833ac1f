#include "bench/device/timeline/gpu_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <utility>

namespace recmix::bench {

GpuTimeline summarize(std::vector<GpuActivity> records, double from, double to) {
  GpuTimeline t;
  std::sort(records.begin(), records.end(),
            [](const GpuActivity& a, const GpuActivity& b) { return a.start_ns < b.start_ns; });
  const auto n = static_cast<double>(records.size());
  const auto first = static_cast<std::size_t>(std::clamp(std::floor(from * n), 0.0, n));
  const auto last = static_cast<std::size_t>(std::clamp(std::floor(to * n), 0.0, n));
  if (first >= last) return t;
  std::set<std::pair<std::uint32_t, std::uint32_t>> launches;
  std::uint64_t busy = 0, covered_to = records[first].start_ns;
  const GpuActivity* latest = nullptr;  // the record that ends last so far
  for (std::size_t i = first; i < last; ++i) {
    const GpuActivity& a = records[i];
    const std::uint64_t end = std::max(a.end_ns, a.start_ns);
    if (a.kind == GpuActivity::Kind::kernel) ++t.kernels;
    if (a.kind == GpuActivity::Kind::copy) ++t.copies;
    if (a.kind == GpuActivity::Kind::fill) ++t.fills;
    if (a.graph != 0) launches.insert({a.graph, a.launch});
    if (latest != nullptr && a.start_ns > covered_to) {
      const double gap = static_cast<double>(a.start_ns - covered_to) * 1e-9;
      const bool same_launch = latest->graph != 0 && latest->graph == a.graph && latest->launch == a.launch;
      (same_launch ? t.in_graph_gap_s : t.between_gap_s) += gap;
      ++(same_launch ? t.in_graph_gaps : t.between_gaps);
      t.largest_gap_s = std::max(t.largest_gap_s, gap);
    }
    if (end > covered_to) {
      busy += end - std::max(a.start_ns, covered_to);
      covered_to = end;
      latest = &a;
    } else if (latest == nullptr) {
      latest = &a;
    }
  }
  t.graph_launches = launches.size();
  t.busy_s = static_cast<double>(busy) * 1e-9;
  t.span_s = static_cast<double>(covered_to - records[first].start_ns) * 1e-9;
  return t;
}

std::string describe(const GpuTimeline& t) {
  const double span = t.span_s > 0 ? t.span_s : 1.0;
  return fmt::format(
      "records: {} kernels, {} copies, {} fills; {} graph launches\n"
      "span {:.6f} s: busy {:.6f} s ({:.1f}%), idle {:.6f} s ({:.1f}%)\n"
      "idle inside a graph launch: {:.6f} s ({:.1f}%) in {} gaps\n"
      "idle between launches: {:.6f} s ({:.1f}%) in {} gaps; largest gap {:.1f} us\n",
      t.kernels, t.copies, t.fills, t.graph_launches, t.span_s, t.busy_s, 100.0 * t.busy_s / span,
      t.span_s - t.busy_s, 100.0 * t.idle_share(), t.in_graph_gap_s, 100.0 * t.in_graph_gap_s / span,
      t.in_graph_gaps, t.between_gap_s, 100.0 * t.between_gap_s / span, t.between_gaps, t.largest_gap_s * 1e6);
}

}  // namespace recmix::bench
