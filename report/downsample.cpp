#include "report/downsample.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace recmix::report {

Points min_max_downsample(const std::vector<double>& x, const std::vector<double>& y, std::size_t buckets) {
  const std::size_t n = std::min(x.size(), y.size());
  std::vector<std::size_t> finite;
  finite.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (std::isfinite(x[i]) && std::isfinite(y[i])) finite.push_back(i);
  Points out;
  buckets = std::max<std::size_t>(buckets, 1);
  if (finite.size() <= 2 * buckets) {
    for (std::size_t i : finite) {
      out.x.push_back(x[i]);
      out.y.push_back(y[i]);
    }
    return out;
  }
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::size_t i : finite) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> min_at(buckets, kNone), max_at(buckets, kNone);
  const double width = hi > lo ? (hi - lo) / static_cast<double>(buckets) : 1.0;
  for (std::size_t i : finite) {
    const auto b = std::min(buckets - 1, static_cast<std::size_t>((x[i] - lo) / width));
    if (min_at[b] == kNone || y[i] < y[min_at[b]]) min_at[b] = i;
    if (max_at[b] == kNone || y[i] > y[max_at[b]]) max_at[b] = i;
  }
  std::vector<std::size_t> keep = {finite.front(), finite.back()};
  for (std::size_t b = 0; b < buckets; ++b) {
    if (min_at[b] != kNone) keep.push_back(min_at[b]);
    if (max_at[b] != kNone) keep.push_back(max_at[b]);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  for (std::size_t i : keep) {
    out.x.push_back(x[i]);
    out.y.push_back(y[i]);
  }
  return out;
}

std::vector<double> trailing_mean(const std::vector<double>& y, std::size_t window) {
  window = std::max<std::size_t>(window, 1);
  std::vector<double> out(y.size(), std::numeric_limits<double>::quiet_NaN());
  // A running sum over the last `window` finite values, kept in a ring of their positions.
  std::vector<double> ring(window);
  std::size_t filled = 0, next = 0;
  double sum = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) continue;
    if (filled == window) {
      sum -= ring[next];
    } else {
      ++filled;
    }
    ring[next] = y[i];
    sum += y[i];
    next = (next + 1) % window;
    out[i] = sum / static_cast<double>(filled);
  }
  return out;
}

SeriesStats summarize(const std::vector<double>& x, const std::vector<double>& y) {
  SeriesStats s;
  double sum = 0;
  const std::size_t n = std::min(x.size(), y.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(y[i])) continue;
    if (s.count == 0) {
      s.first = s.min = s.max = y[i];
      s.x_first = s.x_of_min = s.x_of_max = x[i];
    }
    if (y[i] < s.min) {
      s.min = y[i];
      s.x_of_min = x[i];
    }
    if (y[i] > s.max) {
      s.max = y[i];
      s.x_of_max = x[i];
    }
    s.last = y[i];
    s.x_last = x[i];
    sum += y[i];
    ++s.count;
  }
  if (s.count > 0) s.mean = sum / static_cast<double>(s.count);
  return s;
}

}  // namespace recmix::report
