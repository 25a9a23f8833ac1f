#include "runtime/cli/run_state.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.hpp"

namespace recmix::cli {
namespace {

// A process that exited, reaped or not yet (a zombie: kill(pid, 0) still finds it).
bool process_gone(long pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;  // EPERM: it lives, as another user's
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// Why a run whose status.json says "running" is dead, or "" when nothing shows it.
std::string why_stale(const nlohmann::json& heartbeat) {
  if (!heartbeat.is_object()) return "";  // written before heartbeats: nothing to tell by
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double age = now - heartbeat.value("unix_s", now);
  const double interval = heartbeat.value("interval_s", 1.0);
  const double limit = std::max(kStaleRounds * interval, kStaleFloorSeconds);
  if (age > limit)
    return fmt::format("no heartbeat for {:.0f} s (one every {:g} s; stale after {:g} s)", age, interval, limit);
  // On the scheduler's own host a process that is gone is known at once.
  const long pid = heartbeat.value("pid", 0L);
  const std::string host = heartbeat.value("host", std::string());
  if (pid > 0 && host == this_host() && process_gone(pid))
    return fmt::format("its scheduler (process {} on {}) is gone", pid, host);
  return "";
}

}  // namespace

RunState read_run_state(const std::string& run_dir) {
  const std::string path = run_dir + "/status.json";
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("'{}' is not a recmix run directory (no readable status.json)", run_dir));
  RunState out;
  try {
    out.status = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(fmt::format("{}: not JSON ({})", path, e.what()));
  }
  // status.json from before run states: only "finished" tells.
  out.state = out.status.value("state", out.status.value("finished", false) ? std::string("finished") : "running");
  if (out.state == "running") {
    out.why = why_stale(out.status.value("heartbeat", nlohmann::json()));
    if (!out.why.empty()) out.state = "stale";
  }
  return out;
}

void print_run_status(const std::string& run_dir) {
  const RunState rs = read_run_state(run_dir);
  const auto& st = rs.status;
  std::string state = rs.state;
  if (rs.state == "stale") state += " (" + rs.why + "; --resume continues it)";
  if (rs.state == "stopped") state += " (a clean stop; --resume continues it)";
  std::printf("run %s: %s, %d rank(s), policy %s, at %.1f s\n", run_dir.c_str(), state.c_str(), st.value("ranks", 0),
              st.value("policy", std::string("?")).c_str(), st.value("time_s", 0.0));
  std::printf("%-18s %-9s %-8s %14s %8s  %s\n", "job", "state", "ranks", "progress", "ETA", "error");
  for (const auto& j : st.value("jobs", nlohmann::json::array())) {
    const std::string ranks = fmt::format("{}", fmt::join(j.value("ranks", std::vector<int>{}), ","));
    const auto step = j.value("step", std::int64_t{0}), total = j.value("total_steps", std::int64_t{0});
    // An ETA only while the job runs: a stale run's jobs do not progress.
    const std::string eta = j.contains("eta_s") && rs.state == "running"
                                ? fmt::format("{:.0f}s", j["eta_s"].get<double>()) : "-";
    std::string note = j.value("error", std::string());
    if (j.contains("stalled_s") && j["stalled_s"].is_number() && rs.state == "running")
      note = fmt::format("no progress for {:.0f} s", j["stalled_s"].get<double>());
    std::printf("%-18s %-9s %-8s %6lld/%-7lld %8s  %s\n", j.value("name", std::string("?")).c_str(),
                j.value("state", std::string("?")).c_str(), ranks.empty() ? "-" : ranks.c_str(),
                static_cast<long long>(step), static_cast<long long>(total), eta.c_str(), note.c_str());
  }
  if (const std::string refused = st.value("spool_refused", std::string()); !refused.empty())
    std::printf("spool refused: %s; the run takes no more submissions\n", refused.c_str());
  for (const auto& r : st.value("rejected_submissions", nlohmann::json::array()))
    std::printf("rejected submission %s: %s\n", r.value("file", std::string("?")).c_str(),
                r.value("reason", std::string()).c_str());
}

}  // namespace recmix::cli
