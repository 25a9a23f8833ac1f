#pragma once
// The one reader of a `recmix run` directory's events.jsonl (docs/run.md): its lines, one at a
// time, each event (a JSON object with a string "event" and a number "t") handed to a handler.
// The replay wants a bad line to be an error; recmix report wants it skipped and noted, since a
// run that is cut short leaves its last line half written.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace recmix::sched {

// One line of events.jsonl that is an event.
struct RunEvent {
  std::int64_t line = 0;  // in the file, from 1
  std::string kind;       // "event"
  double t = 0;           // "t": seconds since the run started
  std::string job;        // "job", empty where absent or not a string
  nlohmann::json fields;  // the whole object
};

// What becomes of a line that is not JSON, or JSON but not an event. Blank lines are always skipped.
enum class BadLines {
  // DataError "<path>:<line>: not JSON (...)" or "<path>:<line>: not an event (...)"; an
  // exception from the handler goes up as it is.
  fail,
  // Counted, its reason noted, and the reading goes on; so is a line whose handler throws
  // nlohmann::json::exception ("a field of the wrong type (...)").
  skip,
};

// A handler's answer: read the next line, or stop here (the rest of the file is not read).
enum class AfterEvent { read_on, stop };

using RunEventHandler = std::function<AfterEvent(const RunEvent&)>;

struct EventLines {
  static constexpr std::size_t kReasonsKept = 3;
  std::int64_t lines = 0;    // lines read, blank ones included
  std::int64_t skipped = 0;  // BadLines::skip: lines that gave no event, or whose handler threw
  std::vector<std::string> reasons;  // the first kReasonsKept skips: "line 13: not JSON (truncated?)"
};

// Reads `in` to its end (or until the handler says stop); `path` names the file in messages.
// IoError "<path>: read error after line <n>" when the stream fails other than at its end.
EventLines read_event_lines(std::istream& in, const std::string& path, BadLines bad, const RunEventHandler& handler);

}  // namespace recmix::sched
