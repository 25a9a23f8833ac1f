// The jobs file of `recmix run`: [[job]] tables, include, [scheduler], and one clear error naming
// the file, the job and the key for each kind of mistake.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "runtime/run/job_file.hpp"
#include "runtime/run/job_runner.hpp"
#include "sched/machine_model.hpp"

using namespace recmix;
using namespace recmix::runtime;
namespace fs = std::filesystem;

namespace {

std::string config_error(const std::string& text, const std::string& base = "/base") {
  try {
    parse_job_file(text, "jobs.toml", base);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return "";
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("recmix-jobfile-" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return (path_ / name).string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

TEST(JobFile, JobsWithRunKeysAndScheduler) {
  auto f = parse_job_file(R"(
[scheduler]
policy = "exclusive-fifo"
round_interval_s = 0.5
colocation_limit = 3
memory_capacity = "2GiB"
slowdown_limit = 1.3
cores_per_rank = 4
memory_headroom = 2.0
stuck_timeout_s = 7.5
las_threshold_s = 60
las_lease_s = 5

[[job]]
name = "a"
ranks = 2
priority = 5
arrival = 1.5
data = { train = "a.h5" }
train = { batch_size = 64, steps = 10 }

[[job]]
name = "b"
[job.data]
train = "b.h5"
[job.model]
embedding_dim = 8
bottom_mlp = [8]
)",
                          "jobs.toml", "/base");
  ASSERT_EQ(f.jobs.size(), 2u);
  EXPECT_EQ(f.jobs[0].spec.name, "a");
  EXPECT_EQ(f.jobs[0].ranks, 2);
  EXPECT_EQ(f.jobs[0].priority, 5);
  EXPECT_DOUBLE_EQ(f.jobs[0].arrival_s, 1.5);
  EXPECT_EQ(f.jobs[0].spec.train.batch_size, 64);
  EXPECT_EQ(f.jobs[0].spec.data.train, std::vector<std::string>{"/base/a.h5"});
  EXPECT_EQ(f.jobs[1].ranks, 1);  // defaults
  EXPECT_DOUBLE_EQ(f.jobs[1].arrival_s, 0.0);
  EXPECT_EQ(f.jobs[1].spec.model.embedding_dim, 8);
  EXPECT_EQ(f.scheduler.policy, "exclusive-fifo");
  EXPECT_EQ(sched_policy_name(f.scheduler.policy), "fifo");
  EXPECT_DOUBLE_EQ(f.scheduler.round_interval_s, 0.5);
  EXPECT_EQ(f.scheduler.colocation_limit, 3);
  EXPECT_EQ(f.scheduler.memory_capacity, 2ull << 30);
  EXPECT_DOUBLE_EQ(f.scheduler.slowdown_limit, 1.3);
  EXPECT_EQ(f.scheduler.cores_per_rank, 4);
  EXPECT_DOUBLE_EQ(f.scheduler.memory_headroom, 2.0);
  EXPECT_DOUBLE_EQ(f.scheduler.stuck_timeout_s, 7.5);
  EXPECT_DOUBLE_EQ(f.scheduler.las_threshold_s, 60);
  EXPECT_DOUBLE_EQ(f.scheduler.las_lease_s, 5);
  // The text each executor receives parses to the same spec, without the run's keys.
  auto again = parse_job_spec(f.jobs[0].spec_text, "again", "/base");
  EXPECT_EQ(again.train.steps, 10);
  EXPECT_EQ(f.jobs[0].spec_text.find("ranks"), std::string::npos);
}

TEST(JobFile, IncludesJobSpecsAndJobFilesRelativeToTheirFolder) {
  TempDir dir;
  fs::create_directories(dir.path() / "sub");
  dir.write("sub/one.toml", "name = \"one\"\nranks = 3\n[data]\ntrain = \"one.h5\"\n");
  dir.write("sub/more.toml", "[[job]]\nname = \"two\"\ndata = { train = \"two.h5\" }\n");
  const auto top = dir.write("jobs.toml",
                             "include = [\"sub/one.toml\", \"sub/more.toml\"]\n"
                             "[[job]]\nname = \"zero\"\ndata = { train = \"zero.h5\" }\n");
  auto f = load_job_file(top);
  ASSERT_EQ(f.jobs.size(), 3u);
  EXPECT_EQ(f.jobs[0].spec.name, "zero");  // the file's own jobs first, then the includes in order
  EXPECT_EQ(f.jobs[1].spec.name, "one");
  EXPECT_EQ(f.jobs[1].ranks, 3);
  EXPECT_EQ(f.jobs[1].spec.data.train.front(), (dir.path() / "sub" / "one.h5").lexically_normal().string());
  EXPECT_EQ(f.jobs[2].spec.name, "two");
  EXPECT_EQ(f.jobs[2].spec.data.train.front(), (dir.path() / "sub" / "two.h5").lexically_normal().string());
}

TEST(JobFile, EachMistakeIsOneErrorNamingTheCulprit) {
  EXPECT_NE(config_error("[[job]]\nname = \"a\"\ndata = { train = \"a.h5\" }\ntrain = { batch_sise = 4 }\n")
                .find("jobs.toml, [[job]] 1 ('a'): unknown key 'train.batch_sise'"),
            std::string::npos);
  EXPECT_NE(config_error("[[job]]\ndata = { train = \"a.h5\" }\n").find("[[job]] 1: every job needs a 'name'"),
            std::string::npos);
  EXPECT_NE(config_error("[[job]]\nname = \"a\"\nranks = 0\ndata = { train = \"a.h5\" }\n").find("'ranks' must be between"),
            std::string::npos);
  EXPECT_NE(config_error("[[job]]\nname = \"a\"\narrival = \"soon\"\ndata = { train = \"a.h5\" }\n").find("'arrival'"),
            std::string::npos);
  const std::string twice = "[[job]]\nname = \"a\"\ndata = { train = \"a.h5\" }\n";
  EXPECT_NE(config_error(twice + twice).find("a job named 'a' exists already"), std::string::npos);
  EXPECT_NE(config_error(twice + "[scheduler]\npolicy = \"best\"\n").find("unknown policy 'best'"), std::string::npos);
  EXPECT_NE(config_error(twice + "[scheduler]\ncolocation_limit = 0\n").find("'scheduler.colocation_limit'"),
            std::string::npos);
  EXPECT_NE(config_error(twice + "[scheduler]\nround_robin = 1\n").find("'scheduler.round_robin' is an unknown key"),
            std::string::npos);
  EXPECT_NE(config_error("name = \"a\"\n").find("'name' is an unknown key of a jobs file"), std::string::npos);
  EXPECT_NE(config_error("").find("no jobs"), std::string::npos);
  EXPECT_NE(config_error("include = [\"missing.toml\"]\n").find("included file '/base/missing.toml' does not exist"),
            std::string::npos);
  EXPECT_NE(config_error("[[job]\n").find("jobs.toml:1"), std::string::npos);  // TOML syntax: file and line
}

TEST(JobFile, CheckRunJobNamesMissingDataAndRankCounts) {
  TempDir dir;
  const auto data = dir.write("train.h5", "x");
  auto job = parse_run_job("name = \"j\"\nranks = 4\n[data]\ntrain = \"train.h5\"\n", "j.toml", dir.path().string());
  EXPECT_NO_THROW(check_run_job(job, 4));
  try {
    check_run_job(job, 2);
    ADD_FAILURE() << "4 ranks accepted on a run of 2";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("asks for 4 ranks, the run has 2"), std::string::npos) << e.what();
  }
  auto missing = parse_run_job("name = \"m\"\n[data]\ntrain = \"nowhere.h5\"\n", "m.toml", dir.path().string());
  try {
    check_run_job(missing, 2);
    ADD_FAILURE() << "a missing data file accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere.h5' does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_run_job("[[job]]\nname = \"x\"\n", "x.toml", ""), ConfigError);  // a jobs file, not a job
}

// A job's priority travels from its job file to the rank that runs it: in the start message
// (JobPlacement's JSON), then as device.priority, the priority of the job's streams.
TEST(JobFile, PriorityReachesThePlacementAndTheStreams) {
  auto job = parse_run_job("name = \"p\"\npriority = 3\n[data]\ntrain = \"t.h5\"\n", "p.toml", "");
  EXPECT_EQ(job.priority, 3);
  recmix::runtime::run::JobPlacement p;
  p.priority = job.priority;
  const auto back = recmix::runtime::run::JobPlacement::from_json(p.to_json());
  EXPECT_EQ(back.priority, 3);
  auto backend = recmix::device::make_backend(recmix::device::BackendKind::cpu_strict);
  EXPECT_EQ(backend->create_stream()->priority(), 0);
  backend->set_stream_priority(back.priority);
  EXPECT_EQ(backend->create_stream()->priority(), 3);
}

// [cluster] in a jobs file sets the network between the live nodes: a machine preset of the
// simulator's, then the keys given over it; the nodes themselves are the world's.
TEST(JobFile, ClusterTableSetsTheNetworkBetweenTheNodes) {
  const std::string job = "[[job]]\nname = \"a\"\ndata = { train = \"a.h5\" }\n";
  const JobFile none = parse_job_file(job, "jobs.toml", "/base");
  EXPECT_TRUE(none.network.machine.empty());
  EXPECT_EQ(none.network.intra_node_gbps, 0);
  const JobFile preset = parse_job_file(job + "[cluster]\nmachine = \"h100-dgx\"\n", "jobs.toml", "/base");
  EXPECT_EQ(preset.network.machine, "h100-dgx");
  EXPECT_NEAR(preset.network.intra_node_gbps, sched::machine_model("h100-dgx").intra_node_bandwidth / 1e9, 1e-9);
  EXPECT_NEAR(preset.network.inter_node_gbps, sched::machine_model("h100-dgx").network_bandwidth / 1e9, 1e-9);
  const JobFile over =
      parse_job_file(job + "[cluster]\nmachine = \"h100-dgx\"\ninter_node_gbps = 12.5\n", "jobs.toml", "/base");
  EXPECT_EQ(over.network.inter_node_gbps, 12.5);
  EXPECT_NEAR(over.network.intra_node_gbps, preset.network.intra_node_gbps, 1e-9);
  EXPECT_NE(config_error(job + "[cluster]\nnodes = 4\n").find("'cluster.nodes' is not a key of a live run's [cluster]"),
            std::string::npos);
  EXPECT_NE(config_error(job + "[cluster]\ninter_node_gbps = \"fast\"\n").find("cluster.inter_node_gbps must be a number"),
            std::string::npos);
}
