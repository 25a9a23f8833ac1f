// The roofline profile: FLOP and byte counts by hand on the tiny DLRM, and the utilisation
// vector / step time identities on a machine with round numbers.
#include <gtest/gtest.h>

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
  // One rank: no communication.
  EXPECT_DOUBLE_EQ(c.network_bytes, 0.0);
  // Batch bytes: 6 * (3*4 + 2*8 + 4) = 192, no cold rows.
  EXPECT_DOUBLE_EQ(c.host_device_bytes, 192.0);
}

// 16-bit tables: the sparse update moves 3 x 2 bytes of weights a looked-up element instead of
// 3 x 4 (pooling read, update read and write); gradients and state stay fp32.
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

// bf16 GEMMs: the same FLOPs at the bf16 rate where the machine has one (A100: 312 against 156
// TF32), at the fp32 rate where it has none (V100); the operands' bf16 copies add bytes and memory.
TEST(DlrmProfile, Bf16GemmsRunAtTheMachinesBf16Rate) {
  JobSpec s = tiny();
  const StepCost fp32 = dlrm_step_cost(s);
  s.bf16_gemms = true;
  const StepCost bf16 = dlrm_step_cost(s);
  EXPECT_DOUBLE_EQ(bf16.gemm_flops, fp32.gemm_flops);
  // Weights' copy written once, read twice: 114 x 2 x 3; activations' copies written once and read
  // once: 2 x 6 x (23 + 8) x 2 (test_memory_estimator works out the 23 + 8).
  EXPECT_DOUBLE_EQ(bf16.device_bytes - fp32.device_bytes, 114 * 2 * 3.0 + 2 * 6 * 31 * 2.0);

  ProfileLibrary a100(machine_model("a100-dgx")), v100(machine_model("v100-dgx1"));
  const JobProfile a_fp32 = a100.dlrm("dlrm-medium", 1), v_fp32 = v100.dlrm("dlrm-medium", 1);
  a100.set_bf16_gemms(true);
  v100.set_bf16_gemms(true);
  const JobProfile& a_bf16 = a100.dlrm("dlrm-medium", 1);
  const JobProfile& v_bf16 = v100.dlrm("dlrm-medium", 1);
  const MachineModel a = machine_model("a100-dgx"), v = machine_model("v100-dgx1");
  JobSpec medium = dlrm_preset("dlrm-medium");
  const StepCost m32 = dlrm_step_cost(medium);
  medium.bf16_gemms = true;
  const StepCost m16 = dlrm_step_cost(medium);
  const double a_saved = m32.gemm_flops / (a.gemm_efficiency * a.tf32_flops) -
                         m32.gemm_flops / (a.gemm_efficiency * a.bf16_flops);
  const double a_copies = (m16.device_bytes - m32.device_bytes) / a.memory_bandwidth;
  EXPECT_GT(a_saved, 2 * a_copies);
  // The device-bound step: faster by the compute time saved, slower by the copies' bytes.
  EXPECT_NEAR(a_fp32.solo_step_s - a_bf16.solo_step_s, a_saved - a_copies, 1e-9 * a_fp32.solo_step_s);
  EXPECT_GT(v_bf16.solo_step_s, v_fp32.solo_step_s);  // no bf16 rate: only the copies' bytes
  EXPECT_GT(a_bf16.peak_memory_bytes, a_fp32.peak_memory_bytes);
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
  EXPECT_DOUBLE_EQ(machine_model("cpu-zen3-2vcpu").fp32_flops, 157e9);
  EXPECT_THROW(machine_model("tpu"), ConfigError);
}

}  // namespace
}  // namespace recmix::sched
