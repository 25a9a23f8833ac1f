#pragma once
// Shared by the trainer tests: a scratch folder with synthetic datasets made once per run (World),
// a small job spec, and checkpoint comparisons.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fmt/format.h>

#include "comm/mpi/mpi_communicator.hpp"
#include "data/h5.hpp"
#include "data/reader.hpp"
#include "data/synth.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::runtime::testing_support {

namespace fs = std::filesystem;

inline const std::vector<std::int64_t> kTables = {50, 300, 7, 1000};

// A scratch folder shared by all ranks, and the synthetic datasets in it (made once).
class World : public ::testing::Environment {
 public:
  void SetUp() override {
    comm = comm::make_mpi_world_communicator();
    char path[4096] = {};
    if (comm->rank() == 0) {
      std::string templ = (fs::temp_directory_path() / "recmix-trainer-XXXXXX").string();
      std::strncpy(path, templ.c_str(), sizeof path - 1);
      if (!mkdtemp(path)) std::abort();
      auto make = [&](const std::string& name, std::int64_t rows, std::int64_t first, bool multi_hot) {
        data::SynthOptions o;
        o.output = (fs::path(path) / name).string();
        o.rows = rows;
        o.num_dense = 5;
        o.table_rows = kTables;
        o.seed = 11;
        o.first_row = first;
        o.multi_hot = multi_hot;
        if (multi_hot) o.pooling_min = 0, o.pooling_max = 4;
        o.dense_signal = 1.5;
        o.sparse_signal = 2.0;
        data::synthesize(o);
      };
      make("train.h5", 40000, 0, false);
      make("eval.h5", 8000, 40000, false);
      make("multi.h5", 4000, 0, true);
    }
    comm->broadcast(path, sizeof path, comm::DataType::u8, 0);
    dir = path;
  }
  void TearDown() override {
    comm->barrier();
    if (comm->rank() == 0) fs::remove_all(dir);
    comm.reset();
  }
  std::unique_ptr<comm::Communicator> comm;
  std::string dir;
};
inline World* world = nullptr;

inline JobSpec small_spec(const std::string& name, const std::string& data = "train.h5") {
  std::string text = fmt::format(R"(
name = "{}"
seed = 5
[model]
embedding_dim = 8
bottom_mlp = [16, 8]
top_mlp = [16, 1]
[optimizer]
lr = 0.1
[data]
train = "{}"
eval = "eval.h5"
prefetch = 1
[train]
batch_size = 64
steps = 20
log_interval_s = 1000
)",
                                 name, data);
  auto spec = parse_job_spec(text, "test", world->dir);
  return spec;
}

struct Tensor {
  std::string name;
  std::vector<float> values;
};

// Every weight in a checkpoint, in a fixed order.
inline std::vector<Tensor> read_weights(const std::string& path) {
  auto file = h5::open_file(path);
  std::vector<Tensor> out;
  for (const char* group : {"dense", "embedding"}) {
    std::vector<std::string> names;
    auto g = h5::open_group(file, group);
    H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, nullptr,
               [](hid_t, const char* n, const H5L_info_t*, void* op) -> herr_t {
                 static_cast<std::vector<std::string>*>(op)->push_back(n);
                 return 0;
               },
               &names);
    for (auto& n : names) {
      std::string full = std::string(group) + "/" + n + (std::string(group) == "embedding" ? "/weights" : "");
      out.push_back({full, h5::read_array<float>(file, full)});
    }
  }
  return out;
}

// Largest relative difference of a tensor, max|a - b| / max|b|, over all tensors; -1 when the
// checkpoints hold different tensors. (Element-wise ratios would blow up fp32 summation-order
// noise on weights near zero.)
inline double max_relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return -1;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].values.size() != b[i].values.size()) return -1;
    double diff = 0, scale = 0;
    for (std::size_t j = 0; j < a[i].values.size(); ++j) {
      diff = std::max(diff, std::abs(double(a[i].values[j]) - b[i].values[j]));
      scale = std::max(scale, std::abs(double(b[i].values[j])));
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

inline bool bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].values.size() != b[i].values.size() ||
        std::memcmp(a[i].values.data(), b[i].values.data(), a[i].values.size() * sizeof(float)) != 0)
      return false;
  return true;
}

// The tensors whose values differ between a and b, with how many of their values do ("" when
// none; a and b from the same model).
inline std::string differing_tensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  std::string out;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    std::size_t n = 0;
    for (std::size_t j = 0; j < std::min(a[i].values.size(), b[i].values.size()); ++j)
      n += std::memcmp(&a[i].values[j], &b[i].values[j], sizeof(float)) != 0;
    if (n) out += fmt::format("{}{} ({} of {} values)", out.empty() ? "" : ", ", a[i].name, n, a[i].values.size());
  }
  return out;
}

inline std::string run_dir(const std::string& name) { return (fs::path(world->dir) / "runs" / name).string(); }

// Trains `steps` steps on comm, driving the model directly (one batch ahead when the tables are
// tiered); returns the loss of every step and
// writes a checkpoint to `checkpoint`.
// The checkpoint write is collective: jobs on threads of one process pass a gate (as recmix run's
// collective_io) so that their writes do not interleave across ranks.
using WriteGate = std::function<void(const std::function<void()>&)>;

// packed_one_hot: one-hot batches as the dataset stores them (data::ReaderOptions), as train() reads
// them; else one CSR per table.
inline std::vector<double> train_steps(JobSpec spec, comm::Communicator& comm, int steps, const std::string& checkpoint,
                                       const WriteGate& gate = {}, bool packed_one_hot = false) {
  spec.run_dir = run_dir(spec.name);
  Trainer trainer(spec, comm);
  data::ReaderOptions ro;
  ro.global_batch = spec.train.batch_size;
  ro.rank = comm.rank();
  ro.world = comm.size();
  ro.prefetch = 0;
  ro.packed_one_hot = packed_one_hot;
  data::Reader reader(spec.data.train, ro);
  // Tiered tables look one batch ahead, as train() drives them.
  const bool ahead = trainer.model().embedding().tiered();
  std::vector<data::Batch> batches(std::size_t(steps) + 1);
  for (int i = 0; i <= steps; ++i)
    while (!reader.next(batches[i])) {
    }
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i)
    losses.push_back(trainer.model().train_step(batches[i], spec.train.batch_size,
                                                ahead && i + 1 < steps ? &batches[i + 1] : nullptr));
  const auto save = [&] { trainer.save(checkpoint, steps); };
  if (gate)
    gate(save);
  else
    save();
  return losses;
}

// train() options of the tests: no progress lines, an optional early stop and resume.
inline TrainOptions quiet(std::int64_t stop_after = 0, const std::string& resume = "") {
  TrainOptions o;
  o.quiet = true;
  o.stop_after = stop_after;
  o.resume = resume;
  return o;
}

// Registers World once per test executable (call from a namespace-scope initialiser).
inline int register_world() {
  world = new World;
  ::testing::AddGlobalTestEnvironment(world);
  return 0;
}

}  // namespace recmix::runtime::testing_support
