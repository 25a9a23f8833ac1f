// Multi-GPU jobs of a Gavel-format trace: a k-GPU job runs its steps at its measured k-GPU
// throughput, or at the scaling rule's (counted as a fallback), and a spread placement costs its
// measured consolidated / unconsolidated slowdown, or the bandwidth model where none is measured.
// FifoRun times below are worked out by hand from the tiny throughputs file.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.hpp"
#include "sched/multi_gpu_scaling.hpp"
#include "sched/sim/report.hpp"
#include "sched/sim/simulator.hpp"
#include "sched/sim/workload.hpp"
#include "tests/sched/scratch_dir.hpp"

namespace recmix::sched {
namespace {

// Type A: 2 steps/s on 1 GPU, 3 on 2, 6 on 4 (own efficiency at 4: 6 / (4 x 2) = 0.75);
// spread over servers 2 on 2 GPUs (slowdown 1.5) and 8 on 4 (faster: floored to 1).
// Type B: 1 step/s on 1 GPU only (efficiency: the median over measured types = A's 0.75).
constexpr const char* kThroughputs = R"json({
  "v100": {
    "('A', 1)": {"null": 2.0, "('B', 1)": [1.0, 0.5]},
    "('A', 2)": {"null": 3.0},
    "('A', 4)": {"null": 6.0},
    "('B', 1)": {"null": 1.0, "('A', 1)": [0.5, 1.0]}
  },
  "v100_unconsolidated": {
    "('A', 1)": {"null": 2.0},
    "('A', 2)": {"null": 2.0},
    "('A', 4)": {"null": 8.0}
  }
})json";

// Gavel's TSV: type, command, steps argument, needs data dir, total steps, arrival (s), GPUs.
// Jobs 1000 s apart, each alone on the cluster.
constexpr const char* kTrace =
    "A\tpython3 train.py\t-n\t1\t100\t0\t1\n"      // 100 / 2 = 50 s
    "A\tpython3 train.py\t-n\t1\t300\t1000\t2\n"   // measured: 300 / 3 = 100 s
    "A\tpython3 train.py\t-n\t1\t600\t2000\t4\n"   // measured: 600 / 6 = 100 s
    "A\tpython3 train.py\t-n\t1\t1200\t3000\t8\n"  // scaled: 6 x 8/4 x 0.75 = 9/s -> 133.3 s
    "B\tpython3 train.py\t-n\t1\t150\t4000\t2\n";  // scaled: 1 x 2 x 0.75 = 1.5/s -> 100 s

struct TinyGavel {
  test::ScratchDir scratch;
  std::string trace_path;
  TinyGavel() {
    std::ofstream((scratch.path / "gavel_throughputs.json").string()) << kThroughputs;
    trace_path = (scratch.path / "jobs.trace").string();
    std::ofstream(trace_path) << kTrace;
  }
};

ClusterSpec cluster_of(int nodes, int gpus_per_node) {
  ClusterSpec s;
  s.nodes = nodes;
  s.gpus_per_node = gpus_per_node;
  s.intra_node_bandwidth = 300e9;
  s.inter_node_bandwidth = 25e9;  // bandwidth model: 1 + comm_fraction x (12 - 1)
  return s;
}

struct FifoRun {
  std::unique_ptr<SimEnvironment> env;
  Workload workload;
  SimResult result;
};

FifoRun run_fifo(const TinyGavel& setup, const ClusterSpec& cluster) {
  FifoRun r;
  r.env = make_environment(cluster, setup.scratch.path.string());
  WorkloadOptions wo;
  wo.mix = "trace";
  r.workload = build_workload(read_trace(setup.trace_path), cluster, *r.env, wo);
  auto fifo = make_policy("fifo");
  r.result = simulate(cluster, r.workload.jobs, *fifo, *r.env->truth, r.env->model);
  return r;
}

double run_time(const SimResult& r, JobId id) {
  for (const auto& o : r.outcomes)
    if (o.id == id) return o.finish_s - o.first_start_s;
  throw std::runtime_error("no outcome for job " + std::to_string(id));
}

TEST(SimMultiGpu, ThroughputsFileGivesEveryCountAndTheScalingRule) {
  const TinyGavel setup;
  const MultiGpuScaling s = read_gavel_scaling((setup.scratch.path / "gavel_throughputs.json").string());
  EXPECT_EQ(s.consolidated.at("A").size(), 3u);
  EXPECT_NEAR(s.default_efficiency, 0.75, 1e-12);
  const ScaledThroughput two = throughput_on(s, "A", 2);
  EXPECT_TRUE(two.measured);
  EXPECT_NEAR(two.steps_per_s, 3.0, 1e-12);
  const ScaledThroughput eight = throughput_on(s, "A", 8);
  EXPECT_FALSE(eight.measured);
  EXPECT_EQ(eight.from_gpus, 4);
  EXPECT_NEAR(eight.steps_per_s, 9.0, 1e-12);
  // 3 GPUs: 2 and 4 are as near; the smaller count is taken, scaled up with the efficiency.
  EXPECT_NEAR(throughput_on(s, "A", 3).steps_per_s, 3.0 * 1.5 * 0.75, 1e-12);
  EXPECT_NEAR(throughput_on(s, "B", 2).steps_per_s, 1.5, 1e-12);
  EXPECT_NEAR(measured_spread_slowdown(s, "A", 2), 1.5, 1e-12);
  EXPECT_NEAR(measured_spread_slowdown(s, "A", 4), 1.0, 1e-12);  // measured faster: floored
  EXPECT_EQ(measured_spread_slowdown(s, "A", 8), 0.0);            // not measured
  EXPECT_EQ(measured_spread_slowdown(s, "B", 2), 0.0);
  EXPECT_THROW(throughput_on(s, "C", 2), ConfigError);
}

TEST(SimMultiGpu, ConsolidatedJobsRunAtTheirKGpuThroughput) {
  const TinyGavel setup;
  const FifoRun r = run_fifo(setup, cluster_of(1, 8));
  ASSERT_EQ(r.result.outcomes.size(), 5u);
  EXPECT_EQ(r.result.spread_jobs, 0u);
  EXPECT_NEAR(run_time(r.result, 0), 50.0, 1e-6);
  EXPECT_NEAR(run_time(r.result, 1), 100.0, 1e-6);
  EXPECT_NEAR(run_time(r.result, 2), 100.0, 1e-6);
  EXPECT_NEAR(run_time(r.result, 3), 1200.0 / 9.0, 1e-6);
  EXPECT_NEAR(run_time(r.result, 4), 100.0, 1e-6);
}

TEST(SimMultiGpu, SpreadJobsTakeTheMeasuredSlowdownElseTheBandwidthModel) {
  const TinyGavel setup;
  const FifoRun r = run_fifo(setup, cluster_of(8, 1));  // every multi-GPU job spreads
  ASSERT_EQ(r.result.outcomes.size(), 5u);
  EXPECT_EQ(r.result.spread_jobs, 4u);
  const double comm_a = default_comm_fraction("A"), comm_b = default_comm_fraction("B");
  EXPECT_NEAR(run_time(r.result, 0), 50.0, 1e-6);
  EXPECT_NEAR(run_time(r.result, 1), 100.0 * 1.5, 1e-6);  // measured 3 / 2
  EXPECT_NEAR(run_time(r.result, 2), 100.0, 1e-6);        // measured, floored at 1
  EXPECT_NEAR(run_time(r.result, 3), 1200.0 / 9.0 * (1 + comm_a * 11), 1e-6);
  EXPECT_NEAR(run_time(r.result, 4), 100.0 * (1 + comm_b * 11), 1e-6);
}

TEST(SimMultiGpu, FallbacksAndSpreadSourcesAreCountedPerType) {
  const TinyGavel setup;
  const FifoRun r = run_fifo(setup, cluster_of(1, 8));
  const MultiGpuUse& a = r.workload.multi_gpu.at("A");
  EXPECT_EQ(a.jobs, 3u);
  EXPECT_EQ(a.measured, 2u);
  EXPECT_EQ(a.scaled, 1u);
  EXPECT_EQ(a.spread_measured, 2u);
  const auto types = job_type_truth(*r.env, r.workload);
  const auto j = ground_truth_json(types, {r.result});
  EXPECT_EQ(j.at("B").at("multi_gpu").at("scaling_fallbacks"), 1);
  EXPECT_EQ(j.at("B").at("multi_gpu").at("spread_bandwidth_model"), 1);
  EXPECT_EQ(j.at("A").at("multi_gpu").at("scaling_fallbacks"), 1);
  EXPECT_EQ(j.at("A").at("multi_gpu").at("measured_throughput"), 2);
  EXPECT_EQ(j.at("A").at("multi_gpu").at("spread_measured"), 2);
  const std::string table = format_ground_truth(types, {r.result});
  EXPECT_NE(table.find("3 / 1 / 2"), std::string::npos) << table;
  EXPECT_NE(table.find("1 / 1 / 0"), std::string::npos) << table;
}

}  // namespace
}  // namespace recmix::sched
