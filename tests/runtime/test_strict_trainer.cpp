// The whole trainer under the strict device emulator (device.kind = "cpu-strict"), at 1, 2 and 4
// ranks: training, evaluation, checkpoint save and load, stop/resume and resume on another rank
// count, against the CPU backend. Under the emulator the model takes the CUDA code paths (device
// memory the host cannot touch, the device communicator, staged embedding exchange), so a host
// access to device memory anywhere in them kills the test with the allocation's name.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <mpi.h>

#include "mlp/cpu/linear.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;

namespace {

// The CPU backend's fused linear kernels round differently from GEMM + bias (the path CUDA and
// the emulator take); without them the two backends do the same arithmetic.
class SameArithmetic {
 public:
  SameArithmetic() { mlp::cpu::set_fused_linear_enabled(false); }
  ~SameArithmetic() { mlp::cpu::set_fused_linear_enabled(true); }
};

struct StrictCase {
  const char* data;
  const char* sparse;
  const char* dense;
  const char* tables = "fp32";  // [precision] embedding
};

// The same steps of spec on the CPU backend and on `kind` over the same communicator: the losses
// of both, and their checkpoints' weights.
struct SideBySide {
  std::vector<double> cpu_losses, losses;
  std::vector<Tensor> cpu_weights, weights;
};
SideBySide against_cpu(JobSpec spec, const std::string& kind, int steps) {
  auto& comm = *world->comm;
  const std::string dir = run_dir(spec.name);
  SideBySide r;
  r.cpu_losses = train_steps(spec, comm, steps, dir + "/cpu.h5");
  spec.name += "-" + kind;
  spec.device.kind = parse_choice<device::BackendKind>(kind, "device.kind");
  r.losses = train_steps(spec, comm, steps, dir + "/" + kind + ".h5");
  r.cpu_weights = read_weights(dir + "/cpu.h5");
  r.weights = read_weights(dir + "/" + kind + ".h5");
  return r;
}

class StrictTrainer : public testing::TestWithParam<StrictCase> {};

// The same steps on cpu and on cpu-strict: the same losses and weights, bit for bit.
TEST_P(StrictTrainer, MatchesTheCpuBackend) {
  auto c = GetParam();
  SameArithmetic same;
  auto spec = small_spec(
      fmt::format("strict-{}-{}-{}-{}", std::string(c.data).substr(0, 5), c.sparse, c.dense, c.tables), c.data);
  spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(c.sparse, "optimizer.sparse");
  spec.optimizer.dense = parse_choice<DenseOptimizerKind>(c.dense, "optimizer.dense");
  spec.precision.embedding = parse_choice<half::Storage>(c.tables, "precision.embedding");
  const auto r = against_cpu(spec, "cpu-strict", 10);
  EXPECT_EQ(r.losses, r.cpu_losses);
  EXPECT_TRUE(bitwise_equal(r.weights, r.cpu_weights))
      << "largest relative difference " << max_relative_difference(r.weights, r.cpu_weights);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, StrictTrainer,
                         testing::Values(StrictCase{"train.h5", "sgd", "sgd"},
                                         StrictCase{"train.h5", "rowwise_adagrad", "adagrad"},
                                         StrictCase{"multi.h5", "adagrad", "adam"},
                                         StrictCase{"train.h5", "rowwise_adagrad", "adagrad", "bf16"},
                                         StrictCase{"multi.h5", "adagrad", "sgd", "fp16"}),
                         [](const auto& info) {
                           return fmt::format("{}_{}_{}_{}", std::string(info.param.data).substr(0, 5),
                                              info.param.sparse, info.param.dense, info.param.tables);
                         });

// A few trainer steps on a GPU against the CPU backend (fp32 rounding apart: cuBLAS and atomics
// order sums differently). Skipped without a GPU.
TEST(CudaTrainer, AFewStepsMatchTheCpuBackend) {
  if (!device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (device::cuda_device_count() < ranks) GTEST_SKIP() << "needs a GPU per rank";
  auto spec = small_spec("cuda-steps");
  spec.optimizer.sparse = SparseOptimizerKind::rowwise_adagrad;
  const auto r = against_cpu(spec, "cuda", 6);
  for (std::size_t i = 0; i < r.cpu_losses.size(); ++i)
    EXPECT_NEAR(r.losses[i], r.cpu_losses[i], 1e-4 * std::abs(r.cpu_losses[i])) << "step " << i;
  const double diff = max_relative_difference(r.weights, r.cpu_weights);
  EXPECT_GE(diff, 0) << "checkpoints hold different tensors";
  EXPECT_LE(diff, 1e-4);
}

// The GPU's training is deterministic: two runs of the same job give the same losses and
// weights, bit for bit (no atomics in the kernels, a fixed reduction order everywhere).
TEST(CudaTrainer, TwoRunsAreBitwiseEqual) {
  if (!device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (device::cuda_device_count() < ranks) GTEST_SKIP() << "needs a GPU per rank";
  auto& comm = *world->comm;
  auto spec = small_spec("cuda-twice", "multi.h5");
  spec.optimizer.sparse = SparseOptimizerKind::adagrad;
  spec.device.kind = device::BackendKind::cuda;
  const std::string dir = run_dir(spec.name);
  const auto first = train_steps(spec, comm, 8, dir + "/first.h5");
  const auto second = train_steps(spec, comm, 8, dir + "/second.h5");
  EXPECT_EQ(first, second);
  const auto a = read_weights(dir + "/first.h5"), b = read_weights(dir + "/second.h5");
  EXPECT_TRUE(bitwise_equal(a, b)) << differing_tensors(a, b);
}

// Mixed precision on a GPU: bf16 tables and bf16 GEMMs (cublasGemmEx) against the same spec
// with fp32 GEMMs on the CPU backend: losses within 0.5% (on the strict emulator, the same
// comparison differs by 2e-4 at most).
TEST(CudaTrainer, MixedPrecisionStepsStayNearTheCpuBackend) {
  if (!device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (device::cuda_device_count() < ranks) GTEST_SKIP() << "needs a GPU per rank";
  auto spec = small_spec("cuda-mixed");
  spec.precision.embedding = half::Storage::bf16;
  auto& comm = *world->comm;
  const std::string dir = run_dir(spec.name);
  const auto cpu_losses = train_steps(spec, comm, 6, dir + "/cpu.h5");
  spec.name += "-cuda";
  spec.device.kind = device::BackendKind::cuda;
  spec.precision.dense = DensePrecision::bf16;
  const auto losses = train_steps(spec, comm, 6, dir + "/cuda.h5");
  ASSERT_EQ(losses.size(), cpu_losses.size());
  for (std::size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i], cpu_losses[i], 0.005 * std::abs(cpu_losses[i])) << "step " << i;
}

// train() end to end under the emulator: periodic checkpoints, evaluation, then a stop and a
// resume that continue bit for bit.
TEST(StrictTrainerRun, TrainEvaluateStopAndResumeBitForBit) {
  auto& comm = *world->comm;
  auto spec = small_spec("strict-run");
  spec.device.kind = device::BackendKind::cpu_strict;
  spec.checkpoint.interval = 8;
  spec.run_dir = run_dir(spec.name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  TrainResult straight;
  {
    Trainer t(spec, comm);
    straight = t.train(quiet());
    ASSERT_TRUE(straight.eval.has_value());
    EXPECT_GT(straight.eval->auc, 0.5);
    t.save(spec.run_dir + "/straight.h5", straight.steps);
  }
  auto resumed_spec = spec;
  resumed_spec.name = "strict-run-resumed";
  resumed_spec.run_dir = run_dir(resumed_spec.name);
  resumed_spec.checkpoint.dir = resumed_spec.run_dir + "/checkpoints";
  {
    Trainer t(resumed_spec, comm);
    t.train(quiet(7));
  }
  Trainer t(resumed_spec, comm);
  auto resumed = t.train(quiet(0, "latest"));
  t.save(resumed_spec.run_dir + "/resumed.h5", resumed.steps);
  EXPECT_EQ(resumed.steps, straight.steps);
  EXPECT_EQ(resumed.last_loss, straight.last_loss);
  EXPECT_TRUE(bitwise_equal(read_weights(spec.run_dir + "/straight.h5"), read_weights(resumed_spec.run_dir + "/resumed.h5")));
  EXPECT_EQ(resumed.eval->auc, straight.eval->auc);
}

// A checkpoint written under the emulator on N ranks loads on one rank on the CPU backend and
// back under the emulator on N ranks, unchanged; resumed on one rank, training goes on the same
// under the emulator as on the CPU.
TEST(StrictTrainerRun, CheckpointsMoveBetweenBackendsAndRankCounts) {
  auto& comm = *world->comm;
  auto self = comm.split(comm.rank(), 0);
  auto spec = small_spec("strict-ckpt");
  spec.optimizer.sparse = SparseOptimizerKind::rowwise_adagrad;
  spec.optimizer.dense = DenseOptimizerKind::adam;
  spec.device.kind = device::BackendKind::cpu_strict;
  const std::string dir = run_dir(spec.name);
  train_steps(spec, comm, 6, dir + "/n.h5");
  auto one_spec = spec;
  one_spec.device.kind = device::BackendKind::cpu;
  one_spec.name += fmt::format("-one{}", comm.rank());
  one_spec.run_dir = run_dir(one_spec.name);
  {
    Trainer one(one_spec, *self);
    one.load(dir + "/n.h5");
    one.save(dir + fmt::format("/one{}.h5", comm.rank()), 6);
  }
  EXPECT_TRUE(bitwise_equal(read_weights(dir + "/n.h5"), read_weights(dir + fmt::format("/one{}.h5", comm.rank()))));
  comm.barrier();  // rank 0's file is complete before every rank reads it
  spec.run_dir = dir;
  Trainer back(spec, comm);
  back.load(dir + "/one0.h5");
  back.save(dir + "/back.h5", 6);
  EXPECT_TRUE(bitwise_equal(read_weights(dir + "/n.h5"), read_weights(dir + "/back.h5")));

  // Resumed on one rank (N -> 1) and trained 3 more steps: the same under the emulator as on the
  // CPU backend, bit for bit.
  SameArithmetic same;
  auto resume_on_one = [&](const std::string& kind) {
    auto s = spec;
    s.device.kind = parse_choice<device::BackendKind>(kind, "device.kind");
    s.name = fmt::format("strict-ckpt-resumed-{}-{}", kind, comm.rank());
    s.run_dir = run_dir(s.name);
    s.checkpoint.dir = s.run_dir + "/checkpoints";
    s.train.steps = 9;
    Trainer t(s, *self);
    auto r = t.train(quiet(0, dir + "/n.h5"));
    t.save(s.run_dir + "/final.h5", r.steps);
    return std::pair{r, s.run_dir + "/final.h5"};
  };
  const auto [strict, strict_file] = resume_on_one("cpu-strict");
  const auto [cpu, cpu_file] = resume_on_one("cpu");
  EXPECT_EQ(strict.steps, 9);
  EXPECT_EQ(strict.last_loss, cpu.last_loss);
  EXPECT_TRUE(bitwise_equal(read_weights(strict_file), read_weights(cpu_file)));
}

}  // namespace

int registered = register_world();
