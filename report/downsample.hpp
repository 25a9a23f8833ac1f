#pragma once
// Series reduced for drawing, never for the figures in a report's tables: a chart is some
// hundreds of pixels wide, so a million points draw no better than two per pixel column.
#include <cstddef>
#include <vector>

namespace recmix::report {

struct Points {
  std::vector<double> x, y;
};

// Splits the x range into `buckets` columns of equal width and keeps, in each, the points with
// the smallest and the largest y, plus the first and the last point of the series; the points
// kept stay in their input order. Points whose x or y is not finite are dropped. A series of at
// most 2 x buckets points comes back whole (less its non-finite points).
Points min_max_downsample(const std::vector<double>& x, const std::vector<double>& y, std::size_t buckets);

// The mean of the last `window` finite values up to each point (fewer at the start); a point
// whose own value is not finite stays NaN.
std::vector<double> trailing_mean(const std::vector<double>& y, std::size_t window);

// Exact figures of a series' finite values, for the tables.
struct SeriesStats {
  std::size_t count = 0;
  double first = 0, last = 0, min = 0, max = 0, mean = 0;
  double x_of_min = 0, x_of_max = 0, x_first = 0, x_last = 0;
};
SeriesStats summarize(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace recmix::report
