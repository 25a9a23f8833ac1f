// Trace readers: the real files parse with the documented counts; malformed input gives one
// DataError naming the file and line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "sched/sim/cluster_config.hpp"
#include "sched/sim/trace_reader.hpp"
#include "tests/sched/scratch_dir.hpp"

namespace recmix::sched {
namespace {

std::string traces_dir() {
  const char* shared = std::getenv("RECMIX_SHARED_DIR");
  return std::string(shared ? shared : "../shared") + "/traces";
}

// Files in a scratch folder of this test program's own, removed when it exits.
std::string write_temp(const std::string& name, const std::string& text) {
  static const test::ScratchDir scratch;
  const auto path = scratch.path / ("recmix_sched_" + name);
  std::ofstream(path) << text;
  return path.string();
}

void expect_error_mentions(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TraceReader, RealTracesParse) {
  const std::string dir = traces_dir();
  if (!std::filesystem::exists(dir + "/philly_jobs.csv")) GTEST_SKIP() << "no traces in " << dir;
  const Trace philly = read_trace(dir + "/philly_jobs.csv");
  EXPECT_EQ(philly.format, TraceFormat::philly);
  EXPECT_EQ(philly.jobs.size(), 82247u);
  EXPECT_EQ(philly.jobs.front().arrival_s, 0.0);
  const Trace gavel = read_trace(dir + "/gavel_msr_seed0.trace");
  EXPECT_EQ(gavel.format, TraceFormat::gavel);
  EXPECT_EQ(gavel.jobs.size(), 2000u);
  EXPECT_GT(gavel.jobs.back().steps, 0);
  const Trace muri = read_trace(dir + "/muri_trace1.csv");
  EXPECT_EQ(muri.jobs.size(), 1494u);
  ASSERT_TRUE(muri.jobs.front().profile.has_value());
  // Job 0 of trace 1: dqn, iteration 490, CPU 446, GPU 8, network 0.
  EXPECT_NEAR(muri.jobs.front().profile->util[Resource::host_cpu], 446.0 / 490.0, 1e-12);
  const Trace alibaba = read_trace(dir + "/alibaba_dlrm_2025.csv");
  EXPECT_EQ(alibaba.jobs.size(), 3218u);  // GPU instances with creation and deletion times
  EXPECT_EQ(alibaba.skipped, 23871u - 3218u);
}

TEST(TraceReader, OwnCsvFormat) {
  const auto path = write_temp("own.csv", "arrival_s,duration_s,gpus,type\n10,100,1,dlrm-small\n0,50,2,\n");
  const Trace t = read_trace(path);
  EXPECT_EQ(t.format, TraceFormat::recmix);
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].gpus, 2);  // sorted by arrival
  EXPECT_EQ(t.jobs[1].type, "dlrm-small");
  EXPECT_EQ(t.jobs[1].arrival_s, 10.0);
}

TEST(TraceReader, BadRowsNameFileAndLine) {
  const auto bad_number = write_temp("bad1.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
                                                 "2017-10-09 07:01:55,66.0,1,66.0,a\n"
                                                 "2017-10-09 07:01:56,abc,1,66.0,a\n");
  expect_error_mentions([&] { read_trace(bad_number); }, "bad1.csv:3");
  const auto zero_gpus = write_temp("bad2.csv", "arrival_s,duration_s,gpus\n0,10,0\n");
  expect_error_mentions([&] { read_trace(zero_gpus); }, "bad2.csv:2");
  const auto bad_time = write_temp("bad3.csv", "timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,1,1,1,a\n");
  expect_error_mentions([&] { read_trace(bad_time); }, "bad3.csv:2");
  const auto unknown = write_temp("bad4.csv", "a,b\n1,2\n");
  expect_error_mentions([&] { read_trace(unknown); }, "unknown trace format");
  expect_error_mentions([&] { read_trace("/nonexistent/trace.csv"); }, "/nonexistent/trace.csv");
  EXPECT_THROW(parse_trace_format("slurm"), ConfigError);
}

TEST(ClusterConfig, TomlOverridesMachineDefaults) {
  const auto path = write_temp("cluster.toml", "[cluster]\nmachine = \"v100-dgx1\"\nnodes = 4\ngpu_memory_gib = 16\n");
  const ClusterSpec s = load_cluster_spec(path, cluster_spec_for(machine_model("a100-dgx"), 1));
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(s.gpu_memory_bytes, 16.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(s.intra_node_bandwidth, 150e9);
  const auto bad = write_temp("cluster_bad.toml", "[cluster]\nnodez = 4\n");
  expect_error_mentions([&] { load_cluster_spec(bad, ClusterSpec{}); }, "cluster.nodez");
}

}  // namespace
}  // namespace recmix::sched
