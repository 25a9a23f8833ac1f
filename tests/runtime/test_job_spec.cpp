#include <gtest/gtest.h>

#include "core/error.hpp"
#include "runtime/train/job_spec.hpp"

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
  EXPECT_EQ(spec.model.interaction, "dot");
  ASSERT_EQ(spec.data.train.size(), 1u);
  EXPECT_EQ(spec.data.train[0], "/base/train.h5");  // relative to the spec's folder
  EXPECT_EQ(spec.run_dir, "/base/runs/t");
  EXPECT_EQ(spec.checkpoint.dir, "/base/runs/t/checkpoints");
  EXPECT_EQ(spec.device.dense_replicas, "auto");
  EXPECT_EQ(spec.device.gemm, "auto");
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
  EXPECT_EQ(spec.model.pooling, "mean");
  EXPECT_EQ(spec.optimizer.dense, "adam");
  EXPECT_FLOAT_EQ(spec.optimizer.sparse_lr, 0.25f);
  EXPECT_EQ(spec.data.train.size(), 2u);
  EXPECT_TRUE(spec.data.shuffle);
  EXPECT_EQ(spec.train.steps, 100);
  EXPECT_EQ(spec.checkpoint.dir, "/ck");
  EXPECT_EQ(spec.device.memory_capacity, static_cast<std::uint64_t>(1.5 * 1024 * 1024 * 1024));
  EXPECT_EQ(spec.device.dense_replicas, "off");
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
  EXPECT_EQ(spec.model.interaction, "dcn");
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
  EXPECT_EQ(spec.embedding.hot_set, "lfu");
  EXPECT_EQ(spec.embedding.rerank_interval, 50);
  EXPECT_EQ(spec.embedding.cold_update, "host");
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
  EXPECT_EQ(spec.precision.dense, "fp32");
  EXPECT_EQ(spec.precision.embedding, "fp32");
  EXPECT_EQ(spec.precision.rounding, "stochastic");
  spec = parse_job_spec(std::string(kMinimal) + "[precision]\ndense = \"auto\"\nembedding = \"bf16\"\nrounding = \"nearest\"\n",
                        "job.toml");
  EXPECT_EQ(spec.precision.dense, "auto");
  EXPECT_EQ(spec.precision.embedding, "bf16");
  EXPECT_EQ(spec.precision.rounding, "nearest");
  for (const char* bad : {"dense = \"fp16\"", "embedding = \"fp8\"", "rounding = \"up\"", "tables = \"fp16\""}) {
    const auto msg = expect_config_error(std::string(kMinimal) + "[precision]\n" + bad + "\n");
    EXPECT_NE(msg.find("precision."), std::string::npos) << bad << ": " << msg;
  }
  // 16-bit tables can be tiered.
  spec = parse_job_spec(std::string(kMinimal) + "[embedding]\nhot_fraction = 0.5\n[precision]\nembedding = \"fp16\"\n",
                        "job.toml");
  EXPECT_EQ(spec.precision.embedding, "fp16");
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
