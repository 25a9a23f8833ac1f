// Mixed precision under MPI at 1, 2 and 4 ranks. Embedding tables stored in 16 bits ([precision]
// embedding = "fp16" | "bf16"): the planted signal is learned as well as in fp32 (eval AUC within
// 0.001 after the same steps, averaged over seeds), a stopped and resumed run equals a straight
// one bit for bit (the stochastic rounding is keyed by the step, which the checkpoint restores),
// and checkpoints convert between storage types as docs/math.md says. bf16 GEMMs ([precision]
// dense = "bf16"): refused on a CPU without AVX512_BF16, taken natively on one with it, and on
// the strict device emulator they learn as fp32 does, the cross network's (dcn) too.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "data/h5.hpp"
#include "embedding/half_kernels.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;

namespace {

JobSpec half_spec(const std::string& name, const std::string& storage, std::uint64_t seed) {
  auto spec = small_spec(name);
  spec.seed = seed;
  spec.train.steps = 1200;
  spec.train.batch_size = 128;
  spec.optimizer.dense = DenseOptimizerKind::adagrad;
  spec.optimizer.sparse = SparseOptimizerKind::rowwise_adagrad;
  spec.precision.embedding = parse_choice<half::Storage>(storage, "precision.embedding");
  spec.run_dir = run_dir(name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  return spec;
}

TrainResult train_quietly(const JobSpec& spec, TrainOptions options = {}) {
  options.quiet = true;
  return Trainer(spec, *world->comm).train(options);
}

// The model's 16-bit tables hold exactly what their fp32 view shows: every value of the view is
// a value of the storage type.
void expect_storable(Trainer& trainer, half::Storage storage) {
  for (const auto& v : trainer.model().embedding().local_shards())
    for (std::int64_t i = 0; i < (v.row_end - v.row_begin) * v.dim; ++i) {
      const float x = v.weights[i];
      ASSERT_EQ(half::bits_of(embedding::kernels::half_to_float(
                    storage, embedding::kernels::float_to_half(storage, x, false, 0u))),
                half::bits_of(x))
          << "table " << v.table << " element " << i << " = " << x << " is not a " << half::to_string(storage);
    }
}

// Each seed's runs part ways as their roundings differ, and a single seed's eval AUC moves by up
// to about 0.001 either way for it (measured: fp16 and bf16 within 0.0009 of fp32 over seeds 5-7
// at 1, 2 and 4 ranks); their mean over seeds is what must stay within 0.001.
TEST(HalfTables, LearnThePlantedSignalAsFp32Does) {
  const std::uint64_t seeds[] = {5, 6, 7, 8};
  double diff_sum[2] = {0, 0};
  const char* storages[] = {"fp16", "bf16"};
  for (std::uint64_t seed : seeds) {
    const auto fp32 = train_quietly(half_spec(fmt::format("fp32-{}", seed), "fp32", seed));
    ASSERT_TRUE(fp32.eval.has_value());
    EXPECT_GE(fp32.eval->auc, 0.75);
    for (int s = 0; s < 2; ++s) {
      const auto half = train_quietly(half_spec(fmt::format("{}-{}", storages[s], seed), storages[s], seed));
      ASSERT_TRUE(half.eval.has_value());
      EXPECT_EQ(half.steps, fp32.steps);
      EXPECT_NEAR(half.eval->auc, fp32.eval->auc, 0.002) << storages[s] << ", seed " << seed;
      diff_sum[s] += half.eval->auc - fp32.eval->auc;
      if (world->comm->rank() == 0)
        std::printf("seed %d: eval AUC fp32 %.6f, %s %.6f\n", static_cast<int>(seed), fp32.eval->auc, storages[s],
                    half.eval->auc);
    }
  }
  for (int s = 0; s < 2; ++s)
    EXPECT_LE(std::abs(diff_sum[s] / std::size(seeds)), 0.001) << storages[s] << ": mean AUC difference";
}

TEST(HalfTables, HalveTheTablesDeviceBytes) {
  auto fp32 = half_spec("bytes-fp32", "fp32", 5);
  auto bf16 = half_spec("bytes-bf16", "bf16", 5);
  fp32.optimizer.sparse = bf16.optimizer.sparse = SparseOptimizerKind::sgd;  // no state: the weights alone
  Trainer a(fp32, *world->comm), b(bf16, *world->comm);
  EXPECT_EQ(b.model().embedding().local_bytes() * 2, a.model().embedding().local_bytes());
  EXPECT_GT(a.model().embedding().local_bytes(), 0u);
}

TEST(HalfTables, StopAndResumeIsBitwiseEqual) {
  for (const char* storage : {"fp16", "bf16"}) {
    auto spec = half_spec(fmt::format("resume-{}", storage), storage, 5);
    spec.train.steps = 30;
    spec.train.batch_size = 64;  // as the spec's text says (a resume compares it)
    spec.optimizer.sparse = SparseOptimizerKind::adagrad;
    spec.data.shuffle = true;
    spec.data.eval.clear();
    auto straight = spec;
    straight.run_dir += "-straight";
    straight.checkpoint.dir = straight.run_dir + "/ck";
    const auto full = train_quietly(straight);
    TrainOptions first;
    first.stop_after = 13;
    EXPECT_EQ(train_quietly(spec, first).steps, 13);
    TrainOptions second;
    second.resume = "latest";
    const auto rest = train_quietly(spec, second);
    EXPECT_EQ(rest.steps, 30);
    EXPECT_EQ(rest.last_loss, full.last_loss) << storage;
    EXPECT_TRUE(bitwise_equal(read_weights(full.last_checkpoint), read_weights(rest.last_checkpoint))) << storage;
    if (world->comm->rank() == 0) {
      auto file = h5::open_file(full.last_checkpoint);
      EXPECT_EQ(h5::read_string_attribute(h5::open_group(file, "embedding/0"), "storage"), storage);
    }
  }
}

// A bf16 checkpoint loads into an fp32 job exactly; an fp32 checkpoint loads into a bf16 or fp16
// job rounded to nearest; both evaluate.
TEST(HalfTables, CheckpointsConvertBetweenStorageTypes) {
  auto bf16 = half_spec("convert-bf16", "bf16", 5);
  bf16.train.steps = 20;
  bf16.data.eval.clear();
  const auto trained = train_quietly(bf16);
  const auto saved = read_weights(trained.last_checkpoint);

  auto fp32 = half_spec("convert-fp32", "fp32", 5);
  Trainer as_fp32(fp32, *world->comm);
  EXPECT_EQ(as_fp32.load(trained.last_checkpoint), 20);
  const std::string converted = fp32.run_dir + "/converted.h5";
  as_fp32.save(converted, 20);
  EXPECT_TRUE(bitwise_equal(read_weights(converted), saved));
  const auto eval32 = as_fp32.evaluate(fp32.data.eval, 4);
  EXPECT_GT(eval32.samples, 0);

  // The fp32 checkpoint (of values that are all bf16) into fp16: each rounded to nearest.
  auto fp16 = half_spec("convert-fp16", "fp16", 5);
  Trainer as_fp16(fp16, *world->comm);
  EXPECT_EQ(as_fp16.load(converted), 20);
  expect_storable(as_fp16, half::Storage::fp16);
  for (const auto& v : as_fp16.model().embedding().local_shards()) {
    const auto& table = saved[saved.size() - static_cast<std::size_t>(as_fp16.model().num_tables()) + v.table];
    ASSERT_EQ(table.name, fmt::format("embedding/{}/weights", v.table));
    for (std::int64_t i = 0; i < (v.row_end - v.row_begin) * v.dim; ++i) {
      const float want = half::fp16_to_float(half::float_to_fp16(table.values[v.row_begin * v.dim + i]));
      ASSERT_EQ(half::bits_of(v.weights[i]), half::bits_of(want)) << "table " << v.table << " element " << i;
    }
  }
  EXPECT_EQ(as_fp16.evaluate(fp16.data.eval, 4).samples, eval32.samples);
}

TEST(Bf16Dense, RefusedOnACpuWithoutAvx512Bf16) {
  if (device::cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has AVX512_BF16";
  auto spec = half_spec("bf16-refused", "fp32", 5);
  spec.precision.dense = DensePrecision::bf16;
  try {
    Trainer t(spec, *world->comm);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("AVX512_BF16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("precision.dense"), std::string::npos) << e.what();
  }
  spec.precision.dense = DensePrecision::automatic;  // fp32 here, no error
  Trainer t(spec, *world->comm);
  EXPECT_FALSE(t.model().dense_in_bf16());
}

// On a CPU with AVX512_BF16 the cpu backend takes bf16 GEMMs (oneDNN's native matmul), "auto"
// picks them too, and they learn as fp32 does (one seed, within 0.005; the emulator test below
// bounds the mean). Skipped elsewhere.
TEST(Bf16Dense, RunsNativelyOnACpuWithAvx512Bf16) {
  if (!device::cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  // A statistical check of the arithmetic, not of the exchange (the rank counts agree bit for bit
  // elsewhere): one rank is enough, and it is the slowest case of the suite.
  if (world->comm->size() > 1) GTEST_SKIP() << "run at 1 rank";
  const auto base = train_quietly(half_spec("native-fp32", "fp32", 5));
  for (const char* dense : {"bf16", "auto"}) {
    auto spec = half_spec(fmt::format("native-{}", dense), "bf16", 5);
    spec.device.gemm = device::CpuGemm::onednn;
    spec.precision.dense = parse_choice<DensePrecision>(dense, "precision.dense");
    Trainer t(spec, *world->comm);
    EXPECT_TRUE(t.model().dense_in_bf16()) << dense;
    TrainOptions options;
    options.quiet = true;
    const auto r = t.train(options);
    ASSERT_TRUE(r.eval.has_value() && base.eval.has_value());
    EXPECT_NEAR(r.eval->auc, base.eval->auc, 0.005) << dense;
    EXPECT_EQ(t.backend().last_half_gemm_path(), device::HalfGemmPath::native) << dense;
  }
}

// On the strict emulator (a device, whatever the CPU) bf16 GEMMs run: alone and with bf16 tables
// they learn as fp32 does (on the CPU backend): the mean eval AUC over seeds within 0.001; a
// single seed moves further than with 16-bit tables alone (measured -0.0033 to +0.0015), so it is
// bounded by 0.005.
TEST(Bf16Dense, LearnsThePlantedSignalAsFp32DoesOnTheEmulator) {
  // A statistical check of the arithmetic, not of the exchange (the rank counts agree bit for bit
  // elsewhere): one rank is enough, and it is the slowest case of the suite.
  if (world->comm->size() > 1) GTEST_SKIP() << "run at 1 rank";
  const std::uint64_t seeds[] = {5, 6, 7};
  const char* tables[] = {"fp32", "bf16"};
  double diff_sum[2] = {0, 0};
  for (std::uint64_t seed : seeds) {
    const auto base = train_quietly(half_spec(fmt::format("fp32-dense-{}", seed), "fp32", seed));
    ASSERT_TRUE(base.eval.has_value());
    for (int i = 0; i < 2; ++i) {
      auto spec = half_spec(fmt::format("strict-bf16-{}-{}", tables[i], seed), tables[i], seed);
      spec.device.kind = device::BackendKind::cpu_strict;
      spec.precision.dense = DensePrecision::bf16;
      const auto r = train_quietly(spec);
      ASSERT_TRUE(r.eval.has_value());
      EXPECT_NEAR(r.eval->auc, base.eval->auc, 0.005) << "tables " << tables[i] << ", seed " << seed;
      diff_sum[i] += r.eval->auc - base.eval->auc;
      if (world->comm->rank() == 0)
        std::printf("seed %d: eval AUC fp32 %.6f, bf16 GEMMs + %s tables %.6f\n", static_cast<int>(seed),
                    base.eval->auc, tables[i], r.eval->auc);
    }
  }
  for (int i = 0; i < 2; ++i)
    EXPECT_LE(std::abs(diff_sum[i] / std::size(seeds)), 0.001) << "bf16 GEMMs + " << tables[i] << " tables";
}

// The cross network's bf16 GEMMs (dcn, 2 layers of rank 8) learn the planted signal as its fp32
// GEMMs do: eval AUC within 0.005 for one seed, natively on a CPU with AVX512_BF16, on the strict
// emulator elsewhere.
TEST(Bf16Dense, CrossLayersLearnAsFp32Do) {
  if (world->comm->size() > 1) GTEST_SKIP() << "run at 1 rank";
  const bool native = device::cpu_has_avx512_bf16();
  auto dcn = [&](const std::string& name, DensePrecision dense) {
    auto spec = half_spec(name, "fp32", 5);
    spec.model.interaction = mlp::InteractionKind::dcn;
    spec.model.cross_layers = 2;
    spec.model.cross_rank = 8;
    spec.train.steps = native ? 600 : 300;  // the emulator's fine-grained kernels are slow
    if (!native) spec.device.kind = device::BackendKind::cpu_strict;
    spec.precision.dense = dense;
    return spec;
  };
  const auto base = train_quietly(dcn("dcn-fp32", DensePrecision::fp32));
  Trainer t(dcn("dcn-bf16", DensePrecision::bf16), *world->comm);
  EXPECT_TRUE(t.model().dense_in_bf16());
  TrainOptions options;
  options.quiet = true;
  const auto r = t.train(options);
  ASSERT_TRUE(r.eval.has_value() && base.eval.has_value());
  EXPECT_GT(base.eval->auc, 0.7);
  EXPECT_NEAR(r.eval->auc, base.eval->auc, 0.005);
  EXPECT_NE(t.backend().last_half_gemm_path(), device::HalfGemmPath::none);
  if (world->comm->rank() == 0)
    std::printf("dcn: eval AUC fp32 %.6f, bf16 GEMMs %.6f (%s)\n", base.eval->auc, r.eval->auc,
                native ? "native" : "emulator");
}

// TF32 GEMMs (the CPU backends emulate them: operands cut to TF32's 10 significand bits, fp32
// sums) learn as fp32 does: each seed's eval AUC within 0.005 of its fp32 run, on the CPU backend
// and under the strict emulator; the log names the way they ran; the fused fp32 CPU kernels and
// the dense replicas stand aside.
TEST(Tf32Dense, LearnsThePlantedSignalAsFp32Does) {
  if (world->comm->size() > 1) GTEST_SKIP() << "run at 1 rank";
  for (const std::uint64_t seed : {5, 6}) {
    const auto base = train_quietly(half_spec(fmt::format("fp32-tf32-base-{}", seed), "fp32", seed));
    ASSERT_TRUE(base.eval.has_value());
    for (const char* kind : {"cpu", "cpu-strict"}) {
      if (seed == 6 && std::string(kind) == "cpu-strict") continue;  // the emulator is slower: one seed
      auto spec = half_spec(fmt::format("tf32-{}-{}", kind, seed), "fp32", seed);
      spec.device.kind = parse_choice<device::BackendKind>(kind, "device.kind");
      spec.device.threads = 2;
      spec.precision.dense = DensePrecision::tf32;
      Trainer trainer(spec, *world->comm);
      EXPECT_EQ(trainer.device_pool().backend().fp32_math(), device::Fp32Math::tf32);
      EXPECT_FALSE(trainer.model().dense_in_bf16());
      TrainOptions options;
      options.quiet = true;
      const auto r = trainer.train(options);
      ASSERT_TRUE(r.eval.has_value());
      EXPECT_NEAR(r.eval->auc, base.eval->auc, 0.005) << kind << ", seed " << seed;
      if (world->comm->rank() == 0)
        std::printf("seed %d: eval AUC fp32 %.6f, tf32 GEMMs on %s %.6f\n", static_cast<int>(seed), base.eval->auc,
                    kind, r.eval->auc);
    }
  }
}

}  // namespace

int registered = register_world();
