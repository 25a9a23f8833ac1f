// The whole trainer with hot/cold embedding tiers, at 1, 2 and 4 ranks: the same losses and
// weights as untiered training, bit for bit (hot fraction, device budget, LFU re-ranks, cold
// updates on the host; one-hot and multi-hot data; under the strict device emulator, and on a GPU
// where one is present), resume across tiering settings, and a model four times larger than the
// device memory that trains.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.hpp"
#include "mlp/cpu/linear.hpp"
#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;

namespace {

struct TierCase {
  const char* name;
  const char* data;
  const char* sparse;
  const char* tiers;  // TOML lines of [embedding]
  const char* kind;   // device.kind of the tiered run (cuda: the untiered run's too)
  const char* tables = "fp32";  // [precision] embedding of both runs
};

std::ostream& operator<<(std::ostream& os, const TierCase& c) { return os << c.name; }

void set_tiers(JobSpec& spec, const std::string& toml) {
  auto parsed = parse_job_spec("[data]\ntrain = \"x.h5\"\n[embedding]\n" + toml, "tiers");
  spec.embedding = parsed.embedding;
}

class TieredTrainer : public testing::TestWithParam<TierCase> {};

TEST_P(TieredTrainer, EqualsUntieredBitForBit) {
  const TierCase& c = GetParam();
  auto& comm = *world->comm;
  // The CPU backend's fused linear kernels round differently from the GEMM + bias path the
  // emulator takes; off, the backends do the same arithmetic.
  const bool strict = std::string(c.kind) == "cpu-strict";
  const bool gpu = std::string(c.kind) == "cuda";
  if (gpu && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  if (gpu && device::cuda_device_count() < comm.size()) GTEST_SKIP() << "needs a GPU per rank";
  if (strict) mlp::cpu::set_fused_linear_enabled(false);
  auto spec = small_spec(fmt::format("tiered-{}", c.name), c.data);
  spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(c.sparse, "optimizer.sparse");
  spec.precision.embedding = parse_choice<half::Storage>(c.tables, "precision.embedding");
  if (gpu) spec.device.kind = device::BackendKind::cuda;  // the GPU against itself: its copies, streams and pinned memory
  const std::string dir = run_dir(spec.name);
  const auto plain = train_steps(spec, comm, 12, dir + "/untiered.h5");
  spec.name += "-tiered";
  spec.device.kind = parse_choice<device::BackendKind>(c.kind, "device.kind");
  set_tiers(spec, c.tiers);
  const auto tiered = train_steps(spec, comm, 12, dir + "/tiered.h5");
  if (strict) mlp::cpu::set_fused_linear_enabled(true);
  EXPECT_EQ(tiered, plain);
  const auto a = read_weights(dir + "/tiered.h5"), b = read_weights(dir + "/untiered.h5");
  EXPECT_TRUE(bitwise_equal(a, b)) << "largest relative difference " << max_relative_difference(a, b) << " in "
                                   << differing_tensors(a, b);
}

INSTANTIATE_TEST_SUITE_P(
    Tiers, TieredTrainer,
    testing::Values(TierCase{"fraction_sgd", "train.h5", "sgd", "hot_fraction = 0.1", "cpu"},
                    TierCase{"fraction_adagrad", "train.h5", "adagrad", "hot_fraction = 0.05", "cpu"},
                    TierCase{"budget_rowwise", "train.h5", "rowwise_adagrad", "device_budget = \"40KiB\"", "cpu"},
                    TierCase{"lfu_adagrad", "train.h5", "adagrad",
                             "hot_fraction = 0.1\nhot_set = \"lfu\"\nrerank_interval = 3", "cpu"},
                    TierCase{"host_update_rowwise", "train.h5", "rowwise_adagrad",
                             "hot_fraction = 0.1\ncold_update = \"host\"", "cpu"},
                    TierCase{"multi_hot_adagrad", "multi.h5", "adagrad", "hot_fraction = 0.2", "cpu"},
                    TierCase{"strict_lfu_rowwise", "train.h5", "rowwise_adagrad",
                             "hot_fraction = 0.1\nhot_set = \"lfu\"\nrerank_interval = 4", "cpu-strict"},
                    TierCase{"strict_multi_hot_sgd", "multi.h5", "sgd", "device_budget = \"40KiB\"", "cpu-strict"},
                    TierCase{"strict_host_update_adagrad", "train.h5", "adagrad",
                             "hot_fraction = 0.1\ncold_update = \"host\"", "cpu-strict"},
                    TierCase{"strict_host_update_multi_hot", "multi.h5", "rowwise_adagrad",
                             "hot_fraction = 0.3\ncold_update = \"host\"", "cpu-strict"},
                    // On a GPU (skipped without one): pinned transit rows, the copy stream and its
                    // events, the lookahead against real asynchronous copies.
                    TierCase{"cuda_fraction_adagrad", "train.h5", "adagrad", "hot_fraction = 0.05", "cuda"},
                    TierCase{"cuda_lfu_rowwise", "train.h5", "rowwise_adagrad",
                             "hot_fraction = 0.1\nhot_set = \"lfu\"\nrerank_interval = 3", "cuda"},
                    TierCase{"cuda_multi_hot_sgd", "multi.h5", "sgd", "device_budget = \"40KiB\"", "cuda"},
                    TierCase{"cuda_host_update_multi_hot", "multi.h5", "rowwise_adagrad",
                             "hot_fraction = 0.3\ncold_update = \"host\"", "cuda"},
                    // 16-bit tables, rounded stochastically: the rounding follows each row into
                    // whatever slot it is staged in.
                    TierCase{"fp16_fraction_sgd", "train.h5", "sgd", "hot_fraction = 0.1", "cpu", "fp16"},
                    TierCase{"bf16_host_update_multi_hot", "multi.h5", "adagrad",
                             "hot_fraction = 0.2\ncold_update = \"host\"", "cpu", "bf16"},
                    TierCase{"strict_bf16_lfu_rowwise", "train.h5", "rowwise_adagrad",
                             "hot_fraction = 0.1\nhot_set = \"lfu\"\nrerank_interval = 4", "cpu-strict", "bf16"},
                    TierCase{"strict_fp16_host_update_multi_hot", "multi.h5", "sgd",
                             "device_budget = \"40KiB\"\ncold_update = \"host\"", "cpu-strict", "fp16"},
                    TierCase{"cuda_bf16_fraction_adagrad", "train.h5", "adagrad", "hot_fraction = 0.05", "cuda", "bf16"},
                    TierCase{"cuda_fp16_host_update_multi_hot", "multi.h5", "rowwise_adagrad",
                             "hot_fraction = 0.3\ncold_update = \"host\"", "cuda", "fp16"}),
    [](const auto& info) { return std::string(info.param.name); });

// Checkpoints hold the logical tables: a tiered run resumed untiered, and an untiered run
// resumed tiered, each end where the untiered run ends, bit for bit.
TEST(TieredTrainerRun, ResumesAcrossTieringSettings) {
  auto& comm = *world->comm;
  auto base = small_spec("tiered-resume");
  base.optimizer.sparse = SparseOptimizerKind::adagrad;
  base.data.eval.clear();
  auto run = [&](const std::string& name, const std::string& first, const std::string& second) {
    auto spec = base;
    spec.name = name;
    spec.run_dir = run_dir(name);
    spec.checkpoint.dir = spec.run_dir + "/checkpoints";
    set_tiers(spec, first);
    {
      Trainer t(spec, comm);
      t.train(quiet(7));
    }
    spec.embedding = {};
    set_tiers(spec, second);
    Trainer t(spec, comm);
    auto r = t.train(quiet(0, "latest"));
    t.save(spec.run_dir + "/final.h5", r.steps);
    return std::pair{r, spec.run_dir + "/final.h5"};
  };
  auto straight_spec = base;
  straight_spec.run_dir = run_dir("tiered-resume-straight");
  straight_spec.checkpoint.dir = straight_spec.run_dir + "/checkpoints";
  Trainer straight(straight_spec, comm);
  const auto s = straight.train(quiet());
  straight.save(straight_spec.run_dir + "/final.h5", s.steps);
  const auto [a, a_file] = run("tiered-then-untiered", "hot_fraction = 0.1\nhot_set = \"lfu\"\nrerank_interval = 2", "");
  const auto [b, b_file] = run("untiered-then-tiered", "", "device_budget = \"40KiB\"");
  const auto want = read_weights(straight_spec.run_dir + "/final.h5");
  EXPECT_EQ(a.last_loss, s.last_loss);
  EXPECT_EQ(b.last_loss, s.last_loss);
  EXPECT_TRUE(bitwise_equal(read_weights(a_file), want));
  EXPECT_TRUE(bitwise_equal(read_weights(b_file), want));
  if (comm.rank() == 0) {  // rank 0 reports its shards' hit rate
    EXPECT_GE(b.hot_hit_rate, 0.0);
    EXPECT_LE(b.hot_hit_rate, 1.0);
  }
}

// Device memory too small for the tables: untiered, an out-of-memory error; tiered at 10% hot,
// training. (The literal 4x case, with tables large enough to dwarf the MLPs, is in
// bench/embedding/bench_tiers.sh.) A host tier above host_memory_capacity is the same clear error,
// naming the host tier. One rank: there the whole model is this rank's.
TEST(TieredTrainerRun, AModelLargerThanDeviceMemoryTrains) {
  auto& comm = *world->comm;
  if (comm.size() != 1) GTEST_SKIP() << "one rank holds the whole model";
  auto spec = small_spec("tiered-large");
  spec.data.eval.clear();
  spec.run_dir = run_dir(spec.name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  std::size_t peak = 0, tables = 0;
  {
    Trainer t(spec, comm);
    t.train(quiet());
    peak = t.device_pool().peak_bytes();
    tables = t.model().embedding().local_bytes();
  }
  // Half the tables' memory missing: tiered, they need 10% and the staging slots.
  spec.device.memory_capacity = peak - tables / 2;
  try {
    Trainer t(spec, comm);
    t.train(quiet());
    FAIL() << "untiered tables above the device memory were accepted";
  } catch (const OutOfMemoryError& e) {
    // The allocation that crosses the capacity is named: on this small model, whose tables are
    // smaller than the step's own buffers, one made after the tables.
    const std::string what = e.what();
    EXPECT_NE(what.find("for 'tiered-large' does not fit in device memory"), std::string::npos) << what;
    EXPECT_NE(what.find("capacity"), std::string::npos) << what;
  }
  set_tiers(spec, "hot_fraction = 0.1");
  spec.name = "tiered-large-tiered";
  spec.run_dir = run_dir(spec.name);
  spec.checkpoint.dir = spec.run_dir + "/checkpoints";
  spec.train.log_interval_s = 0;  // a metrics record every step
  {
    Trainer t(spec, comm);
    const auto r = t.train(quiet());
    EXPECT_EQ(r.steps, 20);
    EXPECT_TRUE(std::isfinite(r.last_loss));
    EXPECT_LE(t.device_pool().peak_bytes(), spec.device.memory_capacity);
    EXPECT_LT(t.model().embedding().local_bytes(), tables / 2);
    EXPECT_GT(r.hot_hit_rate, 0.0);  // the synthetic data is Zipf-skewed: the hottest 10% serve lookups
    EXPECT_LT(r.hot_hit_rate, 1.0);
  }
  // The tier counters of every step in metrics.jsonl.
  std::ifstream metrics(spec.run_dir + "/metrics.jsonl");
  std::string line;
  int records = 0;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "train") continue;
    ++records;
    EXPECT_GE(j["hot_hit_rate"].get<double>(), 0.0) << line;
    EXPECT_LE(j["hot_hit_rate"].get<double>(), 1.0) << line;
    EXPECT_GT(j["cold_rows_per_step"].get<double>(), 0.0) << line;
    EXPECT_GT(j["bytes_to_device_per_step"].get<std::size_t>(), 0u) << line;
    EXPECT_GE(j["staging_s_per_step"].get<double>(), 0.0) << line;
  }
  EXPECT_EQ(records, 20);
  auto small_host = spec;
  small_host.name = "tiered-small-host";
  small_host.device.host_memory_capacity = tables / 2;
  try {
    Trainer t(small_host, comm);
    FAIL() << "a host tier above host_memory_capacity was accepted";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("host tier"), std::string::npos) << e.what();
  }
}

}  // namespace

int registered = register_world();
