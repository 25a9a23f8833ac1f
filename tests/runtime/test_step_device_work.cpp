// What a training step asks of the device, counted by the backend (device/counters.hpp) and
// reported per step in metrics.jsonl's `device_per_step`, under the strict device emulator at 1,
// 2 and 4 ranks. The emulator takes the CUDA code paths, so what it counts is what a GPU step
// would do.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <mpi.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;

namespace {

struct StepCase {
  const char* name;
  const char* data;
  const char* sparse;
  const char* dense;
  const char* tables;       // [precision] embedding
  const char* gemms;        // [precision] dense
  double hot_fraction = 0;  // > 0: tiered tables
  bool graphs = false;      // [device] graphs: the dense middle replayed from step 2 on
};

// The `train` records of a run's metrics.jsonl (rank 0 writes it).
std::vector<nlohmann::json> train_records(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "train") out.push_back(j);
  }
  return out;
}

// Trains spec quietly in a run directory of its own; returns rank 0's train records (none on the
// other ranks, which write no metrics).
std::vector<nlohmann::json> train_and_read_records(JobSpec& spec, comm::Communicator& comm) {
  spec.run_dir = run_dir(spec.name);
  Trainer(spec, comm).train(quiet());
  return comm.rank() == 0 ? train_records(spec.run_dir) : std::vector<nlohmann::json>{};
}

class StepDeviceWork : public testing::TestWithParam<StepCase> {};

// A record every step (log_interval_s = 0): every record holds device_per_step with launches,
// and, where the step's buffers cannot grow, no record but the first and the last (start-up, the
// closing checkpoint) allocates.
TEST_P(StepDeviceWork, NothingIsAllocatedInASteadyStep) {
  const StepCase c = GetParam();
  auto& comm = *world->comm;
  JobSpec spec = small_spec(fmt::format("steps-{}-{}", c.name, comm.size()), c.data);
  spec.device.kind = device::BackendKind::cpu_strict;
  spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(c.sparse, "optimizer.sparse");
  spec.optimizer.dense = parse_choice<DenseOptimizerKind>(c.dense, "optimizer.dense");
  spec.precision.embedding = parse_choice<half::Storage>(c.tables, "precision.embedding");
  spec.precision.dense = parse_choice<DensePrecision>(c.gemms, "precision.dense");
  if (c.hot_fraction > 0) spec.embedding.hot_fraction = c.hot_fraction;
  spec.device.graphs = c.graphs ? AutoSwitch::on : AutoSwitch::off;
  spec.train.steps = 12;
  spec.train.log_interval_s = 0;
  const auto records = train_and_read_records(spec, comm);
  if (comm.rank() != 0) return;
  ASSERT_EQ(records.size(), 12u);
  for (std::size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(fmt::format("record {} (step {})", i, records[i]["step"].get<int>()));
    ASSERT_TRUE(records[i].contains("device_per_step"));
    const auto& d = records[i]["device_per_step"];
    for (const char* key : {"launches", "graph_launches", "allocations", "host_syncs", "buffer_waits", "comm_syncs",
                            "pageable_copies"})
      EXPECT_TRUE(d.contains(key)) << key;
    EXPECT_GT(d["launches"].get<double>(), 0.0);
    if (i == 0 || i + 1 == records.size()) continue;  // start-up; the closing checkpoint
    // Every buffer of the step is made at its largest before the first step (the data's longest
    // bag bounds the multi-hot ones), whatever share of the batch a rank's shards get.
    EXPECT_EQ(d["allocations"].get<double>(), 0.0) << d.dump();
    // The record's own read-back (the loss total and the divergence flag) is all the host waits
    // for; the tiers add their staging wait. Nothing goes up from pageable memory.
    EXPECT_LE(d["host_syncs"].get<double>(), c.hot_fraction > 0 ? 3.0 : 2.0) << d.dump();
    EXPECT_EQ(d["pageable_copies"].get<double>(), 0.0) << d.dump();
    // With graphs the first step runs eagerly, the second is captured and replayed, and every
    // later one replays the same four graphs: the bottom MLP's forward, the dense middle, the
    // interaction's backward, and the bottom MLP's backward with the dense optimizer's step (at
    // one rank with SGD the step is folded into the backwards; at several ranks the all-reduces
    // are in the pieces, before it); and at one rank with one-hot batches and untiered fp32
    // tables, the embedding's sparse update (ShardedEmbedding::backward_capturable) from the second
    // step on too: its buffers are made before the first step (ShardedEmbedding::reserve).
    const bool update = comm.size() == 1 && std::string(c.data) == "train.h5" && std::string(c.tables) == "fp32" &&
                        c.hot_fraction == 0;
    EXPECT_EQ(d["graph_launches"].get<double>(), c.graphs ? 4.0 + (update ? 1.0 : 0.0) : 0.0) << d.dump();
    // There, the owner CSR and the pooling are in the bottom MLP's forward piece too, so all the
    // host launches is the record's read-back: the loss total's reset, the divergence flag's
    // reset, and one check per dense tensor (a weight and a bias per layer of the two MLPs); from
    // the third step on (the second's captures count their launches).
    if (c.graphs && update && i >= 2) {
      const double tensors = 2.0 * static_cast<double>(spec.model.bottom_mlp.size() + spec.model.top_mlp.size());
      EXPECT_EQ(d["launches"].get<double>(), 2.0 + tensors) << d.dump();
    }
  }
  std::cout << c.name << " at " << comm.size() << " rank(s), step 6: " << records[5]["device_per_step"].dump() << "\n";
}

// Three jobs co-located on every rank, each on its own thread, backend, streams, pool and
// communicator (as recmix run places them), each with its own priority, trained by train() with
// a record every step, their device collectives in epochs as recmix run puts them (device.shared):
// in every record but the first and the last, each job's own counters show no pageable copy, at
// most the record's read-back (and the tiers' staging wait) in host syncs and, at one rank, no
// allocation, whatever the other jobs do at the same time. An epoch that waited for the device would add a
// host sync per collective at 2 ranks.
TEST(StepColocated, ThreeJobsEachStayHostFree) {
  auto& comm = *world->comm;
  if (comm.size() > 2) GTEST_SKIP() << "1 and 2 ranks suffice (12 threads on 2 cores otherwise)";
  struct Job {
    JobSpec spec;
    std::unique_ptr<comm::Communicator> comm;
    std::string error;
  };
  std::vector<Job> jobs(3);
  const char* sparse[] = {"sgd", "rowwise_adagrad", "adagrad"};
  for (int j = 0; j < 3; ++j) {
    JobSpec& spec = jobs[j].spec;
    spec = small_spec(fmt::format("colocated-{}-{}", j, comm.size()));
    spec.device.kind = device::BackendKind::cpu_strict;
    spec.device.priority = j;
    spec.device.shared = true;  // as recmix run sets it: device collectives in epochs (comm/epoch)
    spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(sparse[j], "optimizer.sparse");
    if (j == 2) spec.embedding.hot_fraction = 0.2;
    spec.train.steps = 10;
    spec.train.log_interval_s = 0;
    spec.run_dir = run_dir(spec.name);
    jobs[j].comm = comm.split(0, comm.rank());
  }
  // The closing checkpoints are collective HDF5 writes under one lock per process: job j writes
  // once job j - 1 has written on this rank, as recmix run grants one job at a time the right.
  std::mutex mutex;
  std::condition_variable cv;
  int written = 0;
  auto run = [&](int j) {
    Job& job = jobs[j];
    TrainOptions options = quiet();
    options.collective_io = [&, j](const std::function<void()>& write) {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return written >= j; });
      lock.unlock();
      write();
    };
    try {
      Trainer trainer(job.spec, *job.comm);
      trainer.train(options);
    } catch (const std::exception& e) {
      job.error = e.what();
    }
    std::lock_guard lock(mutex);  // done or failed: the next job may write
    written = std::max(written, j + 1);
    cv.notify_all();
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < 3; ++j) threads.emplace_back(run, j);
  for (auto& t : threads) t.join();
  for (const auto& job : jobs) {
    SCOPED_TRACE(job.spec.name);
    ASSERT_EQ(job.error, "");
    if (comm.rank() != 0) continue;
    const auto records = train_records(job.spec.run_dir);
    ASSERT_EQ(records.size(), 10u);
    const bool tiered = job.spec.embedding.hot_fraction > 0;
    for (std::size_t i = 1; i + 1 < records.size(); ++i) {
      const auto& d = records[i]["device_per_step"];
      EXPECT_GT(d["launches"].get<double>(), 10.0) << d.dump();
      EXPECT_EQ(d["allocations"].get<double>(), 0.0) << d.dump();
      EXPECT_LE(d["host_syncs"].get<double>(), tiered ? 3.0 : 2.0) << d.dump();
      EXPECT_EQ(d["pageable_copies"].get<double>(), 0.0) << d.dump();
    }
    std::cout << job.spec.name << ", step 6: " << records[5]["device_per_step"].dump() << "\n";
  }
}

// device.l2_window: on by default where the backend has one, over the hot slots of tiered
// tables (hot rows x dim x 4 bytes on each rank) or every local row; off when asked; refused on
// the CPU backend when asked for.
TEST(StepL2Window, CoversTheHotRowsAndIsLoggedOrOff) {
  auto& comm = *world->comm;
  if (comm.size() > 1) GTEST_SKIP() << "each rank sets its own window: one rank suffices";
  for (const char* setting : {"auto", "false"})
    for (double hot : {0.1, 0.0}) {
      JobSpec spec = small_spec(fmt::format("l2-{}-{}-{}", setting, hot, comm.size()));
      spec.device.kind = device::BackendKind::cpu_strict;
      spec.device.l2_window = parse_choice<AutoSwitch>(setting, "device.l2_window");
      if (hot > 0) spec.embedding.hot_fraction = hot;
      spec.train.steps = 2;
      spec.run_dir = run_dir(spec.name);
      Trainer trainer(spec, comm);
      trainer.train(quiet());
      if (comm.rank() != 0) continue;
      std::ifstream in(spec.run_dir + "/train.log");
      std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto at = log.find("L2 window: ");
      if (std::string(setting) == "false") {
        EXPECT_EQ(at, std::string::npos) << log;
        continue;
      }
      ASSERT_NE(at, std::string::npos) << log;
      EXPECT_NE(log.find(hot > 0 ? "of hot embedding rows" : "of local embedding rows", at), std::string::npos)
          << log.substr(at, 120);
    }
  JobSpec spec = small_spec(fmt::format("l2-cpu-{}", comm.size()));
  spec.device.l2_window = AutoSwitch::on;
  spec.run_dir = run_dir(spec.name);
  EXPECT_THROW(
      {
        try {
          Trainer trainer(spec, comm);
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("device.l2_window"), std::string::npos) << e.what();
          throw;
        }
      },
      ConfigError);
}

// [train] log_interval: a train record every N steps and at the last, however long or short the
// steps take (log_interval_s is a day here, so the clock never adds one).
TEST(StepLogInterval, RecordsEveryNStepsWhateverTheTime) {
  auto& comm = *world->comm;
  JobSpec spec = small_spec(fmt::format("log-steps-{}", comm.size()));
  spec.train.steps = 11;
  spec.train.log_interval_s = 86400;
  spec.train.log_interval = 4;
  const auto records = train_and_read_records(spec, comm);
  if (comm.rank() != 0) return;
  std::vector<int> steps;
  for (const auto& r : records) steps.push_back(r["step"].get<int>());
  EXPECT_EQ(steps, (std::vector<int>{4, 8, 11}));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StepDeviceWork,
    testing::Values(StepCase{"sgd", "train.h5", "sgd", "sgd", "fp32", "fp32"},
                    StepCase{"adagrad_bf16", "train.h5", "rowwise_adagrad", "adagrad", "bf16", "bf16"},
                    StepCase{"multi_adam_fp16", "multi.h5", "adagrad", "adam", "fp16", "fp32"},
                    StepCase{"tiered", "train.h5", "sgd", "sgd", "fp32", "fp32", 0.3},
                    StepCase{"tiered_multi", "multi.h5", "adagrad", "adagrad", "fp32", "fp32", 0.3},
                    StepCase{"sgd_graphs", "train.h5", "sgd", "sgd", "fp32", "fp32", 0, true},
                    StepCase{"adam_bf16_graphs", "train.h5", "rowwise_adagrad", "adam", "bf16", "bf16", 0, true}),
    [](const auto& info) { return std::string(info.param.name); });

const int registered = register_world();

}  // namespace
