#include "sched/run_events.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace recmix::sched {
namespace {

constexpr const char* kNotAnEvent = "not an event (no \"event\" or \"t\")";

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

bool is_event(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  const auto kind = j.find("event"), t = j.find("t");
  return kind != j.end() && kind->is_string() && t != j.end() && t->is_number();
}

// Counts a line that gave no event and keeps the first few reasons.
void skip(EventLines& read, const std::string& why) {
  ++read.skipped;
  if (read.reasons.size() < EventLines::kReasonsKept)
    read.reasons.push_back(fmt::format("line {}: {}", read.lines, why));
}

}  // namespace

EventLines read_event_lines(std::istream& in, const std::string& path, BadLines bad, const RunEventHandler& handler) {
  EventLines read;
  std::string line;
  while (std::getline(in, line)) {
    ++read.lines;
    if (is_blank(line)) continue;
    RunEvent e;
    e.line = read.lines;
    try {
      e.fields = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& x) {
      if (bad == BadLines::fail) throw DataError(fmt::format("{}:{}: not JSON ({})", path, read.lines, x.what()));
      skip(read, "not JSON (truncated?)");
      continue;
    }
    if (!is_event(e.fields)) {
      if (bad == BadLines::fail) throw DataError(fmt::format("{}:{}: {}", path, read.lines, kNotAnEvent));
      skip(read, kNotAnEvent);
      continue;
    }
    e.kind = e.fields["event"].get<std::string>();
    e.t = e.fields["t"].get<double>();
    const auto job = e.fields.find("job");
    if (job != e.fields.end() && job->is_string()) e.job = job->get<std::string>();
    if (bad == BadLines::fail) {
      if (handler(e) == AfterEvent::stop) break;
      continue;
    }
    try {  // a field of another type than the event kind documents: the line is skipped
      if (handler(e) == AfterEvent::stop) break;
    } catch (const nlohmann::json::exception& x) {
      skip(read, fmt::format("a field of the wrong type ({})", x.what()));
    }
  }
  if (in.bad()) throw IoError(fmt::format("{}: read error after line {}", path, read.lines));
  return read;
}

}  // namespace recmix::sched
