// The reader of a run's events.jsonl: which lines become events (with their line numbers), what
// is skipped and why in the tolerant mode, the error that names file and line in the strict one,
// and the replay reading through it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "sched/run_events.hpp"
#include "sched/sim/replay.hpp"
#include "tests/sched/scratch_dir.hpp"

namespace recmix::sched {
namespace {

// Lines 2 and 6 are blank; 4, 7 and 9 are JSON but not events (no "event", not an object, a "t"
// that is a string); 5 is an event whose "rank" is not a number; 10 is cut short.
const std::string kMixedLog =
    R"({"event":"run_start","ranks":2,"t":0})" "\n"
    "\n"
    R"({"event":"submitted","job":"a","ranks":1,"t":0.5})" "\n"
    R"({"job":"a","t":1})" "\n"
    R"({"event":"sample","job":"a","rank":"one","t":2})" "\n"
    " \t\r\n"
    "[1,2]\n"
    R"({"event":"arrival","job":7,"t":3})" "\n"
    R"({"event":"finished","job":"a","t":"4"})" "\n"
    R"({"event":"finished","job":"a","t":5)";

struct Seen {
  std::int64_t line;
  std::string kind;
  double t;
  std::string job;
};

// A handler that keeps what it saw; a sample's "rank" must be an int (it throws otherwise, as a
// caller's field access does).
RunEventHandler keep(std::vector<Seen>& seen) {
  return [&seen](const RunEvent& e) {
    if (e.kind == "sample") (void)e.fields.at("rank").get<int>();
    seen.push_back({e.line, e.kind, e.t, e.job});
    return AfterEvent::read_on;
  };
}

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "no DataError";
}

TEST(RunEvents, SkipModeHandsOnTheEventsAndNotesTheRest) {
  std::istringstream in(kMixedLog);
  std::vector<Seen> seen;
  const EventLines read = read_event_lines(in, "run/events.jsonl", BadLines::skip, keep(seen));
  EXPECT_EQ(read.lines, 10);
  EXPECT_EQ(read.skipped, 5);  // lines 4, 5, 7, 9, 10; not the blank 2 and 6
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].line, 1);
  EXPECT_EQ(seen[0].kind, "run_start");
  EXPECT_EQ(seen[0].t, 0);
  EXPECT_EQ(seen[0].job, "");
  EXPECT_EQ(seen[1].line, 3);
  EXPECT_EQ(seen[1].kind, "submitted");
  EXPECT_EQ(seen[1].t, 0.5);
  EXPECT_EQ(seen[1].job, "a");
  EXPECT_EQ(seen[2].line, 8);
  EXPECT_EQ(seen[2].kind, "arrival");
  EXPECT_EQ(seen[2].t, 3);
  EXPECT_EQ(seen[2].job, "");  // "job" is a number
  ASSERT_EQ(read.reasons.size(), EventLines::kReasonsKept);
  EXPECT_EQ(read.reasons[0], "line 4: not an event (no \"event\" or \"t\")");
  EXPECT_EQ(read.reasons[1].rfind("line 5: a field of the wrong type ([json.exception.type_error", 0), 0u)
      << read.reasons[1];
  EXPECT_EQ(read.reasons[1].back(), ')');
  EXPECT_EQ(read.reasons[2], "line 7: not an event (no \"event\" or \"t\")");
}

TEST(RunEvents, SkipModeNotesACutLine) {
  std::istringstream in(R"({"event":"run_start","t":0})" "\n" R"({"event":"run_e)");
  std::vector<Seen> seen;
  const EventLines read = read_event_lines(in, "events.jsonl", BadLines::skip, keep(seen));
  EXPECT_EQ(read.lines, 2);
  EXPECT_EQ(read.skipped, 1);
  ASSERT_EQ(read.reasons.size(), 1u);
  EXPECT_EQ(read.reasons[0], "line 2: not JSON (truncated?)");
  EXPECT_EQ(seen.size(), 1u);
}

TEST(RunEvents, FailModeNamesFileAndLine) {
  std::vector<Seen> seen;
  // The first bad line of the mixed log is an object without "event".
  std::istringstream mixed(kMixedLog);
  EXPECT_EQ(error_text([&] { read_event_lines(mixed, "run/events.jsonl", BadLines::fail, keep(seen)); }),
            "run/events.jsonl:4: not an event (no \"event\" or \"t\")");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].line, 3);
  // Blank lines (2 and 3) are skipped; line 5 is cut short.
  seen.clear();
  std::istringstream cut(R"({"event":"run_start","t":0})" "\n\n  \n" R"({"event":"arrival","job":"a","t":1})" "\n"
                         R"({"event":"start","job":"a","t":2)");
  const std::string text = error_text([&] { read_event_lines(cut, "run/events.jsonl", BadLines::fail, keep(seen)); });
  EXPECT_EQ(text.rfind("run/events.jsonl:5: not JSON ([json.exception.parse_error", 0), 0u) << text;
  EXPECT_EQ(text.back(), ')');
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].line, 4);
  // A handler's own exception goes up as it is.
  std::istringstream wrong_type(R"({"event":"sample","job":"a","rank":"one","t":2})");
  EXPECT_THROW(read_event_lines(wrong_type, "events.jsonl", BadLines::fail, keep(seen)), nlohmann::json::type_error);
}

TEST(RunEvents, AHandlerCanStopTheReading) {
  std::istringstream in(R"({"event":"run_start","t":0})" "\n" R"({"event":"run_start","t":9})" "\nnot JSON\n");
  int handled = 0;
  const EventLines read = read_event_lines(in, "events.jsonl", BadLines::fail, [&](const RunEvent& e) {
    ++handled;
    return e.t > 0 ? AfterEvent::stop : AfterEvent::read_on;
  });
  EXPECT_EQ(handled, 2);
  EXPECT_EQ(read.lines, 2);  // the third line is never read
}

// A stream whose source fails after its text, as a disk that errors does.
class FailingSource : public std::streambuf {
 public:
  explicit FailingSource(std::string text) : text_(std::move(text)) {}

 protected:
  int_type underflow() override {
    if (given_) throw std::runtime_error("read failed");
    given_ = true;
    setg(text_.data(), text_.data(), text_.data() + text_.size());
    return traits_type::to_int_type(text_[0]);
  }

 private:
  std::string text_;
  bool given_ = false;
};

TEST(RunEvents, AReadErrorIsAnIoError) {
  FailingSource source(R"({"event":"run_start","t":0})" "\n" R"({"event":"arrival","job":"a","t":1})" "\n");
  std::istream in(&source);
  int handled = 0;
  try {
    read_event_lines(in, "run/events.jsonl", BadLines::skip, [&](const RunEvent&) {
      ++handled;
      return AfterEvent::read_on;
    });
    FAIL() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "run/events.jsonl: read error after line 2");
  }
  EXPECT_EQ(handled, 2);
}

// The replay reads strictly: a cut line is an error naming file and line; a second run_start
// (a resumed run in the same directory) ends its reading before any later line. run_start's
// wall clock (unix_s), which the report uses to place a resumed run's parts, changes nothing here.
TEST(RunEvents, ReplayReadsStrictlyAndStopsAtTheNextRun) {
  const test::ScratchDir scratch;
  const std::string path = (scratch.path / "events.jsonl").string();
  const std::string run_start =
      R"({"event":"run_start","ranks":2,"memory_capacity_bytes":1024,"colocation_limit":2,"policy":"fifo",)"
      R"("unix_s":1790000000.25,"t":0})";
  const std::string resumed =
      R"({"event":"run_start","ranks":2,"memory_capacity_bytes":1024,"colocation_limit":2,"policy":"fifo",)"
      R"("resume":true,"unix_s":1790000030.5,"t":0})";
  const std::string submitted =
      R"({"event":"submitted","id":0,"job":"a","ranks":1,"arrival_s":0,"estimate_bytes":100,)"
      R"("profile":{"type":"dlrm","solo_step_s":0.01,"util":[0.5,0.2,0.1]},"t":0.1})";
  const std::string start = R"({"event":"start","job":"a","ranks":[0],"t":0.2})";
  std::ofstream(path) << run_start << "\n\n" << submitted << "\n" << start << "\n" << resumed << "\n{\"event\":\"fini";
  const RunReplay run = read_run_events(path);
  EXPECT_EQ(run.cluster.gpus_per_node, 2);
  ASSERT_EQ(run.jobs.size(), 1u);
  EXPECT_EQ(run.jobs[0].name, "a");
  ASSERT_EQ(run.live.size(), 1u);
  EXPECT_EQ(run.live[0].time_s, 0.2);

  std::ofstream(path) << run_start << "\n\n" << submitted << "\n{\"event\":\"start\",\"jo";
  const std::string text = error_text([&] { read_run_events(path); });
  EXPECT_EQ(text.rfind(path + ":4: not JSON (", 0), 0u) << text;
}

// The live service saw job a arrive 50 ms late and took 10 ms more to start it; a's run of 0.45 s
// ended at 0.51 s, 5 ms after b arrived, so b went to rank 1. A replay that queued a at its
// arrival_s and ended it at its start plus its work would have freed rank 0 at 0.45 s and put b
// there: it meets the events at the times the live run logged them.
TEST(RunEvents, ReplayMeetsTheEventsWhenTheLiveRunDid) {
  const test::ScratchDir scratch;
  const std::string path = (scratch.path / "events.jsonl").string();
  const auto submitted = [](int id, const char* name, double arrival) {
    return fmt::format(R"({{"event":"submitted","id":{},"job":"{}","ranks":1,"arrival_s":{},"estimate_bytes":100,)"
                       R"("profile":{{"type":"dlrm","solo_step_s":0.01,"util":[0.5,0.2,0.1]}},"t":0.001}})",
                       id, name, arrival);
  };
  std::ofstream(path)
      << R"({"event":"run_start","ranks":2,"memory_capacity_bytes":1024,"colocation_limit":1,"policy":"fifo","t":0})"
      << "\n" << submitted(0, "a", 0) << "\n" << submitted(1, "b", 0.505) << "\n"
      << R"({"event":"arrival","job":"a","t":0.05})" "\n"
      << R"({"event":"start","job":"a","ranks":[0],"t":0.06})" "\n"
      << R"({"event":"arrival","job":"b","t":0.505})" "\n"
      << R"({"event":"start","job":"b","ranks":[1],"t":0.5052})" "\n"
      << R"({"event":"finished","job":"a","ranks":[0],"t":0.51})" "\n"
      << R"({"event":"finished","job":"b","ranks":[1],"t":0.6})" "\n";
  const RunReplay run = read_run_events(path);
  ASSERT_EQ(run.jobs.size(), 2u);
  EXPECT_NEAR(run.jobs[0].work_s, 0.45, 1e-12);
  const ReplayResult result = replay_run(run);
  EXPECT_TRUE(result.same) << describe(run, result);
  ASSERT_EQ(result.simulated.size(), 2u);
  EXPECT_EQ(result.simulated[0].time_s, 0.05);
  EXPECT_EQ(result.simulated[1].decision.gpus, std::vector<int>{1});
}

}  // namespace
}  // namespace recmix::sched
