#pragma once
// One self-contained HTML report: sections of text, charts and tables. A chart's numbers travel
// in the page as JSON and are drawn by the inlined Chart.js (assets.hpp); every chart comes with
// a table of its figures, so that the numbers can be read, copied and grepped without a browser.
#include <cstddef>
#include <string>
#include <vector>

#include "report/format.hpp"

namespace recmix::report {

// One line, bar set or marker set of a chart.
struct Series {
  std::string label;
  // line: points joined; faint: the same, paler (raw values under their smoothed curve);
  // dashed: joined by a dashed line (a derived series, as a smoothed one);
  // points: unjoined dots; marker: large symbols (events: checkpoints, preemptions);
  // failure: large red crosses; bar: bars over the chart's categories (y only);
  // range: floating horizontal bars (`ranges`, on the categories as lanes); band: the same, pale
  // and borderless, for a stretch of time over every lane (a stopped run).
  std::string style = "line";
  std::vector<double> x, y;
  struct Range {
    double begin = 0, end = 0;
    std::size_t lane = 0;
  };
  std::vector<Range> ranges;
  // Index into the page's palette; -1: by the series' position. Series that belong together
  // (a run's raw and smoothed loss) share one.
  int color = -1;
};

struct Chart {
  std::string title;
  std::string x_label, y_label;  // with units: "training time (s)"
  bool y_log = false;
  bool y_from_zero = false;  // the y axis starts at 0 (amounts: memory, throughput)
  // Bar charts: the x categories. Range charts: the lanes (y categories), top to bottom.
  std::vector<std::string> categories;
  std::vector<Series> series;
  std::string caption;  // under the chart: what is drawn, and how it was reduced
};

struct Table {
  std::string caption;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  bool collapsed = false;  // inside a <details> that the reader opens
};

class Page {
 public:
  explicit Page(std::string title);
  void heading(int level, const std::string& text);
  void paragraph(const std::string& text);
  // Something skipped or absent in the input: shown in a box, and listed at the top.
  void note(const std::string& text);
  void chart(const Chart& chart);
  void table(const Table& table);
  // The chart and its table side by side (stacked on narrow screens).
  void chart_with_table(const Chart& chart, const Table& table);
  std::size_t charts() const { return charts_.size(); }
  const std::vector<std::string>& notes() const { return notes_; }
  std::string render() const;

 private:
  std::string chart_html(const Chart& chart);
  std::string title_;
  std::string body_;
  std::vector<std::string> notes_;
  std::vector<std::string> charts_;  // each chart's JSON
};

std::string escape_html(const std::string& text);
}  // namespace recmix::report
