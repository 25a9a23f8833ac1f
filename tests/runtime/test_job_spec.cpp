#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "core/error.hpp"
#include "data/format.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/train/job_spec_sched.hpp"

using namespace recmix;
using namespace recmix::runtime;

namespace {

const char* kMinimal = R"(
name = "t"
[data]
train = "train.h5"
)";

std::string expect_config_error(const std::string& text) {
  try {
    parse_job_spec(text, "job.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return "";
}

}  // namespace

TEST(JobSpec, DefaultsFollowTheReferenceKaggleModel) {
  auto spec = parse_job_spec(kMinimal, "job.toml", "/base");
  EXPECT_EQ(spec.model.embedding_dim, 16);
  EXPECT_EQ(spec.model.bottom_mlp, (std::vector<int>{512, 256, 64, 16}));
  EXPECT_EQ(spec.model.top_mlp, (std::vector<int>{512, 256, 1}));
  EXPECT_EQ(spec.model.interaction, mlp::InteractionKind::dot);
  ASSERT_EQ(spec.data.train.size(), 1u);
  EXPECT_EQ(spec.data.train[0], "/base/train.h5");  // relative to the spec's folder
  EXPECT_EQ(spec.run_dir, "/base/runs/t");
  EXPECT_EQ(spec.checkpoint.dir, "/base/runs/t/checkpoints");
  EXPECT_EQ(spec.device.dense_replicas, DenseReplicas::automatic);
  EXPECT_EQ(spec.device.gemm, device::CpuGemm::automatic);
}

TEST(JobSpec, ReadsEverySection) {
  auto spec = parse_job_spec(R"(
name = "full"
seed = 7
sharding = "auto"
[model]
tables = [10, 20]
embedding_dim = 4
bottom_mlp = [8, 4]
top_mlp = [6, 1]
interaction = "cat"
pooling = "mean"
[optimizer]
dense = "adam"
sparse = "rowwise_adagrad"
lr = 0.5
sparse_lr = 0.25
[data]
train = ["/a.h5", "/b.h5"]
eval = "/c.h5"
shuffle = true
[train]
batch_size = 64
steps = 100
eval_interval = 10
log_interval = 25
[checkpoint]
dir = "/ck"
interval = 50
[device]
threads = 2
dense_replicas = "off"
memory_capacity = "1.5GiB"
)", "job.toml");
  EXPECT_EQ(spec.seed, 7u);
  EXPECT_EQ(spec.model.table_rows, (std::vector<std::int64_t>{10, 20}));
  EXPECT_EQ(spec.model.pooling, embedding::Pooling::mean);
  EXPECT_EQ(spec.optimizer.dense, DenseOptimizerKind::adam);
  EXPECT_FLOAT_EQ(spec.optimizer.sparse_lr, 0.25f);
  EXPECT_EQ(spec.data.train.size(), 2u);
  EXPECT_TRUE(spec.data.shuffle);
  EXPECT_EQ(spec.train.steps, 100);
  EXPECT_EQ(spec.train.log_interval, 25);
  EXPECT_EQ(spec.checkpoint.dir, "/ck");
  EXPECT_EQ(spec.device.memory_capacity, static_cast<std::uint64_t>(1.5 * 1024 * 1024 * 1024));
  EXPECT_EQ(spec.device.dense_replicas, DenseReplicas::off);
}

// total_steps and no_step_left, worked out by hand: train.steps wins over epochs; a resumed step
// equal to the total or past it has nothing left, one short of it has one step.
TEST(JobSpec, NoStepLeftAtOrPastTheTotal) {
  JobSpec spec;
  spec.train.steps = 0;
  spec.train.epochs = 3;
  EXPECT_EQ(total_steps(spec, 7), 21);
  EXPECT_FALSE(no_step_left(spec, 20, 7));
  EXPECT_TRUE(no_step_left(spec, 21, 7));
  EXPECT_TRUE(no_step_left(spec, 30, 7));
  spec.train.steps = 10;
  EXPECT_EQ(total_steps(spec, 7), 10);
  EXPECT_FALSE(no_step_left(spec, 9, 7));
  EXPECT_TRUE(no_step_left(spec, 10, 7));
}

TEST(JobSpec, UnknownKeysAreNamed) {
  auto msg = expect_config_error(std::string(kMinimal) + "[train]\nbatchsize = 3\n");
  EXPECT_NE(msg.find("train.batchsize"), std::string::npos) << msg;
  msg = expect_config_error(std::string("colour = 1\n") + kMinimal);
  EXPECT_NE(msg.find("'colour'"), std::string::npos) << msg;
}

TEST(JobSpec, BadValuesAreNamed) {
  auto msg = expect_config_error(std::string(kMinimal) + "[train]\nbatch_size = 0\n");
  EXPECT_NE(msg.find("train.batch_size"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[optimizer]\ndense = \"lamb\"\n");
  EXPECT_NE(msg.find("optimizer.dense"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[model]\nbottom_mlp = [8, 5]\n");
  EXPECT_NE(msg.find("model.bottom_mlp"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[model]\ntop_mlp = [8, 2]\n");
  EXPECT_NE(msg.find("model.top_mlp"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[device]\nmemory_capacity = \"4 parsecs\"\n");
  EXPECT_NE(msg.find("device.memory_capacity"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[device]\ndense_replicas = \"maybe\"\n");
  EXPECT_NE(msg.find("device.dense_replicas"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[device]\ngemm = \"mkl\"\n");
  EXPECT_NE(msg.find("device.gemm"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[train]\nlog_interval = -1\n");
  EXPECT_NE(msg.find("train.log_interval"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[train]\nsteps = \"ten\"\n");
  EXPECT_NE(msg.find("train.steps"), std::string::npos) << msg;
  msg = expect_config_error("name = \"x\"\n");
  EXPECT_NE(msg.find("data.train"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[model]\ninteraction = \"dcn\"\ncross_layers = 0\n");
  EXPECT_NE(msg.find("model.cross_layers"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[model]\ninteraction = \"dcn\"\ncross_rank = -2\n");
  EXPECT_NE(msg.find("model.cross_rank"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[model]\ncross_rank = 64\n");  // the dot interaction
  EXPECT_NE(msg.find("model.cross_rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"dcn\""), std::string::npos) << msg;
}

TEST(JobSpec, ReadsTheSchedule) {
  auto spec = parse_job_spec(std::string(kMinimal) +
                                 "[optimizer]\nwarmup_steps = 10\ndecay_start = 20\ndecay_steps = 30\ndecay_power = 1.5\n",
                             "job.toml");
  EXPECT_EQ(spec.optimizer.schedule.warmup_steps, 10);
  EXPECT_EQ(spec.optimizer.schedule.decay_start, 20);
  EXPECT_EQ(spec.optimizer.schedule.decay_steps, 30);
  EXPECT_EQ(spec.optimizer.schedule.decay_power, 1.5);
  EXPECT_FALSE(parse_job_spec(kMinimal, "job.toml").optimizer.schedule.active());
  auto msg = expect_config_error(std::string(kMinimal) + "[optimizer]\nwarmup_steps = 10\ndecay_start = 5\ndecay_steps = 9\n");
  EXPECT_NE(msg.find("optimizer.decay_start"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[optimizer]\ndecay_power = 2\n");  // no decay_steps
  EXPECT_NE(msg.find("optimizer.decay_power"), std::string::npos) << msg;
  msg = expect_config_error(std::string(kMinimal) + "[optimizer]\nwarmup_steps = -1\n");
  EXPECT_NE(msg.find("optimizer.warmup_steps"), std::string::npos) << msg;
}

TEST(JobSpec, ReadsTheCrossNetwork) {
  auto spec = parse_job_spec(std::string(kMinimal) + "[model]\ninteraction = \"dcn\"\n", "job.toml");
  EXPECT_EQ(spec.model.interaction, mlp::InteractionKind::dcn);
  EXPECT_EQ(spec.model.cross_layers, 3);  // DLRM-DCNv2's
  EXPECT_EQ(spec.model.cross_rank, 512);
  spec = parse_job_spec(std::string(kMinimal) + "[model]\ninteraction = \"dcn\"\ncross_layers = 2\ncross_rank = 0\n",
                        "job.toml");
  EXPECT_EQ(spec.model.cross_layers, 2);
  EXPECT_EQ(spec.model.cross_rank, 0);
}

TEST(JobSpec, SyntaxErrorsGiveLineAndColumn) {
  auto msg = expect_config_error("name = \"x\n[data]\n");
  EXPECT_NE(msg.find("job.toml:1:"), std::string::npos) << msg;
}

TEST(JobSpec, MissingFileIsAnIoError) {
  EXPECT_THROW(load_job_spec("/nonexistent/job.toml"), IoError);
}

TEST(JobSpec, ByteSizes) {
  EXPECT_EQ(parse_byte_size("1024", "k"), 1024u);
  EXPECT_EQ(parse_byte_size("2KiB", "k"), 2048u);
  EXPECT_EQ(parse_byte_size("3 MB", "k"), 3000000u);
  EXPECT_THROW(parse_byte_size("GiB", "k"), ConfigError);
}

TEST(JobSpec, EmbeddingTiers) {
  auto spec = parse_job_spec(std::string(kMinimal) +
                                 "[embedding]\nhot_fraction = 0.1\nhot_set = \"lfu\"\nrerank_interval = 50\n"
                                 "cold_update = \"host\"\n",
                             "job.toml");
  EXPECT_TRUE(spec.embedding.tiered());
  EXPECT_DOUBLE_EQ(spec.embedding.hot_fraction, 0.1);
  EXPECT_EQ(spec.embedding.hot_set, embedding::HotSet::lfu);
  EXPECT_EQ(spec.embedding.rerank_interval, 50);
  EXPECT_EQ(spec.embedding.cold_update, embedding::ColdUpdate::host);
  spec = parse_job_spec(std::string(kMinimal) + "[embedding]\ndevice_budget = \"2GiB\"\n", "job.toml");
  EXPECT_EQ(spec.embedding.device_budget, 2ull << 30);
  EXPECT_TRUE(spec.embedding.tiered());
  EXPECT_FALSE(parse_job_spec(kMinimal, "job.toml").embedding.tiered());
  for (const char* bad : {"hot_fraction = 0", "hot_fraction = 1.5", "hot_fraction = -0.2", "hot_fraction = \"10%\"",
                          "device_budget = 0", "device_budget = \"lots\"", "hot_fraction = 0.1\ndevice_budget = 1000",
                          "hot_set = \"lru\"", "cold_update = \"gpu\"", "rerank_interval = -1", "hot_rows = 5"}) {
    const auto msg = expect_config_error(std::string(kMinimal) + "[embedding]\n" + bad + "\n");
    EXPECT_NE(msg.find("embedding."), std::string::npos) << bad << ": " << msg;
  }
}

TEST(JobSpec, Precision) {
  auto spec = parse_job_spec(kMinimal, "job.toml");
  EXPECT_EQ(spec.precision.dense, DensePrecision::fp32);
  EXPECT_EQ(spec.precision.embedding, half::Storage::fp32);
  EXPECT_EQ(spec.precision.rounding, Rounding::stochastic);
  spec = parse_job_spec(std::string(kMinimal) + "[precision]\ndense = \"auto\"\nembedding = \"bf16\"\nrounding = \"nearest\"\n",
                        "job.toml");
  EXPECT_EQ(spec.precision.dense, DensePrecision::automatic);
  EXPECT_EQ(spec.precision.embedding, half::Storage::bf16);
  EXPECT_EQ(spec.precision.rounding, Rounding::nearest);
  for (const char* bad : {"dense = \"fp16\"", "embedding = \"fp8\"", "rounding = \"up\"", "tables = \"fp16\""}) {
    const auto msg = expect_config_error(std::string(kMinimal) + "[precision]\n" + bad + "\n");
    EXPECT_NE(msg.find("precision."), std::string::npos) << bad << ": " << msg;
  }
  // 16-bit tables can be tiered.
  spec = parse_job_spec(std::string(kMinimal) + "[embedding]\nhot_fraction = 0.5\n[precision]\nembedding = \"fp16\"\n",
                        "job.toml");
  EXPECT_EQ(spec.precision.embedding, half::Storage::fp16);
  EXPECT_TRUE(spec.embedding.tiered());
}

// Sizes that do not fit in 64 bits are errors naming the key, never wrapped values; so is
// anything that is not a plain non-negative number.
TEST(JobSpec, ByteSizesThatOverflowOrAreNotNumbers) {
  EXPECT_EQ(parse_byte_size("17179869183GiB", "k"), 18446744072635809792ull);  // 2^64 - 2^30
  EXPECT_EQ(parse_byte_size("1.5KiB", "k"), 1536u);
  for (const std::string& too_large : std::vector<std::string>{"100000000TiB", "17179869184GiB", "18446744073709551616",
                                                                 "20000000000000000000000", std::string(400, '9')}) {
    try {
      parse_byte_size(too_large, "device.memory_capacity");
      ADD_FAILURE() << too_large << " was accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'device.memory_capacity'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
    }
  }
  for (const char* bad : {"nan", "inf", "-1", "-1GiB", "1.2.3", ".", "1e3", "", " 5"})
    EXPECT_THROW(parse_byte_size(bad, "k"), ConfigError) << bad;
  const auto msg = expect_config_error(std::string(kMinimal) + "[device]\nmemory_capacity = \"100000000TiB\"\n");
  EXPECT_NE(msg.find("device.memory_capacity"), std::string::npos) << msg;
  EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
}

// Every choice key: each old spelling still parses, to its enum; a bad value names the key and
// lists the spellings it takes.
TEST(JobSpec, ChoiceKeysParseToEnumsAndNameTheKeyOnABadValue) {
  struct Key {
    const char* section;
    const char* key;
    std::vector<std::string> spellings;  // as the error lists them
    std::function<int(const JobSpec&)> value;
  };
  const std::vector<Key> keys = {
      {"model", "interaction", {"dot", "cat", "dcn"}, [](const JobSpec& s) { return int(s.model.interaction); }},
      {"model", "pooling", {"sum", "mean"}, [](const JobSpec& s) { return int(s.model.pooling); }},
      {"optimizer", "dense", {"sgd", "adagrad", "adam"}, [](const JobSpec& s) { return int(s.optimizer.dense); }},
      {"optimizer", "sparse", {"sgd", "adagrad", "rowwise_adagrad"},
       [](const JobSpec& s) { return int(s.optimizer.sparse); }},
      {"checkpoint", "when_busy", {"wait", "skip"}, [](const JobSpec& s) { return int(s.checkpoint.when_busy); }},
      {"device", "kind", {"cpu", "cuda", "cpu-strict"}, [](const JobSpec& s) { return int(s.device.kind); }},
      {"device", "dense_replicas", {"auto", "on", "off"}, [](const JobSpec& s) { return int(s.device.dense_replicas); }},
      {"device", "gemm", {"auto", "openblas", "onednn"}, [](const JobSpec& s) { return int(s.device.gemm); }},
      {"embedding", "hot_set", {"counts", "lfu"}, [](const JobSpec& s) { return int(s.embedding.hot_set); }},
      {"embedding", "cold_update", {"device", "host"}, [](const JobSpec& s) { return int(s.embedding.cold_update); }},
      {"precision", "dense", {"fp32", "tf32", "bf16", "auto"}, [](const JobSpec& s) { return int(s.precision.dense); }},
      {"precision", "embedding", {"fp32", "fp16", "bf16"}, [](const JobSpec& s) { return int(s.precision.embedding); }},
      {"precision", "rounding", {"stochastic", "nearest"}, [](const JobSpec& s) { return int(s.precision.rounding); }},
  };
  for (const auto& k : keys) {
    const std::string name = std::string(k.section) + "." + k.key;
    std::set<int> values;
    for (const auto& text : k.spellings) {
      const auto spec =
          parse_job_spec(fmt::format("{}[{}]\n{} = \"{}\"\n", kMinimal, k.section, k.key, text), "job.toml");
      values.insert(k.value(spec));
    }
    EXPECT_EQ(values.size(), k.spellings.size()) << name << ": two spellings gave the same value";
    const auto msg =
        expect_config_error(fmt::format("{}[{}]\n{} = \"no-such\"\n", kMinimal, k.section, k.key));
    EXPECT_EQ(msg, fmt::format("job.toml: '{}' must be one of {} (got \"no-such\")", name, fmt::join(k.spellings, ", ")));
  }
  // The switches take true, false or "auto".
  for (const char* key : {"graphs", "l2_window"}) {
    auto spec = parse_job_spec(fmt::format("{}[device]\n{} = true\n", kMinimal, key), "job.toml");
    EXPECT_EQ(std::string(key) == "graphs" ? spec.device.graphs : spec.device.l2_window, AutoSwitch::on) << key;
    spec = parse_job_spec(fmt::format("{}[device]\n{} = false\n", kMinimal, key), "job.toml");
    EXPECT_EQ(std::string(key) == "graphs" ? spec.device.graphs : spec.device.l2_window, AutoSwitch::off) << key;
    spec = parse_job_spec(fmt::format("{}[device]\n{} = \"auto\"\n", kMinimal, key), "job.toml");
    EXPECT_EQ(std::string(key) == "graphs" ? spec.device.graphs : spec.device.l2_window, AutoSwitch::automatic) << key;
    const auto msg = expect_config_error(fmt::format("{}[device]\n{} = \"yes\"\n", kMinimal, key));
    EXPECT_EQ(msg, fmt::format("job.toml: 'device.{}' must be true, false or \"auto\"", key));
  }
}

// The command line's overrides go through the same spellings.
TEST(JobSpec, ChoicesSpellBackAsTheyParse) {
  EXPECT_EQ(parse_choice<device::BackendKind>("cpu-strict", "--device"), device::BackendKind::cpu_strict);
  EXPECT_EQ(spelling(device::BackendKind::cpu_strict), "cpu-strict");
  EXPECT_EQ(parse_choice<AutoSwitch>("false", "--graphs"), AutoSwitch::off);
  EXPECT_EQ(spelling(AutoSwitch::automatic), "auto");
  EXPECT_EQ(spelling(SparseOptimizerKind::rowwise_adagrad), "rowwise_adagrad");
  try {
    parse_choice<device::CpuGemm>("mkl", "--gemm");
    ADD_FAILURE() << "mkl accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "'--gemm' must be one of auto, openblas, onednn (got \"mkl\")");
  }
}

// The scheduler's view of a spec: the dataset's tables with the model's width, the cross layers
// of dcn, the tiers, 16-bit tables and bf16 GEMMs, the optimizers and the length.
TEST(JobSpec, SchedViewOfADcnTieredBf16Spec) {
  const auto spec = parse_job_spec(std::string(kMinimal) +
                                       "[model]\ninteraction = \"dcn\"\ncross_layers = 2\ncross_rank = 64\n"
                                       "embedding_dim = 8\nbottom_mlp = [32, 8]\ntop_mlp = [16, 1]\n"
                                       "[embedding]\nhot_fraction = 0.25\n"
                                       "[optimizer]\ndense = \"adam\"\nsparse = \"rowwise_adagrad\"\n"
                                       "[train]\nbatch_size = 64\nepochs = 2\n"
                                       "[device]\nkind = \"cuda\"\n"
                                       "[precision]\ndense = \"bf16\"\nembedding = \"bf16\"\n",
                                   "job.toml");
  data::DatasetInfo info;
  info.rows = 1000;
  info.num_dense = 13;
  info.table_rows = {100, 200, 300};
  info.max_bag = {1, 4, 2};
  const sched::JobSpec s = to_sched_spec(spec, info, 4, 3, 12.5);
  ASSERT_EQ(s.shape.tables.size(), 3u);
  EXPECT_EQ(s.shape.tables[1].rows, 200);
  EXPECT_EQ(s.shape.tables[1].dim, 8);
  EXPECT_EQ(s.shape.bottom_mlp, (std::vector<int>{13, 32, 8}));
  EXPECT_EQ(s.shape.top_mlp, (std::vector<int>{16, 1}));
  EXPECT_FALSE(s.shape.concat_interaction);
  EXPECT_EQ(s.shape.cross_layers, 2);
  EXPECT_EQ(s.shape.cross_rank, 64);
  EXPECT_EQ(s.shape.pooling, 4);
  EXPECT_TRUE(s.tiering.enabled);
  EXPECT_TRUE(s.tiering.pinned_transit);
  EXPECT_TRUE(s.device_kernels);
  EXPECT_DOUBLE_EQ(s.tiering.hot_fraction, 0.25);
  EXPECT_EQ(s.table_bytes, 2);
  EXPECT_EQ(s.gemm_math, sched::GemmMath::bf16);
  EXPECT_TRUE(s.graphs);  // "auto" on cuda
  EXPECT_EQ(s.global_batch, 64);
  EXPECT_EQ(s.optimizer, DenseOptimizerKind::adam);
  EXPECT_EQ(s.sparse_optimizer, SparseOptimizerKind::rowwise_adagrad);
  EXPECT_EQ(s.ranks, 4);
  EXPECT_EQ(s.steps, 2 * (1000 / 64));
  EXPECT_EQ(s.priority, 3);
  EXPECT_DOUBLE_EQ(s.arrival_s, 12.5);
  EXPECT_NO_THROW(sched::validate(s));

  // The defaults: dot, untiered (every row hot), fp32 on the cpu backend, no graphs there.
  const sched::JobSpec d = to_sched_spec(parse_job_spec(kMinimal, "job.toml"), info, 1);
  EXPECT_EQ(d.shape.cross_layers, 0);
  EXPECT_FALSE(d.tiering.enabled);
  EXPECT_FALSE(d.tiering.pinned_transit);
  EXPECT_FALSE(d.device_kernels);
  EXPECT_DOUBLE_EQ(d.tiering.hot_fraction, 1.0);
  EXPECT_EQ(d.table_bytes, 4);
  EXPECT_EQ(d.gemm_math, sched::GemmMath::fp32);
  EXPECT_FALSE(d.graphs);
  EXPECT_NO_THROW(sched::validate(d));
  // cat, tf32, "auto" precision counted as bf16, graphs forced on the cpu.
  auto c = parse_job_spec(std::string(kMinimal) + "[model]\ninteraction = \"cat\"\n[precision]\ndense = \"tf32\"\n"
                                                  "[device]\ngraphs = true\n",
                          "job.toml");
  EXPECT_TRUE(to_sched_spec(c, info, 1).shape.concat_interaction);
  EXPECT_EQ(to_sched_spec(c, info, 1).gemm_math, sched::GemmMath::tf32);
  EXPECT_TRUE(to_sched_spec(c, info, 1).graphs);
  c.precision.dense = DensePrecision::automatic;
  EXPECT_EQ(to_sched_spec(c, info, 1).gemm_math, sched::GemmMath::bf16);
}
