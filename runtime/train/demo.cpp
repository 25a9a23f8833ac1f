#include "runtime/train/demo.hpp"

#include <filesystem>

#include "data/synth.hpp"

namespace recmix::runtime {
namespace fs = std::filesystem;

const std::string& demo_job_toml() {
  static const std::string text = R"(# The built-in example job: `recmix train --demo`.
name = "demo"
seed = 42

[model]
embedding_dim = 16
bottom_mlp = [64, 32, 16]
top_mlp = [64, 32, 1]
interaction = "dot"

[optimizer]
dense = "adagrad"
sparse = "rowwise_adagrad"
lr = 0.05

[data]
train = "data/train.h5"
eval = "data/eval.h5"
shuffle = true

[train]
batch_size = 256
epochs = 1
eval_interval = 100
log_interval_s = 1.0

[checkpoint]
interval = 100

[device]
threads = 1
memory_capacity = "1GiB"
)";
  return text;
}

void prepare_demo_data(const std::string& run_dir, comm::Communicator& comm) {
  const fs::path data_dir = fs::path(run_dir) / "data";
  if (comm.rank() == 0) {
    fs::create_directories(data_dir);
    const std::vector<std::int64_t> tables = {1000, 5000, 200, 20000, 50, 3000, 10000, 500};
    auto make = [&](const std::string& name, std::int64_t rows, std::uint64_t seed) {
      if (fs::exists(data_dir / name)) return;
      data::SynthOptions o;
      o.output = (data_dir / name).string();
      o.rows = rows;
      o.num_dense = 13;
      o.table_rows = tables;
      o.zipf = {1.05};
      // The eval split draws different rows from the same hidden model (same model seed).
      o.seed = 42;
      o.first_row = static_cast<std::int64_t>(seed);
      data::synthesize(o);
    };
    // Enough rows that one epoch learns the planted signal without seeing a row twice: the
    // demo's eval AUC is then well above 0.5 and near the data's Bayes AUC, not an overfit.
    make("train.h5", 2'000'000, 0);
    make("eval.h5", 100'000, 2'000'000);
  }
  comm.barrier();
}

const std::string& demo_jobs_toml() {
  static const std::string text = R"(# The built-in example run: `recmix run --demo`. Four small jobs of different shapes, each one
# epoch of the demo data, share the ranks; the complementary policy decides which run side by
# side (a rank needs a core for each job's thread: on 2 cores and 2 ranks none can share).
[scheduler]
policy = "complementary"
round_interval_s = 0.5
colocation_limit = 2
memory_capacity = "1GiB"

[[job]]
name = "kaggle-like"
ranks = 2
seed = 1
model = { embedding_dim = 16, bottom_mlp = [64, 32, 16], top_mlp = [64, 32, 1] }
optimizer = { dense = "adagrad", sparse = "rowwise_adagrad", lr = 0.05 }
data = { train = ["data/train.h5"], eval = ["data/eval.h5"] }
train = { batch_size = 256, epochs = 1, eval_per_epoch = 4, eval_batches = 40, log_interval_s = 0.25, log_interval = 1000 }
checkpoint = { interval = 800 }

[[job]]
name = "embedding-heavy"
ranks = 1
seed = 2
model = { embedding_dim = 32, bottom_mlp = [32, 32], top_mlp = [32, 1] }
optimizer = { dense = "adagrad", sparse = "adagrad", lr = 0.05 }
data = { train = ["data/train.h5"], eval = ["data/eval.h5"] }
train = { batch_size = 256, epochs = 1, eval_per_epoch = 4, eval_batches = 40, log_interval_s = 0.25, log_interval = 1000 }

[[job]]
name = "small-mlp"
ranks = 1
seed = 3
model = { embedding_dim = 8, bottom_mlp = [8], top_mlp = [16, 1] }
optimizer = { dense = "sgd", sparse = "sgd", lr = 0.1 }
data = { train = ["data/train.h5"], eval = ["data/eval.h5"] }
train = { batch_size = 128, epochs = 1, eval_per_epoch = 4, eval_batches = 80, log_interval_s = 0.25, log_interval = 2000 }

[[job]]
name = "late-wide"
ranks = 2
arrival = 3.0
seed = 4
model = { embedding_dim = 16, bottom_mlp = [128, 64, 16], top_mlp = [128, 64, 1] }
optimizer = { dense = "adagrad", sparse = "rowwise_adagrad", lr = 0.05 }
data = { train = ["data/train.h5"], eval = ["data/eval.h5"] }
train = { batch_size = 512, epochs = 1, eval_per_epoch = 4, eval_batches = 20, log_interval_s = 0.25, log_interval = 500 }
)";
  return text;
}

JobSpec prepare_demo_job(const std::string& run_dir, comm::Communicator& comm) {
  prepare_demo_data(run_dir, comm);
  auto spec = parse_job_spec(demo_job_toml(), "<built-in demo job>", run_dir);
  spec.run_dir = run_dir;
  spec.checkpoint.dir = (fs::path(run_dir) / "checkpoints").string();
  return spec;
}

}  // namespace recmix::runtime
