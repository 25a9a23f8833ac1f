#include "report/xy_chart.hpp"

#include <fmt/format.h>

#include <cmath>

#include "report/downsample.hpp"

namespace recmix::report {

void add_xy_chart(Page& page, const XyChart& c) {
  Chart chart;
  chart.title = c.title;
  chart.x_label = c.x_label;
  chart.y_label = c.y_label;
  chart.y_log = c.y_log;
  chart.y_from_zero = c.y_from_zero;
  std::size_t tabled = 0, drawn = 0, total = 0;
  for (const XySeries& s : c.series) {
    Points p = min_max_downsample(s.x, s.y, kDrawBuckets);
    total += s.y.size();
    drawn += p.y.size();
    chart.series.push_back({s.label, s.style, std::move(p.x), std::move(p.y), {}, s.color});
    if (s.in_table) tabled += s.y.size();
  }
  chart.caption = c.caption;
  if (drawn < total)
    chart.caption += fmt::format("{}Drawn: {} of {} points (the smallest and largest value per pixel column); the table's "
                                 "figures are computed from every point.",
                                 chart.caption.empty() ? "" : " ", drawn, total);
  Table t;
  if (tabled <= kTableAllPointsUpTo) {
    t.caption = fmt::format("{}: every point", c.title);
    t.columns = {"series", c.x_name, c.y_name};
    for (const XySeries& s : c.series) {
      if (!s.in_table) continue;
      for (std::size_t i = 0; i < s.y.size() && i < s.x.size(); ++i) t.rows.push_back({s.label, figure(s.x[i]), figure(s.y[i])});
    }
    t.collapsed = t.rows.size() > 25;
  } else {
    t.caption = fmt::format("{}: figures over every point", c.title);
    t.columns = {"series", "points", "first " + c.x_name, "last " + c.x_name, "first " + c.y_name, "last " + c.y_name,
                 "min " + c.y_name, "at " + c.x_name, "max " + c.y_name, "at " + c.x_name, "mean " + c.y_name};
    for (const XySeries& s : c.series) {
      if (!s.in_table) continue;
      const SeriesStats st = summarize(s.x, s.y);
      if (st.count == 0) {
        t.rows.push_back({s.label, "0", "", "", "", "", "", "", "", "", ""});
        continue;
      }
      t.rows.push_back({s.label, integer(static_cast<long long>(st.count)), figure(st.x_first), figure(st.x_last),
                        figure(st.first), figure(st.last), figure(st.min), figure(st.x_of_min), figure(st.max),
                        figure(st.x_of_max), figure(st.mean)});
    }
  }
  if (tabled <= kTableAllPointsUpTo)
    page.chart_with_table(chart, t);
  else {  // the summary's eleven columns read better at full width, under the chart
    page.chart(chart);
    page.table(t);
  }
}

void add_bar_chart(Page& page, const BarChart& c) {
  Chart chart;
  chart.title = c.title;
  chart.x_label = c.x_label;
  chart.y_label = c.y_label;
  chart.caption = c.caption;
  chart.categories = c.categories;
  Table t;
  t.caption = c.title;
  t.columns = {c.x_label};
  for (std::size_t s = 0; s < c.values.size(); ++s) {
    Series series;
    series.label = c.series_labels[s];
    series.style = "bar";
    series.y = c.values[s];
    chart.series.push_back(std::move(series));
    t.columns.push_back(c.series_labels[s]);
  }
  for (std::size_t k = 0; k < c.categories.size(); ++k) {
    std::vector<std::string> row = {c.categories[k]};
    for (const auto& v : c.values) row.push_back(k < v.size() ? figure(v[k]) : "");
    t.rows.push_back(std::move(row));
  }
  page.chart_with_table(chart, t);
}

}  // namespace recmix::report
