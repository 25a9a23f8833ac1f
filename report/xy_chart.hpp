#pragma once
// A chart of series against a numeric axis, with its table, from the full data: the table is
// computed from every point (every point listed when there are few, else summary figures over
// every point per series; format.hpp prints them), the chart draws them reduced per pixel
// column (downsample.hpp).
#include <cstddef>
#include <string>
#include <vector>

#include "report/html_page.hpp"

namespace recmix::report {

constexpr std::size_t kDrawBuckets = 1000;      // columns of a chart's x range: <= 2 points each
constexpr std::size_t kTableAllPointsUpTo = 400;  // tables list every point up to this many

struct XySeries {
  std::string label;
  std::string style = "line";  // as Series::style: line, faint, dashed, points, marker, failure
  int color = -1;
  std::vector<double> x, y;
  bool in_table = true;  // false for a series derived from another (a smoothed curve)
};

struct XyChart {
  std::string title, x_label, y_label, caption;
  std::string x_name, y_name;  // the table's column names (with units)
  bool y_log = false;
  bool y_from_zero = false;
  std::vector<XySeries> series;
};

void add_xy_chart(Page& page, const XyChart& chart);

// A bar chart over categories, with the same numbers in its table (rows: categories).
struct BarChart {
  std::string title, x_label, y_label, caption;
  std::vector<std::string> categories;
  std::vector<std::string> series_labels;
  std::vector<std::vector<double>> values;  // [series][category]
};

void add_bar_chart(Page& page, const BarChart& chart);

}  // namespace recmix::report
