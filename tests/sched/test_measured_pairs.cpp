// Measured pairs from recmix run events (sched/measured_pairs.hpp) against hand-worked cases, the
// pair file's round trip, and the simulator's pair data made from it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "sched/measured_pairs.hpp"
#include "tests/sched/scratch_dir.hpp"

using namespace recmix;
using namespace recmix::sched;
namespace fs = std::filesystem;

namespace {

// A scratch folder of its own, removed at the end.
struct Scratch {
  test::ScratchDir scratch;
  const fs::path& dir = scratch.path;
  std::string run(const std::string& name, const std::string& events) const {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "events.jsonl") << events;
    return (dir / name).string();
  }
};

std::string sample(const std::string& job, double step_s, const std::string& partners, double dense_s = 0,
                   double busy = 0) {
  return "{\"event\":\"sample\",\"job\":\"" + job + "\",\"rank\":0,\"step_s\":" + std::to_string(step_s) +
         ",\"dense_s\":" + std::to_string(dense_s) + ",\"busy_share\":" + std::to_string(busy) +
         ",\"partners\":[" + partners + "]}\n";
}

}  // namespace

TEST(MeasuredPairs, TypesAloneAndBesideOneOther) {
  Scratch s;
  // small alone: 0.010 and 0.014 s (mean 0.012); beside big: 0.018 s -> slowdown 1.5.
  // big alone: 0.040 s; beside small.2 (type small): 0.050 s -> 1.25. A sample beside two jobs
  // and one without a step time are left out; a start event is not a sample.
  const std::string a = s.run("a", sample("small.1", 0.010, "", 0.005, 0.8) + sample("small.1", 0.014, "", 0.007, 0.6) +
                                       sample("small.1", 0.018, "\"big\"") + sample("big", 0.040, "") +
                                       sample("big", 0.090, "\"small.1\",\"small.2\"") +
                                       "{\"event\":\"start\",\"job\":\"big\"}\n" + sample("big", 0.0, ""));
  const std::string b = s.run("b", sample("big", 0.050, "\"small.2\""));
  const MeasuredPairs m = measure_pairs({a, b});
  ASSERT_EQ(m.types.size(), 2u);
  EXPECT_EQ(m.types[0].type, "big");
  EXPECT_DOUBLE_EQ(m.types[0].solo_step_s, 0.040);
  EXPECT_EQ(m.types[1].type, "small");
  EXPECT_DOUBLE_EQ(m.types[1].solo_step_s, 0.012);
  EXPECT_NEAR(m.types[1].dense_share, 0.5, 1e-9);  // 0.005/0.010 and 0.007/0.014
  EXPECT_NEAR(m.types[1].busy_share, 0.7, 1e-9);
  EXPECT_EQ(m.types[1].samples, 2);
  ASSERT_EQ(m.pairs.size(), 2u);
  EXPECT_EQ(m.pairs[0].type, "big");
  EXPECT_EQ(m.pairs[0].other, "small");
  EXPECT_NEAR(m.pairs[0].slowdown, 1.25, 1e-9);
  EXPECT_EQ(m.pairs[1].type, "small");
  EXPECT_EQ(m.pairs[1].other, "big");
  EXPECT_NEAR(m.pairs[1].slowdown, 1.5, 1e-9);

  // The pair file round-trips; as pair data, speeds are 1 / step time.
  std::ostringstream csv;
  write_pairs_csv(m, csv);
  const std::string file = (s.dir / "pairs.csv").string();
  std::ofstream(file) << csv.str();
  const MeasuredPairs back = read_pairs_csv(file);
  ASSERT_EQ(back.types.size(), 2u);
  ASSERT_EQ(back.pairs.size(), 2u);
  EXPECT_NEAR(back.pairs[1].slowdown, 1.5, 1e-9);
  EXPECT_NEAR(back.types[1].solo_step_s, 0.012, 1e-12);
  const PairDataset d = to_pair_dataset(back, "recmix");
  EXPECT_NEAR(d.solo.at("small").speed, 1 / 0.012, 1e-6);
  EXPECT_NEAR(d.solo.at("small").util[Resource::compute], 0.5, 1e-6);
  ASSERT_EQ(d.pairs.size(), 2u);
  EXPECT_EQ(d.pairs[0].type, "big");
  EXPECT_NEAR(d.pairs[0].slowdown, 1.25, 1e-9);
}

TEST(MeasuredPairs, ABeforeUnmeasuredTypeHasNoPairAndBadFilesAreNamed) {
  Scratch s;
  // lone was never alone: its co-located samples have no baseline.
  const MeasuredPairs m = measure_pairs({s.run("a", sample("lone", 0.02, "\"x\"") + sample("x", 0.01, ""))});
  ASSERT_EQ(m.types.size(), 1u);
  EXPECT_TRUE(m.pairs.empty());
  EXPECT_THROW(measure_pairs({(s.dir / "missing").string()}), IoError);
  const std::string bad = s.run("bad", "{\"event\":\"sample\"\n");
  try {
    measure_pairs({bad});
    FAIL() << "bad JSON accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("events.jsonl:1"), std::string::npos) << e.what();
  }
  const std::string file = (s.dir / "p.csv").string();
  std::ofstream(file) << "type,other,solo_step_s,colocated_step_s,slowdown,samples\nsmall,big,,0.2,1.5,3\n";
  EXPECT_THROW(read_pairs_csv(file), DataError);  // a pair without its type alone
  std::ofstream(file) << "type,other,solo_step_s,colocated_step_s,slowdown,samples\nsmall,,0,,1,3\n";
  EXPECT_THROW(read_pairs_csv(file), DataError);  // no step time
}

namespace {
std::string timed(const std::string& job, int rank, double t, double step_s) {
  return "{\"event\":\"sample\",\"job\":\"" + job + "\",\"rank\":" + std::to_string(rank) + ",\"t\":" +
         std::to_string(t) + ",\"step_s\":" + std::to_string(step_s) + ",\"partners\":[]}\n";
}
}  // namespace

// A job alone on its rank while another job samples on another rank (within 1.5 rounds) counts
// as beside a busy rank; alone on an idle node as alone. The "*" line round-trips and becomes the
// pair data's busy-neighbour slowdown; a two-rank job's own samples on its other rank, or another
// job sharing one of its ranks, do not make it look beside a busy rank; a type measured only beside
// busy ranks takes those as its baseline.
TEST(MeasuredPairs, AloneBesideABusyRankIsItsOwnLine) {
  Scratch s;
  // Round 1 s: small.1 alone at t = 1, 2 (0.010 s); small.1 on rank 0 and other.1 on rank 1 at
  // t = 10, 11 (0.015 s: slowdown 1.5); wide.1 on ranks 0 and 1 together at t = 20, part.1 on
  // rank 0 beside it (wide.1's sample on rank 1 stays alone); only.1 at 30 beside other.2 at 30.5.
  const std::string a =
      s.run("a", "{\"event\":\"run_start\",\"round_interval_s\":1.0}\n" + timed("small.1", 0, 1, 0.010) +
                     timed("small.1", 0, 2, 0.010) + timed("small.1", 0, 10, 0.015) + timed("other.1", 1, 10.2, 0.02) +
                     timed("small.1", 0, 11, 0.015) + timed("other.1", 1, 11.2, 0.02) + timed("wide.1", 0, 20, 0.03) +
                     timed("wide.1", 1, 20, 0.03) + timed("part.1", 0, 20.1, 0.02) + timed("only.1", 0, 30, 0.05) + timed("other.2", 1, 30.5, 0.02));
  const MeasuredPairs m = measure_pairs({a});
  std::map<std::string, double> solo;
  for (const auto& t : m.types) solo[t.type] = t.solo_step_s;
  EXPECT_DOUBLE_EQ(solo.at("small"), 0.010);
  EXPECT_DOUBLE_EQ(solo.at("wide"), 0.03);
  EXPECT_DOUBLE_EQ(solo.at("only"), 0.05);  // never on an idle node: its busy-neighbour samples
  ASSERT_EQ(m.neighbours.size(), 1u);
  EXPECT_EQ(m.neighbours[0].type, "small");
  EXPECT_NEAR(m.neighbours[0].slowdown, 1.5, 1e-9);
  EXPECT_EQ(m.neighbours[0].samples, 2);

  std::ostringstream csv;
  write_pairs_csv(m, csv);
  EXPECT_NE(csv.str().find("small,*,"), std::string::npos);
  const std::string file = (s.dir / "pairs.csv").string();
  std::ofstream(file) << csv.str();
  const MeasuredPairs back = read_pairs_csv(file);
  ASSERT_EQ(back.neighbours.size(), 1u);
  EXPECT_NEAR(back.neighbours[0].slowdown, 1.5, 1e-9);
  EXPECT_NEAR(to_pair_dataset(back, "recmix").busy_neighbour.at("small"), 1.5, 1e-9);
  // A "*" line for a type with no line alone is refused, naming the type.
  std::ofstream(file) << "type,other,solo_step_s,colocated_step_s,slowdown,samples\nghost,*,0.01,0.02,2,3\n";
  try {
    read_pairs_csv(file);
    FAIL() << "accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'ghost' alone"), std::string::npos) << e.what();
  }
}
