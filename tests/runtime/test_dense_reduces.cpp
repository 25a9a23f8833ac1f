// The dense gradients' all-reduces of a training step, as the host issues and settles them, under
// cpu-strict at 2 and 4 ranks. The model's device communicator is the staged one, watched: every
// all-reduce it is asked for, and every wait on one, is counted.
// - Where the communicator orders its calls on the stream (NCCL; the staged communicator stands
//   in for it), the host never waits for an all-reduce (DlrmModel::settle).
// - Where it does not, the host waits for each one before the optimizer's step.
// - With graphs, the all-reduces are issued inside the step's pieces: on the first step of a shape
//   (eager) and the second (captured), never again, since the replays run them.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/staged/staged_communicator.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharding_plan.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {
namespace {

// A request whose waits are counted.
class WatchedRequest final : public comm::Request {
 public:
  WatchedRequest(std::unique_ptr<comm::Request> inner, int& waits) : inner_(std::move(inner)), waits_(waits) {}
  bool test() override { return inner_->test(); }
  void wait() override {
    ++waits_;
    inner_->wait();
  }

 private:
  std::unique_ptr<comm::Request> inner_;
  int& waits_;
};

// The staged communicator with its all-reduces counted; `ordered` says whether it tells the
// model that its stream calls are ordered on the stream (as it does), or not.
class Watch final : public comm::Communicator {
 public:
  Watch(std::unique_ptr<comm::Communicator> inner, bool ordered) : inner_(std::move(inner)), ordered_(ordered) {}
  int reduces = 0, waits = 0;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool orders_on_stream() const override { return ordered_ && inner_->orders_on_stream(); }
  bool captures_on_stream() const override { return inner_->captures_on_stream(); }
  void barrier() override { inner_->barrier(); }
  void all_reduce_sum(const void* s, void* r, std::size_t n, comm::DataType t, device::Stream* st) override {
    ++reduces;
    inner_->all_reduce_sum(s, r, n, t, st);
  }
  std::unique_ptr<comm::Request> iall_reduce_sum(const void* s, void* r, std::size_t n, comm::DataType t,
                                                 device::Stream* st) override {
    ++reduces;
    return std::make_unique<WatchedRequest>(inner_->iall_reduce_sum(s, r, n, t, st), waits);
  }
  void broadcast(void* b, std::size_t n, comm::DataType t, int root, device::Stream* st) override {
    inner_->broadcast(b, n, t, root, st);
  }
  void all_gather(const void* s, void* r, std::size_t n, comm::DataType t, device::Stream* st) override {
    inner_->all_gather(s, r, n, t, st);
  }
  void all_to_all_v(const void* s, std::span<const std::size_t> sc, std::span<const std::size_t> sd, void* r,
                    std::span<const std::size_t> rc, std::span<const std::size_t> rd, comm::DataType t,
                    device::Stream* st) override {
    inner_->all_to_all_v(s, sc, sd, r, rc, rd, t, st);
  }
  std::unique_ptr<comm::Request> iall_to_all_v(const void* s, std::span<const std::size_t> sc,
                                               std::span<const std::size_t> sd, void* r,
                                               std::span<const std::size_t> rc, std::span<const std::size_t> rd,
                                               comm::DataType t, device::Stream* st) override {
    return inner_->iall_to_all_v(s, sc, sd, r, rc, rd, t, st);
  }
  std::unique_ptr<comm::Communicator> split(int color, int key) override { return inner_->split(color, key); }
  [[noreturn]] void abort(int code, const std::string& why) override {
    inner_->abort(code, why);
    std::abort();  // not reached: the inner abort does not return
  }

 private:
  std::unique_ptr<comm::Communicator> inner_;
  bool ordered_;
};

// This rank's share of a one-hot global batch: `b` samples, 3 dense features, tables of 10 and 30 rows.
data::Batch local_batch(int rank, int step, int b) {
  data::Batch batch;
  batch.size = b;
  for (int i = 0; i < b; ++i) {
    const int k = (rank * 131 + step * 17 + i * 7) % 97;
    for (int f = 0; f < 3; ++f) batch.dense.push_back(static_cast<float>((k + f) % 11) / 11.0f);
    batch.labels.push_back(static_cast<float>(k % 2));
  }
  for (const std::int64_t rows : {10, 30}) {
    std::vector<std::int64_t> offsets{0}, indices;
    for (int i = 0; i < b; ++i) {
      indices.push_back((rank * 7 + step * 3 + i * 5) % rows);
      offsets.push_back(i + 1);
    }
    batch.offsets.push_back(std::move(offsets));
    batch.indices.push_back(std::move(indices));
  }
  return batch;
}

struct Case {
  bool ordered;
  bool graphs;
};

class DenseReduces : public testing::TestWithParam<Case> {};

TEST_P(DenseReduces, AreWaitedForOnlyWhereTheyAreNotOrderedOnTheStream) {
  const Case c = GetParam();
  auto comm = comm::make_mpi_world_communicator();
  if (comm->size() < 2) GTEST_SKIP() << "one rank has no all-reduce";
  auto backend = device::make_backend(device::BackendKind::cpu_strict, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "reduces"};
  Watch watch(comm::make_staged_communicator(*comm, *backend), c.ordered);
  JobSpec spec = parse_job_spec(
      "name = \"reduces\"\n[model]\nembedding_dim = 4\nbottom_mlp = [8, 4]\ntop_mlp = [8, 1]\n"
      "[optimizer]\ndense = \"adagrad\"\nsparse = \"adagrad\"\n[data]\ntrain = \"none.h5\"\n[device]\nkind = "
      "\"cpu-strict\"\n",
      "reduces");
  spec.device.graphs = c.graphs ? AutoSwitch::on : AutoSwitch::off;
  const std::vector<embedding::TableSpec> tables{{10, 4}, {30, 4}};
  const auto plan = embedding::ShardingPlan::automatic(tables, comm->size());
  constexpr int kLocal = 8, kSteps = 6;
  DlrmModel model{spec, tables, 3, *comm, watch, *backend, pool, kLocal, plan};
  ASSERT_EQ(model.uses_graphs(), c.graphs);
  for (int step = 0; step < kSteps; ++step)
    model.train_step_async(local_batch(comm->rank(), step, kLocal), std::int64_t(kLocal) * comm->size());
  EXPECT_TRUE(std::isfinite(model.take_loss()));
  // The top and the bottom MLP each step (the dot interaction has no parameters); with graphs,
  // on the first two steps only.
  EXPECT_EQ(watch.reduces, 2 * (c.graphs ? 2 : kSteps));
  EXPECT_EQ(watch.waits, c.ordered ? 0 : watch.reduces);
}

INSTANTIATE_TEST_SUITE_P(Cases, DenseReduces,
                         testing::Values(Case{true, false}, Case{false, false}, Case{true, true}, Case{false, true}),
                         [](const auto& info) {
                           return std::string(info.param.ordered ? "ordered" : "unordered") +
                                  (info.param.graphs ? "_graphs" : "_eager");
                         });

}  // namespace
}  // namespace recmix::runtime
