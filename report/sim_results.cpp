#include "report/sim_results.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.hpp"

namespace recmix::report {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const char* const kTimelineHeader = "policy,time_s,busy_gpus,gpu_util,effective_util,running_jobs,queued_jobs";

std::string first_bytes(const std::string& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

double to_double(const std::string& text, bool& ok) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    ok = used == text.size();
    return v;
  } catch (const std::exception&) {
    ok = false;
    return kNaN;
  }
}

std::uintmax_t fs_size(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

}  // namespace

double SimPolicy::metric(const std::string& key) const {
  for (const auto& [k, v] : metrics)
    if (k == key) return v;
  return kNaN;
}

bool is_sim_json(const std::string& path) {
  const std::string head = first_bytes(path, 4096);
  const auto start = head.find_first_not_of(" \t\r\n");
  return start != std::string::npos && head[start] == '{' &&
         (head.find("\"format\": \"recmix-sim\"") != std::string::npos || head.find("\"policies\"") != std::string::npos);
}

bool is_sim_timeline(const std::string& path) {
  const std::string head = first_bytes(path, 256);
  return head.rfind(kTimelineHeader, 0) == 0;
}

SimFile read_sim_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("{}: cannot read", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}: not valid JSON (byte {}: {}); expected the file recmix sim --json writes", path,
                                e.byte, e.byte >= fs_size(path) ? "the file ends early, truncated?" : "see the file"));
  }
  if (!j.is_object() || !j.contains("policies") || !j["policies"].is_array())
    throw DataError(fmt::format("{}: no \"policies\" array; expected the file recmix sim --json writes", path));
  SimFile f;
  f.path = path;
  std::vector<std::string> parts;
  if (j.contains("trace") && j["trace"].is_string()) parts.push_back("trace " + j["trace"].get<std::string>());
  if (j.contains("mix") && j["mix"].is_string()) parts.push_back("mix " + j["mix"].get<std::string>());
  if (j.contains("arrival_scale") && j["arrival_scale"].is_number())
    parts.push_back(fmt::format("arrival scale {}", j["arrival_scale"].get<double>()));
  if (j.contains("cluster") && j["cluster"].is_object()) {
    const auto& c = j["cluster"];
    parts.push_back(fmt::format("{} nodes x {} GPUs ({}), {} jobs per GPU at most", c.value("nodes", 0),
                                c.value("gpus_per_node", 0), c.value("machine", std::string("?")),
                                c.value("max_jobs_per_gpu", 0)));
  }
  if (j.contains("unplaceable_jobs") && j["unplaceable_jobs"].is_number())
    parts.push_back(fmt::format("{} jobs too large for the cluster", j["unplaceable_jobs"].get<double>()));
  for (const auto& p : parts) f.description += (f.description.empty() ? "" : "; ") + p;
  int index = 0;
  for (const auto& p : j["policies"]) {
    ++index;
    if (!p.is_object() || !p.contains("policy") || !p["policy"].is_string()) {
      f.notes.push_back(fmt::format("{}: policies[{}] has no \"policy\" name; skipped", path, index - 1));
      continue;
    }
    SimPolicy sp;
    sp.name = p["policy"].get<std::string>();
    for (auto it = p.begin(); it != p.end(); ++it)
      if (it.value().is_number()) sp.metrics.emplace_back(it.key(), it.value().get<double>());
    if (p.contains("job_outcomes") && p["job_outcomes"].is_array()) {
      for (const auto& o : p["job_outcomes"]) {
        if (!o.is_object()) continue;
        double jct = o.contains("jct_s") && o["jct_s"].is_number() ? o["jct_s"].get<double>() : kNaN;
        if (!std::isfinite(jct) && o.contains("finish_s") && o.contains("arrival_s") && o["finish_s"].is_number() &&
            o["arrival_s"].is_number() && o["finish_s"].get<double>() >= 0)
          jct = o["finish_s"].get<double>() - o["arrival_s"].get<double>();
        if (std::isfinite(jct)) sp.jct_s.push_back(jct);
        if (o.contains("queued_s") && o["queued_s"].is_number()) sp.queued_s.push_back(o["queued_s"].get<double>());
      }
    } else if (p.contains("jct_percentiles_s") && p["jct_percentiles_s"].is_array() && p["jct_percentiles_s"].size() > 1) {
      for (const auto& v : p["jct_percentiles_s"])
        if (v.is_number()) sp.jct_s.push_back(v.get<double>());
      sp.jct_percentiles = sp.jct_s.size() == p["jct_percentiles_s"].size();
      if (!sp.jct_percentiles) {
        f.notes.push_back(fmt::format("{}: {}'s jct_percentiles_s holds a value that is not a number; not drawn", path,
                                      sp.name));
        sp.jct_s.clear();
      }
    }
    f.policies.push_back(std::move(sp));
  }
  if (f.policies.empty()) throw DataError(fmt::format("{}: \"policies\" holds no policy", path));
  return f;
}

SimTimeline read_sim_timeline(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("{}: cannot read", path));
  SimTimeline tl;
  tl.path = path;
  std::string line;
  std::map<std::string, std::size_t> index;
  std::vector<std::string> reasons;
  while (std::getline(in, line)) {
    ++tl.lines;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (tl.lines == 1) {
      if (line != kTimelineHeader)
        throw DataError(fmt::format("{}: line 1 is not the header of recmix sim --timeline-csv ({})", path, kTimelineHeader));
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    bool ok = cells.size() == 7;
    double v[6] = {};
    for (int c = 0; ok && c < 6; ++c) v[c] = to_double(cells[static_cast<std::size_t>(c) + 1], ok);
    if (!ok) {
      ++tl.skipped_lines;
      if (reasons.size() < 3) reasons.push_back(fmt::format("line {}", tl.lines));
      continue;
    }
    auto [it, added] = index.try_emplace(cells[0], tl.policies.size());
    if (added) tl.policies.push_back({cells[0], {}, {}, {}, {}, {}});
    TimelineSeries& s = tl.policies[it->second];
    s.time_s.push_back(v[0]);
    s.gpu_util.push_back(v[2]);
    s.effective_util.push_back(v[3]);
    s.running_jobs.push_back(v[4]);
    s.queued_jobs.push_back(v[5]);
  }
  if (tl.lines == 0) throw DataError(fmt::format("{}: empty file", path));
  if (tl.skipped_lines > 0) {
    std::string list;
    for (const auto& r : reasons) list += (list.empty() ? "" : ", ") + r;
    tl.notes.push_back(fmt::format("{}: skipped {} of {} lines that do not hold 7 values ({}{})", path, tl.skipped_lines,
                                   tl.lines, list, tl.skipped_lines > 3 ? ", ..." : ""));
  }
  return tl;
}

}  // namespace recmix::report
