// The roofline profile: FLOP and byte counts by hand on the tiny DLRM, the utilisation vector /
// step time identities on a machine with round numbers, each GEMM math at its rate, and the GPU
// step's host issue against the steps measured on an H200.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "sched/dlrm_profile.hpp"
#include "sched/memory_estimator.hpp"
#include "sched/profile_library.hpp"
#include "tests/sched/tiny_job.hpp"

namespace recmix::sched {
namespace {

JobSpec tiny() { return test::tiny_job(Optimizer::sgd, SparseOptimizer::sgd); }

TEST(DlrmProfile, StepCostByHand) {
  const StepCost c = dlrm_step_cost(tiny());
  // MACs per sample: bottom 3*8 + 8*4 = 56, top 7*5 + 5*1 = 40, interaction 3*3*4/2 = 18 -> 114.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 3 * 2 * 114.0 * 6);
  // DCN: the top reads F x dim = 12 (12*5 + 5*1 = 65), and two cross layers of rank 3 take
  // 2 x 2 x 3 x 12 = 144 in place of the pairs: 56 + 65 + 144 = 265.
  JobSpec dcn = tiny();
  dcn.shape.cross_layers = 2;
  dcn.shape.cross_rank = 3;
  EXPECT_DOUBLE_EQ(dlrm_step_cost(dcn).gemm_flops, 3 * 2 * 265.0 * 6);
  // One rank: no communication.
  EXPECT_DOUBLE_EQ(c.network_bytes, 0.0);
  // Batch bytes: 6 * (3*4 + 2*8 + 4) = 192, no cold rows.
  EXPECT_DOUBLE_EQ(c.host_device_bytes, 192.0);
}

// 16-bit tables: the sparse update moves 3 x 2 bytes of weights a looked-up element instead of
// 3 x 4 (pooling read, update read and write); gradients and state stay fp32.
// The MLPerf DLRM-DCNv2 model as a job type: n = 27 x 128 = 3456, and per sample the bottom's
// 13*512 + 512*256 + 256*128 = 170,496 MACs, the cross layers' 3 x 2 x 512 x 3456 = 10,616,832,
// the top's 3456*1024 + 1024*1024 + 1024*512 + 512*256 + 256 = 5,243,136: 16,030,464, so
// 96.2 MFLOP a sample for forward and backward (bench_dcn counts the same GEMMs).
TEST(DlrmProfile, DcnV2PresetByHand) {
  const JobSpec s = dlrm_preset("dlrm-dcnv2");
  ASSERT_EQ(s.shape.tables.size(), 26u);
  EXPECT_EQ(s.shape.tables[0].rows, 40000000);
  EXPECT_EQ(s.shape.interaction_width(), 3456);
  EXPECT_EQ(s.shape.cross_params(), 3 * (2 * 512 * 3456 + 3456));
  EXPECT_DOUBLE_EQ(dlrm_step_cost(s).gemm_flops, 6.0 * 16030464 * s.local_batch());
  EXPECT_GT(estimate_peak_memory(s, MachineModel{}).total(), 0.0);
  const auto& types = dlrm_type_names();
  EXPECT_NE(std::find(types.begin(), types.end(), "dlrm-dcnv2"), types.end());
  const auto& sizes = dlrm_preset_names();  // not one of the mixes' sizes
  EXPECT_EQ(std::find(sizes.begin(), sizes.end(), "dlrm-dcnv2"), sizes.end());
}

TEST(DlrmProfile, HalfTablesMoveFewerBytes) {
  JobSpec s = tiny();
  const StepCost fp32 = dlrm_step_cost(s);
  s.table_bytes = 2;
  const StepCost half = dlrm_step_cost(s);
  // Lookups: 6 samples x 2 tables x pooling 1, dim 4 -> 48 elements, 3 x 2 bytes fewer each.
  EXPECT_DOUBLE_EQ(fp32.device_bytes - half.device_bytes, 48 * 3 * 2.0);
  EXPECT_DOUBLE_EQ(fp32.gemm_flops, half.gemm_flops);
}

// The simulator's presets with 16-bit tables ([precision] embedding): the peak falls by the
// tables' halved weights plus the allocator margin on them.
TEST(DlrmProfile, PresetsCountTheirTableStorage) {
  ProfileLibrary fp32(machine_model("a100-dgx")), half(machine_model("a100-dgx"));
  half.set_table_bytes(2);
  const JobSpec preset = dlrm_preset("dlrm-medium");
  const double saved = static_cast<double>(preset.shape.embedding_params()) * 2.0;
  const double delta = fp32.dlrm("dlrm-medium", 1).peak_memory_bytes - half.dlrm("dlrm-medium", 1).peak_memory_bytes;
  EXPECT_NEAR(delta, saved * (1 + EstimatorOptions{}.allocator_margin), 1e-6 * saved);
  EXPECT_THROW(half.set_table_bytes(3), ConfigError);
}

// bf16 GEMMs: the same FLOPs at the bf16 rate where the machine has one (A100: 312 against 19.5
// plain FP32), at the fp32 rate where it has none (V100); the operands' bf16 copies add bytes and
// memory. The machines' host costs are left out so that both steps are the device's own.
TEST(DlrmProfile, Bf16GemmsRunAtTheMachinesBf16Rate) {
  JobSpec s = tiny();
  const StepCost fp32 = dlrm_step_cost(s);
  s.gemm_math = GemmMath::bf16;
  const StepCost bf16 = dlrm_step_cost(s);
  EXPECT_DOUBLE_EQ(bf16.gemm_flops, fp32.gemm_flops);
  // Weights' copy written once, read twice: 114 x 2 x 3; activations' copies written once and read
  // once: 2 x 6 x (23 + 8) x 2 (test_memory_estimator works out the 23 + 8).
  EXPECT_DOUBLE_EQ(bf16.device_bytes - fp32.device_bytes, 114 * 2 * 3.0 + 2 * 6 * 31 * 2.0);

  MachineModel a = machine_model("a100-dgx"), v = machine_model("v100-dgx1");
  for (MachineModel* m : {&a, &v}) m->host_launch_s = m->host_graph_step_s = m->host_index_s = 0;
  ProfileLibrary a100(a), v100(v);
  const JobProfile a_fp32 = a100.dlrm("dlrm-medium", 1), v_fp32 = v100.dlrm("dlrm-medium", 1);
  a100.set_bf16_gemms(true);
  v100.set_bf16_gemms(true);
  const JobProfile& a_bf16 = a100.dlrm("dlrm-medium", 1);
  const JobProfile& v_bf16 = v100.dlrm("dlrm-medium", 1);
  JobSpec medium = dlrm_preset("dlrm-medium");
  const StepCost m32 = dlrm_step_cost(medium);
  medium.gemm_math = GemmMath::bf16;
  const StepCost m16 = dlrm_step_cost(medium);
  const double a_saved = m32.gemm_flops / (a.gemm_efficiency * a.fp32_flops) -
                         m32.gemm_flops / (a.gemm_efficiency * a.bf16_flops);
  const double a_copies = (m16.device_bytes - m32.device_bytes) / a.memory_bandwidth;
  EXPECT_GT(a_saved, 2 * a_copies);
  // The device-bound step: faster by the compute time saved, slower by the copies' bytes.
  EXPECT_NEAR(a_fp32.solo_step_s - a_bf16.solo_step_s, a_saved - a_copies, 1e-9 * a_fp32.solo_step_s);
  EXPECT_GT(v_bf16.solo_step_s, v_fp32.solo_step_s);  // no bf16 rate: only the copies' bytes
  EXPECT_GT(a_bf16.peak_memory_bytes, a_fp32.peak_memory_bytes);
}

// Each math at its own rate on round numbers: fp32 at the plain FP32 rate (a GPU's SIMT units, not
// its TF32 tensor cores), tf32 at the TF32 rate or, where a machine has none, at fp32; and on the
// H200 node the Kaggle step's GEMM time in fp32 is its FLOPs over 67 TFLOP/s, not 494.7.
TEST(DlrmProfile, GemmsRunAtTheRateOfTheirMath) {
  MachineModel m;
  m.fp32_flops = 1e9;
  m.tf32_flops = 8e9;
  m.bf16_flops = 16e9;
  JobSpec s = tiny();
  EXPECT_DOUBLE_EQ(gemm_peak_flops(s, m), 1e9);
  s.gemm_math = GemmMath::tf32;
  EXPECT_DOUBLE_EQ(gemm_peak_flops(s, m), 8e9);
  s.gemm_math = GemmMath::bf16;
  EXPECT_DOUBLE_EQ(gemm_peak_flops(s, m), 16e9);
  m.tf32_flops = m.bf16_flops = 0;
  EXPECT_DOUBLE_EQ(gemm_peak_flops(s, m), 1e9);
  s.gemm_math = GemmMath::tf32;
  EXPECT_DOUBLE_EQ(gemm_peak_flops(s, m), 1e9);

  const MachineModel& h200 = machine_model("h200-dgx");
  JobSpec kaggle = dlrm_preset("dlrm-small");
  const double flops = dlrm_step_cost(kaggle).gemm_flops;
  const JobProfile fp32 = dlrm_profile(kaggle, h200);
  kaggle.gemm_math = GemmMath::tf32;
  const JobProfile tf32 = dlrm_profile(kaggle, h200);
  EXPECT_NEAR(fp32.util[Resource::compute] * fp32.solo_step_s, flops / (67e12 * h200.gemm_efficiency), 1e-12);
  EXPECT_NEAR(tf32.util[Resource::compute] * tf32.solo_step_s, flops / (494.7e12 * h200.gemm_efficiency), 1e-12);
  EXPECT_THROW(parse_gemm_math("fp16"), ConfigError);
  EXPECT_EQ(parse_gemm_math("tf32"), GemmMath::tf32);
}

JobSpec kaggle_sgd(int batch, GemmMath math, bool graphs) {
  JobSpec s = dlrm_preset("dlrm-small");
  s.optimizer = Optimizer::sgd;
  s.sparse_optimizer = SparseOptimizer::sgd;
  s.device_kernels = true;
  s.global_batch = batch;
  s.gemm_math = math;
  s.graphs = graphs;
  return s;
}

// The host issues a GPU step: 50 launches eagerly (7 layers x 5 + 15), one graph step cost with
// graphs, 26 indices a sample either way. The cpu model has no issue cost, graphs or not.
TEST(DlrmProfile, GraphsLowerTheHostIssue) {
  const MachineModel& h200 = machine_model("h200-dgx");
  const JobSpec eager = kaggle_sgd(2048, GemmMath::fp32, false);
  const JobSpec graphs = kaggle_sgd(2048, GemmMath::fp32, true);
  const StepCost c = dlrm_step_cost(eager);
  EXPECT_EQ(c.gpu_launches, 50);
  EXPECT_DOUBLE_EQ(c.host_indices, 2048 * 26.0);
  const double indices = 2048 * 26 * h200.host_index_s;
  EXPECT_NEAR(host_issue_s(eager, c, h200), 50 * h200.host_launch_s + indices, 1e-15);
  EXPECT_NEAR(host_issue_s(graphs, c, h200), h200.host_graph_step_s + indices, 1e-15);
  EXPECT_LT(host_issue_s(graphs, c, h200), host_issue_s(eager, c, h200));
  EXPECT_LT(dlrm_profile(graphs, h200).solo_step_s, dlrm_profile(eager, h200).solo_step_s);

  const MachineModel& cpu = machine_model("cpu-zen3-2vcpu");
  EXPECT_FALSE(cpu.is_gpu());
  EXPECT_EQ(host_issue_s(eager, c, cpu), 0.0);
  EXPECT_EQ(dlrm_profile(graphs, cpu).solo_step_s, dlrm_profile(eager, cpu).solo_step_s);
}

// The model's step against the steps measured on an H200 (bench/RESULTS.md, "The GPU kernels
// measured, and three kernel fixes (H200, 27 Nov 2026)", commit 8d5a81b, bench_precision's step:
// Kaggle shape, one rank, SGD): within 15%.
TEST(DlrmProfile, H200StepsWithinFifteenPercentOfTheMeasured) {
  struct Measured {
    int batch;
    GemmMath math;
    bool graphs;
    double samples_per_s;
  };
  const Measured measured[] = {{2048, GemmMath::fp32, false, 1'971'734},
                               {16384, GemmMath::fp32, false, 2'604'378},
                               {2048, GemmMath::tf32, true, 2'266'872},
                               {16384, GemmMath::tf32, true, 2'792'670}};
  for (const Measured& m : measured) {
    const double step = dlrm_profile(kaggle_sgd(m.batch, m.math, m.graphs), machine_model("h200-dgx")).solo_step_s;
    const double measured_step = m.batch / m.samples_per_s;
    EXPECT_NEAR(step / measured_step, 1.0, 0.15) << "batch " << m.batch << (m.graphs ? " tf32 graphs" : " fp32 eager");
  }
}

// The DLRM-DCNv2 step on the CPU against bench_dcn's measurement (bench/RESULTS.md, "The
// DCNv2 step on huge pages"): the dlrm-dcnv2 shape with bench_dcn's 26 tables of 1000 rows,
// one-hot, batch 2048, one rank, SGD, on the cpu model with the figures that run measured (the
// 2048^3 GEMMs as the peaks, the bare GEMM chain's share of it, a large copy's bandwidth): within
// 15%, fp32 and bf16 GEMMs.
TEST(DlrmProfile, DcnV2CpuStepWithinFifteenPercentOfTheMeasured) {
  JobSpec s = dlrm_preset("dlrm-dcnv2");
  s.shape.tables.assign(26, TableShape{1000, 128});
  s.shape.pooling = 1;
  s.global_batch = 2048;
  s.ranks = 1;
  s.tiering = {};
  s.optimizer = Optimizer::sgd;
  s.sparse_optimizer = SparseOptimizer::sgd;
  MachineModel m = machine_model("cpu-zen3-2vcpu");
  m.fp32_flops = m.tf32_flops = m.fp16_flops = 356.3e9;
  m.bf16_flops = 674.9e9;
  m.gemm_efficiency = 0.94;
  m.memory_bandwidth = 27.3e9;
  const std::pair<GemmMath, double> measured[] = {{GemmMath::fp32, 0.61918}, {GemmMath::bf16, 0.37935}};
  for (const auto& [math, measured_step] : measured) {
    s.gemm_math = math;
    EXPECT_NEAR(dlrm_profile(s, m).solo_step_s / measured_step, 1.0, 0.15) << (math == GemmMath::bf16 ? "bf16" : "fp32");
  }
}

TEST(DlrmProfile, SharesAreTimesOverStep) {
  MachineModel m;
  m.fp32_flops = m.tf32_flops = 1e9;
  m.gemm_efficiency = 1.0;
  m.memory_bandwidth = 1e9;
  m.host_device_bandwidth = 1e9;
  m.intra_node_bandwidth = 1e9;
  m.host_memory_bandwidth = 1e9;
  m.kernel_launch_s = 0;
  const JobSpec s = tiny();
  const StepCost c = dlrm_step_cost(s);
  const JobProfile p = dlrm_profile(s, m);
  const double t_compute = c.gemm_flops / 1e9, t_memory = c.device_bytes / 1e9;
  EXPECT_NEAR(p.solo_step_s, std::max({t_compute + t_memory, c.host_device_bytes / 1e9, c.host_bytes / 1e9}), 1e-15);
  EXPECT_NEAR(p.util[Resource::compute], t_compute / p.solo_step_s, 1e-12);
  EXPECT_NEAR(p.util[Resource::memory_bandwidth], t_memory / p.solo_step_s, 1e-12);
  EXPECT_DOUBLE_EQ(p.util[Resource::network], 0.0);
  EXPECT_DOUBLE_EQ(p.peak_memory_bytes, estimate_peak_memory(s, m).total());
}

TEST(DlrmProfile, MoreRanksCommunicateAndShrinkTheStep) {
  JobSpec s = dlrm_preset("dlrm-medium");
  const auto& a100 = machine_model("a100-dgx");
  const JobProfile one = dlrm_profile(s, a100);
  s.ranks = 8;
  const JobProfile eight = dlrm_profile(s, a100);
  EXPECT_EQ(one.comm_fraction, 0.0);
  EXPECT_GT(eight.comm_fraction, 0.0);
  EXPECT_LT(eight.solo_step_s, one.solo_step_s);
  EXPECT_LT(eight.peak_memory_bytes, one.peak_memory_bytes);
}

TEST(MachineModels, PublishedFiguresAndLookup) {
  EXPECT_DOUBLE_EQ(machine_model("v100-dgx1").memory_bandwidth, 900e9);
  EXPECT_DOUBLE_EQ(machine_model("a100-dgx").tf32_flops, 156e12);
  EXPECT_DOUBLE_EQ(machine_model("h100-dgx").memory_bandwidth, 3350e9);
  EXPECT_DOUBLE_EQ(machine_model("h200-dgx").memory_bandwidth, 4800e9);
  EXPECT_DOUBLE_EQ(machine_model("h200-dgx").fp32_flops, 67e12);
  EXPECT_DOUBLE_EQ(machine_model("cpu-zen3-2vcpu").fp32_flops, 157e9);
  EXPECT_THROW(machine_model("tpu"), ConfigError);
}

}  // namespace
}  // namespace recmix::sched
