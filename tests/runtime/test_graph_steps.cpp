// device.graphs under the strict emulator at 1, 2 and 4 ranks: steps whose dense middle is
// replayed from a captured graph equal eager steps bit for bit (losses and every weight), for the
// optimizers, 16-bit tables, bf16 GEMMs, multi-hot bags, tiered tables and one-hot batches as stored
// (whose sparse update is a captured piece too at one rank), through train() with a
// stop and a resume, and for two jobs training side by side on their own threads. The emulator
// replays what it recorded with the arguments of the capture, so a value that changes between
// steps but was passed by value fails these tests.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "trainer_test_support.hpp"

using namespace recmix;
using namespace recmix::runtime;
using namespace recmix::runtime::testing_support;

namespace {

struct GraphCase {
  const char* data;
  const char* sparse;
  const char* dense;
  const char* tables = "fp32";       // [precision] embedding
  const char* dense_precision = "fp32";
  double hot_fraction = 0;           // [embedding] hot_fraction: tiered when > 0
  bool packed = false;               // one-hot batches as stored (train()'s): at one rank with fp32
                                     // tables, the sparse update is a captured piece too
  int cross_rank = -1;               // >= 0: the dcn interaction, two cross layers of this rank
  bool schedule = false;             // a learning-rate schedule: warm-up, constant, decay, held
};

class GraphSteps : public testing::TestWithParam<GraphCase> {};

TEST_P(GraphSteps, EqualEagerStepsBitForBit) {
  auto c = GetParam();
  auto& comm = *world->comm;
  auto spec = small_spec(fmt::format("graphs-{}-{}-{}-{}-{}-{}{}{}", std::string(c.data).substr(0, 5), c.sparse,
                                     c.dense, c.tables, c.dense_precision, c.hot_fraction > 0 ? "tiered" : "flat",
                                     c.packed ? "-packed" : "", c.cross_rank),
                         c.data);
  if (c.schedule) {
    spec.name += "-schedule";
    spec.optimizer.schedule = LrSchedule{3, 5, 4, 2.0};  // over the 12 steps: every phase
  }
  if (c.cross_rank >= 0) {
    spec.model.interaction = mlp::InteractionKind::dcn;
    spec.model.cross_layers = 2;
    spec.model.cross_rank = c.cross_rank;
  }
  spec.device.kind = device::BackendKind::cpu_strict;
  spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(c.sparse, "optimizer.sparse");
  spec.optimizer.dense = parse_choice<DenseOptimizerKind>(c.dense, "optimizer.dense");
  spec.precision.embedding = parse_choice<half::Storage>(c.tables, "precision.embedding");
  spec.precision.dense = parse_choice<DensePrecision>(c.dense_precision, "precision.dense");
  spec.embedding.hot_fraction = c.hot_fraction;
  const std::string dir = run_dir(spec.name);
  spec.device.graphs = AutoSwitch::off;
  const auto eager = train_steps(spec, comm, 12, dir + "/eager.h5", {}, c.packed);
  spec.name += "-graphs";
  spec.device.graphs = AutoSwitch::on;
  const auto graphs = train_steps(spec, comm, 12, dir + "/graphs.h5", {}, c.packed);
  EXPECT_EQ(graphs, eager);
  const auto a = read_weights(dir + "/eager.h5"), b = read_weights(dir + "/graphs.h5");
  EXPECT_TRUE(bitwise_equal(b, a)) << "largest relative difference " << max_relative_difference(b, a);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GraphSteps,
    testing::Values(GraphCase{"train.h5", "sgd", "sgd"}, GraphCase{"train.h5", "adagrad", "adagrad"},
                    GraphCase{"train.h5", "rowwise_adagrad", "adam"}, GraphCase{"multi.h5", "adagrad", "adam"},
                    GraphCase{"train.h5", "rowwise_adagrad", "adagrad", "bf16"},
                    GraphCase{"multi.h5", "sgd", "sgd", "fp16"},
                    GraphCase{"train.h5", "adagrad", "adam", "fp32", "bf16"},
                    GraphCase{"train.h5", "rowwise_adagrad", "sgd", "fp32", "fp32", 0.2},
                    GraphCase{"train.h5", "sgd", "sgd", "fp32", "fp32", 0, true},
                    GraphCase{"train.h5", "adagrad", "adam", "fp32", "fp32", 0, true},
                    GraphCase{"train.h5", "rowwise_adagrad", "adagrad", "fp32", "bf16", 0, true},
                    GraphCase{"train.h5", "adagrad", "sgd", "bf16", "fp32", 0, true},
                    GraphCase{"train.h5", "sgd", "sgd", "fp32", "fp32", 0, true, 4},
                    GraphCase{"multi.h5", "adagrad", "adam", "fp32", "fp32", 0, false, 0},
                    GraphCase{"train.h5", "sgd", "sgd", "fp32", "fp32", 0, true, -1, true},
                    GraphCase{"train.h5", "rowwise_adagrad", "adam", "fp32", "fp32", 0, false, -1, true}),
    [](const auto& info) {
      const auto& p = info.param;
      return fmt::format("{}_{}_{}_{}_{}{}{}{}", std::string(p.data).substr(0, 5), p.sparse, p.dense, p.tables,
                         p.dense_precision, p.hot_fraction > 0 ? "_tiered" : "", p.packed ? "_packed" : "",
                         p.cross_rank < 0 ? "" : fmt::format("_dcn_rank{}", p.cross_rank)) +
             (p.schedule ? "_schedule" : "");
    });

// train() with graphs, stopped and resumed: the same steps, losses and weights as without them.
TEST(GraphRun, StopAndResumeEqualAnEagerRun) {
  auto& comm = *world->comm;
  auto run = [&](const std::string& name, const std::string& graphs, std::int64_t stop_after) {
    auto spec = small_spec(name);
    spec.device.kind = device::BackendKind::cpu_strict;
    spec.device.graphs = parse_choice<AutoSwitch>(graphs, "device.graphs");
    spec.optimizer.dense = DenseOptimizerKind::adam;
    spec.checkpoint.interval = 8;
    spec.run_dir = run_dir(spec.name);
    spec.checkpoint.dir = spec.run_dir + "/checkpoints";
    if (stop_after > 0) {
      Trainer t(spec, comm);
      t.train(quiet(stop_after));
    }
    Trainer t(spec, comm);
    EXPECT_EQ(t.model().uses_graphs(), graphs == "true");
    auto r = t.train(quiet(0, stop_after > 0 ? "latest" : ""));
    t.save(spec.run_dir + "/final.h5", r.steps);
    return std::pair{r, spec.run_dir + "/final.h5"};
  };
  const auto [eager, eager_file] = run("graph-run-eager", "false", 0);
  const auto [graphs, graphs_file] = run("graph-run-graphs", "true", 7);
  EXPECT_EQ(graphs.steps, eager.steps);
  EXPECT_EQ(graphs.last_loss, eager.last_loss);
  EXPECT_TRUE(bitwise_equal(read_weights(graphs_file), read_weights(eager_file)));
}

// Two jobs side by side in one process, each on its own thread, backend and communicator, as
// recmix run places co-located jobs: both capturing and replaying at once, each equal to its own
// eager run (captures are per thread: one job's capture refuses nothing of the other's).
TEST(GraphRun, TwoJobsOnTheirOwnThreadsEachEqualTheirEagerRun) {
  auto& comm = *world->comm;
  auto job = [&](const std::string& name, const char* sparse, const char* dense, const char* tables) {
    auto spec = small_spec(name);
    spec.device.kind = device::BackendKind::cpu_strict;
    spec.optimizer.sparse = parse_choice<SparseOptimizerKind>(sparse, "optimizer.sparse");
    spec.optimizer.dense = parse_choice<DenseOptimizerKind>(dense, "optimizer.dense");
    spec.precision.embedding = parse_choice<half::Storage>(tables, "precision.embedding");
    return spec;
  };
  auto a = job("pair-a", "sgd", "adam", "fp32"), b = job("pair-b", "rowwise_adagrad", "adagrad", "bf16");
  a.device.graphs = b.device.graphs = AutoSwitch::off;
  const auto eager_a = train_steps(a, comm, 10, run_dir(a.name) + "/eager.h5");
  const auto eager_b = train_steps(b, comm, 10, run_dir(b.name) + "/eager.h5");
  a.device.graphs = b.device.graphs = AutoSwitch::on;
  auto comm_a = comm.split(0, comm.rank()), comm_b = comm.split(0, comm.rank());
  std::vector<double> graphs_a, graphs_b;
  std::string error_a, error_b;
  // The final writes are collective and HDF5 is one lock per process: job b writes only once job
  // a's write is over on this rank (a never waits for b, so no rank waits in a cycle), as recmix
  // run's scheduler grants one job at a time the right to write.
  std::mutex mutex;
  std::condition_variable cv;
  bool a_written = false;
  const WriteGate first = [&](const std::function<void()>& write) {
    struct Done {
      std::mutex& m;
      std::condition_variable& cv;
      bool& flag;
      ~Done() {
        std::lock_guard lock(m);
        flag = true;
        cv.notify_all();
      }
    } done{mutex, cv, a_written};
    write();
  };
  const WriteGate second = [&](const std::function<void()>& write) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return a_written; });
    lock.unlock();
    write();
  };
  auto run = [&](const JobSpec& spec, comm::Communicator& c, std::vector<double>& losses, std::string& error,
                 const WriteGate& gate) {
    try {
      losses = train_steps(spec, c, 10, run_dir(spec.name) + "/graphs.h5", gate);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (&gate == &first) first([] {});  // a failed before its write: let b go on
  };
  std::thread ta(run, std::cref(a), std::ref(*comm_a), std::ref(graphs_a), std::ref(error_a), std::cref(first));
  std::thread tb(run, std::cref(b), std::ref(*comm_b), std::ref(graphs_b), std::ref(error_b), std::cref(second));
  ta.join();
  tb.join();
  ASSERT_EQ(error_a, "");
  ASSERT_EQ(error_b, "");
  EXPECT_EQ(graphs_a, eager_a);
  EXPECT_EQ(graphs_b, eager_b);
  for (const auto& spec : {a, b})
    EXPECT_TRUE(bitwise_equal(read_weights(run_dir(spec.name) + "/graphs.h5"), read_weights(run_dir(spec.name) + "/eager.h5")))
        << spec.name;
}

// The same on CUDA where a GPU is present (the GPU suite runs it): captured steps replay the
// kernels, GEMMs and copies of eager steps with the same inputs, so the same bits.
TEST(GraphRun, CudaGraphStepsEqualEagerSteps) {
  if (!device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  auto& comm = *world->comm;
  if (device::cuda_device_count() < comm.size()) GTEST_SKIP() << "needs a GPU per rank";
  for (const char* dense : {"sgd", "adam"}) {
    auto spec = small_spec(fmt::format("graphs-cuda-{}", dense));
    spec.device.kind = device::BackendKind::cuda;
    spec.optimizer.dense = parse_choice<DenseOptimizerKind>(dense, "optimizer.dense");
    const std::string dir = run_dir(spec.name);
    spec.device.graphs = AutoSwitch::off;
    const auto eager = train_steps(spec, comm, 12, dir + "/eager.h5");
    spec.device.graphs = AutoSwitch::on;
    const auto graphs = train_steps(spec, comm, 12, dir + "/graphs.h5");
    EXPECT_EQ(graphs, eager) << dense;
    const auto a = read_weights(dir + "/eager.h5"), b = read_weights(dir + "/graphs.h5");
    EXPECT_TRUE(bitwise_equal(b, a)) << dense << ": largest relative difference " << max_relative_difference(b, a);
  }
}

TEST(GraphRun, TheCpuBackendRefusesGraphsTrueByName) {
  auto spec = small_spec("graph-cpu");
  spec.device.kind = device::BackendKind::cpu;
  spec.device.graphs = AutoSwitch::on;
  spec.run_dir = run_dir(spec.name);
  try {
    Trainer t(spec, *world->comm);
    ADD_FAILURE() << "graphs = true was accepted on the cpu backend";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("device.graphs"), std::string::npos) << e.what();
  }
}

}  // namespace

int registered = register_world();
