#include "report/html_page.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "report/assets.hpp"

namespace recmix::report {

namespace {

// Plot coordinates: six significant digits draw as well as seventeen, in a third of the bytes.
void append_coordinates(std::string& out, const std::vector<double>& v) {
  out += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    if (std::isfinite(v[i]))
      fmt::format_to(std::back_inserter(out), "{:.6g}", v[i]);
    else
      out += "null";
  }
  out += ']';
}

// Names come from the inputs: bytes that are not UTF-8 become U+FFFD instead of an error.
std::string json_dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
std::string json_string(const std::string& s) { return json_dump(s); }

// JSON inside <script>: "</" would end the element.
std::string script_safe(std::string s) {
  for (std::size_t at = s.find("</"); at != std::string::npos; at = s.find("</", at + 2)) s.replace(at, 2, "<\\/");
  return s;
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

Page::Page(std::string title) : title_(std::move(title)) {}

void Page::heading(int level, const std::string& text) {
  body_ += fmt::format("<h{0}>{1}</h{0}>\n", level, escape_html(text));
}

void Page::paragraph(const std::string& text) { body_ += "<p>" + escape_html(text) + "</p>\n"; }

void Page::note(const std::string& text) {
  notes_.push_back(text);
  body_ += "<p class=\"note\">" + escape_html(text) + "</p>\n";
}

std::string Page::chart_html(const Chart& c) {
  const std::string id = fmt::format("chart-{}", charts_.size() + 1);
  std::string j = "{\"id\":" + json_string(id) + ",\"title\":" + json_string(c.title) +
                  ",\"x_label\":" + json_string(c.x_label) + ",\"y_label\":" + json_string(c.y_label) +
                  ",\"y_log\":" + (c.y_log ? "true" : "false") + ",\"y_zero\":" + (c.y_from_zero ? "true" : "false") + ",\"categories\":" +
                  json_dump(c.categories) + ",\"series\":[";
  std::size_t points = 0;
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    if (i) j += ',';
    j += "{\"label\":" + json_string(s.label) + ",\"style\":" + json_string(s.style) +
         fmt::format(",\"color\":{}", s.color < 0 ? static_cast<int>(i) : s.color) + ",\"x\":";
    append_coordinates(j, s.x);
    j += ",\"y\":";
    append_coordinates(j, s.y);
    j += ",\"ranges\":[";
    for (std::size_t k = 0; k < s.ranges.size(); ++k)
      fmt::format_to(std::back_inserter(j), "{}[{:.6g},{:.6g},{}]", k ? "," : "", s.ranges[k].begin, s.ranges[k].end,
                     s.ranges[k].lane);
    j += "]}";
    points += s.style == "range" ? s.ranges.size() : s.y.size();
  }
  j += "]}";
  charts_.push_back(std::move(j));
  return fmt::format(
      "<figure class=\"chart\" id=\"{0}\" data-points=\"{1}\">\n<figcaption>{2}</figcaption>\n"
      "<div class=\"canvas-box\"><canvas aria-label=\"{2}\" role=\"img\"></canvas></div>\n{3}</figure>\n",
      id, points, escape_html(c.title), c.caption.empty() ? "" : "<p class=\"caption\">" + escape_html(c.caption) + "</p>\n");
}

void Page::chart(const Chart& c) { body_ += "<div class=\"pair\">\n" + chart_html(c) + "</div>\n"; }

void Page::table(const Table& t) {
  std::string h;
  if (t.collapsed) h += "<details><summary>" + escape_html(t.caption) + "</summary>\n";
  h += "<table>\n";
  if (!t.collapsed && !t.caption.empty()) h += "<caption>" + escape_html(t.caption) + "</caption>\n";
  h += "<thead><tr>";
  for (const auto& c : t.columns) h += "<th>" + escape_html(c) + "</th>";
  h += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    h += "<tr>";
    for (const auto& cell : row) h += "<td>" + escape_html(cell) + "</td>";
    h += "</tr>\n";
  }
  h += "</tbody></table>\n";
  if (t.collapsed) h += "</details>\n";
  body_ += h;
}

void Page::chart_with_table(const Chart& chart, const Table& table) {
  body_ += "<div class=\"pair\">\n";
  body_ += chart_html(chart);
  body_ += "<div class=\"figures\">\n";
  this->table(table);
  body_ += "</div>\n</div>\n";
}

std::string Page::render() const {
  std::string out;
  out.reserve(body_.size() + assets::chart_js().size() + 64 * 1024);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Nothing may be fetched: every script and style is in the page.
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
         "style-src 'unsafe-inline'; img-src data:\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + escape_html(title_) + "</title>\n<style>\n";
  out += assets::report_css();
  out += "</style>\n</head>\n<body>\n<main>\n<h1>" + escape_html(title_) + "</h1>\n";
  if (!notes_.empty()) {
    out += fmt::format("<section class=\"notes\"><h2>Skipped or absent ({})</h2>\n<ul>\n", notes_.size());
    for (const auto& n : notes_) out += "<li>" + escape_html(n) + "</li>\n";
    out += "</ul></section>\n";
  }
  out += body_;
  out += "</main>\n<script type=\"application/json\" id=\"report-data\">[";
  for (std::size_t i = 0; i < charts_.size(); ++i) {
    if (i) out += ",\n";
    out += script_safe(charts_[i]);
  }
  out += "]</script>\n<script>\n";
  out += assets::chart_js();
  out += "\n</script>\n<script>\n";
  out += assets::report_js();
  out += "\n</script>\n</body>\n</html>\n";
  return out;
}

}  // namespace recmix::report
