#include "sched/sim/trace_reader.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>

#include "core/error.hpp"
#include "sched/csv.hpp"
#include "sched/profile_library.hpp"

namespace recmix::sched {

TraceFormat parse_trace_format(std::string_view name) {
  if (name == "auto") return TraceFormat::automatic;
  if (name == "philly") return TraceFormat::philly;
  if (name == "gavel") return TraceFormat::gavel;
  if (name == "muri") return TraceFormat::muri;
  if (name == "alibaba") return TraceFormat::alibaba;
  if (name == "recmix") return TraceFormat::recmix;
  throw ConfigError("trace format '" + std::string(name) + "' is not one of auto, philly, gavel, muri, alibaba, recmix");
}

std::string_view trace_format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::automatic: return "auto";
    case TraceFormat::philly: return "philly";
    case TraceFormat::gavel: return "gavel";
    case TraceFormat::muri: return "muri";
    case TraceFormat::alibaba: return "alibaba";
    case TraceFormat::recmix: return "recmix";
  }
  return "?";
}

namespace {

std::string where(const CsvRow& row, const std::string& path) { return path + ":" + std::to_string(row.line()); }

TraceFormat detect(const std::string& path) {
  std::ifstream in(path);
  RECMIX_REQUIRE(in, IoError, "cannot open trace " + path);
  std::string header;
  RECMIX_REQUIRE(static_cast<bool>(std::getline(in, header)), DataError, path + ": empty trace");
  if (header.rfind("timestamp,duration,num_gpus", 0) == 0) return TraceFormat::philly;
  if (header.rfind("job_id,num_gpu,submit_time", 0) == 0) return TraceFormat::muri;
  if (header.rfind("instance_sn,role", 0) == 0) return TraceFormat::alibaba;
  if (header.rfind("arrival_s,duration_s,gpus", 0) == 0) return TraceFormat::recmix;
  if (std::count(header.begin(), header.end(), '\t') == 6) return TraceFormat::gavel;
  throw DataError(path + ":1: unknown trace format (header '" + header.substr(0, 60) +
                  "'); pass --trace-format philly|gavel|muri|alibaba|recmix");
}

int positive_gpus(const CsvRow& row, const std::string& column, const std::string& path) {
  const double g = row.number(column);
  RECMIX_REQUIRE(g >= 1 && g == std::floor(g) && g <= 1e6, DataError,
                 where(row, path) + ": column '" + column + "': GPU count must be a positive integer");
  return static_cast<int>(g);
}

double non_negative(const CsvRow& row, const std::string& column, const std::string& path) {
  const double v = row.number(column);
  RECMIX_REQUIRE(v >= 0, DataError, where(row, path) + ": column '" + column + "' is negative");
  return v;
}

double parse_timestamp(const CsvRow& row, const std::string& path) {
  const std::string& t = row.text("timestamp");
  std::tm tm{};
  const char* end = strptime(t.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  RECMIX_REQUIRE(end != nullptr && *end == '\0', DataError,
                 where(row, path) + ": timestamp '" + t + "' is not YYYY-MM-DD HH:MM:SS");
  return static_cast<double>(timegm(&tm));
}

void read_philly(Trace& trace) {
  CsvReader csv(trace.path);
  for (CsvRow row; csv.next(row);) {
    TraceJob job;
    job.arrival_s = parse_timestamp(row, trace.path);
    job.duration_s = non_negative(row, "duration", trace.path);
    job.gpus = positive_gpus(row, "num_gpus", trace.path);
    job.line = row.line();
    trace.jobs.push_back(job);
  }
}

void read_gavel(Trace& trace) {
  CsvReader csv(trace.path, '\t', /*header=*/false);
  for (CsvRow row; csv.next(row);) {
    TraceJob job;
    job.type = row.text("0");
    job.steps = non_negative(row, "4", trace.path);
    job.arrival_s = non_negative(row, "5", trace.path);
    job.gpus = positive_gpus(row, "6", trace.path);
    job.line = row.line();
    RECMIX_REQUIRE(!job.type.empty(), DataError, where(row, trace.path) + ": empty job type");
    trace.jobs.push_back(job);
  }
}

void read_muri(Trace& trace) {
  CsvReader csv(trace.path);
  constexpr double kMs = 1e-3;
  for (CsvRow row; csv.next(row);) {
    TraceJob job;
    job.gpus = positive_gpus(row, "num_gpu", trace.path);
    job.arrival_s = non_negative(row, "submit_time", trace.path) * kMs;
    job.duration_s = non_negative(row, "duration", trace.path) * kMs;
    job.priority = static_cast<int>(row.number_or("priority", 0));
    const std::string model = row.text("model_name");
    job.type = "muri:" + model;
    JobProfile p = muri_profile(model, non_negative(row, "iteration_time", trace.path),
                                non_negative(row, "resource_time_0", trace.path),
                                non_negative(row, "resource_time_1", trace.path),
                                non_negative(row, "resource_time_2", trace.path), 0);
    job.profile = p;
    job.line = row.line();
    trace.jobs.push_back(job);
  }
}

void read_alibaba(Trace& trace) {
  CsvReader csv(trace.path);
  for (CsvRow row; csv.next(row);) {
    const double gpus = row.number_or("gpu_request", 0);
    const double created = row.number_or("creation_time", -1);
    const double scheduled = row.number_or("scheduled_time", created);
    const double deleted = row.number_or("deletion_time", -1);
    if (gpus < 1 || created < 0 || deleted < 0 || deleted < scheduled) {
      ++trace.skipped;
      continue;
    }
    TraceJob job;
    job.gpus = positive_gpus(row, "gpu_request", trace.path);
    job.arrival_s = created;
    job.duration_s = deleted - std::max(created, scheduled);
    job.line = row.line();
    trace.jobs.push_back(job);
  }
}

void read_recmix(Trace& trace) {
  CsvReader csv(trace.path);
  for (CsvRow row; csv.next(row);) {
    TraceJob job;
    job.arrival_s = non_negative(row, "arrival_s", trace.path);
    job.duration_s = non_negative(row, "duration_s", trace.path);
    job.gpus = positive_gpus(row, "gpus", trace.path);
    if (row.has("type")) job.type = row.text("type");
    if (row.has("priority")) job.priority = static_cast<int>(row.number_or("priority", 0));
    if (row.has("slowdown_limit")) job.slowdown_limit = row.number_or("slowdown_limit", 0);
    if (row.has("memory_gib")) job.memory_bytes = non_negative(row, "memory_gib", trace.path) * 1024.0 * 1024.0 * 1024.0;
    job.line = row.line();
    trace.jobs.push_back(job);
  }
}

}  // namespace

Trace read_trace(const std::string& path, TraceFormat format) {
  Trace trace;
  trace.path = path;
  trace.format = format == TraceFormat::automatic ? detect(path) : format;
  switch (trace.format) {
    case TraceFormat::philly: read_philly(trace); break;
    case TraceFormat::gavel: read_gavel(trace); break;
    case TraceFormat::muri: read_muri(trace); break;
    case TraceFormat::alibaba: read_alibaba(trace); break;
    case TraceFormat::recmix: read_recmix(trace); break;
    case TraceFormat::automatic: break;
  }
  RECMIX_REQUIRE(!trace.jobs.empty(), DataError, path + ": no GPU jobs in the trace");
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
  const double first = trace.jobs.front().arrival_s;
  for (auto& j : trace.jobs) j.arrival_s -= first;
  return trace;
}

}  // namespace recmix::sched
