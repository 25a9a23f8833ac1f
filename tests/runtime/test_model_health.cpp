// Divergence checks on the model: first_non_finite names the first tensor and row holding a value
// that is not finite (dense parameters; with everything, the optimizer state and this rank's
// embedding shards), and require_finite_model stops every rank at once before a checkpoint of such a
// model is written, even when only one rank's shard holds the value. At 1 and 2 ranks.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharding_plan.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_write.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Fixture {
  std::unique_ptr<comm::Communicator> comm = comm::make_mpi_world_communicator();
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "health"};
  JobSpec spec = parse_job_spec(
      "name = \"health\"\n[model]\nembedding_dim = 4\nbottom_mlp = [8, 4]\ntop_mlp = [8, 1]\n"
      "[optimizer]\ndense = \"adagrad\"\nsparse = \"rowwise_adagrad\"\n[data]\ntrain = \"none.h5\"\n",
      "health");
  std::vector<std::int64_t> rows{10, 30};
  std::vector<embedding::TableSpec> tables{{10, 4}, {30, 4}};
  embedding::ShardingPlan plan = embedding::ShardingPlan::automatic(tables, comm->size());
  DlrmModel model{spec, tables, 3, *comm, *comm, *backend, pool, 8, plan};
};

int sum_over_world(int v) {
  int total = 0;
  MPI_Allreduce(&v, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

TEST(ModelHealth, NamesTheFirstTensorAndRowThatIsNotFinite) {
  Fixture f;
  EXPECT_EQ(first_non_finite(f.model, false), "");
  auto params = f.model.dense_parameters();
  ASSERT_FALSE(params.empty());
  const float saved = params[1].value[2];
  params[1].value[2] = kNaN;
  EXPECT_EQ(first_non_finite(f.model, true), "dense parameter " + params[1].name + " row 2 holds nan");
  params[1].value[2] = saved;
  auto shards = f.model.embedding().local_shards();
  ASSERT_FALSE(shards.empty());  // every rank owns a part of some table here
  const auto& s = shards.back();
  s.weights[(s.row_end - s.row_begin - 1) * s.dim + 1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite(f.model, true), "");  // the dense part alone is fine
  EXPECT_EQ(first_non_finite(f.model, false), "embedding table " + std::to_string(s.table) + " (rows from " +
                                                  std::to_string(s.row_begin) + ") row " +
                                                  std::to_string(s.row_end - s.row_begin - 1) + " holds inf");
}

TEST(ModelHealth, ADivergedModelIsNotCheckpointedOnAnyRank) {
  Fixture f;
  // A folder that does not exist: the refusal comes before anything is created.
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string dir = (std::filesystem::temp_directory_path() / ("recmix-health-" + std::to_string(pid))).string();
  const std::string path = dir + "/ckpt-000000007.h5";
  CheckpointMeta meta;
  meta.step = 7;
  meta.table_rows = f.rows;
  meta.num_dense = 3;
  meta.world_size = f.comm->size();
  // Only the last rank's last shard holds a NaN; every rank must refuse.
  if (f.comm->rank() == f.comm->size() - 1) f.model.embedding().local_shards().back().weights[0] = kNaN;
  int threw = 0;
  try {
    require_finite_model(f.model, *f.comm, meta.step, path);
    save_checkpoint(path, f.model, meta, *f.comm);  // not reached
  } catch (const DivergedError& e) {
    threw = 1;
    if (f.comm->rank() == f.comm->size() - 1)
      EXPECT_NE(std::string(e.what()).find("holds nan"), std::string::npos) << e.what();
    else
      EXPECT_NE(std::string(e.what()).find("1 other rank(s) hold a value that is not finite"), std::string::npos)
          << e.what();
  }
  EXPECT_EQ(sum_over_world(threw), f.comm->size());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// A background checkpoint checks the values while it copies them: the snapshot names the first
// value that is not finite by array and row, the ranks agree, and no write starts.
TEST(ModelHealth, ABackgroundCheckpointFindsTheValueWhileCopying) {
  Fixture f;
  CheckpointMeta meta;
  meta.step = 9;
  meta.table_rows = f.rows;
  meta.num_dense = 3;
  meta.world_size = f.comm->size();
  const int rank = f.comm->rank();
  AsyncCheckpointWriter writer(*f.comm, *f.backend);
  EXPECT_EQ(writer.snapshot(describe_checkpoint(f.model, meta, rank)), "");  // a healthy model
  const bool holder = rank == f.comm->size() - 1;
  if (holder) {
    auto& s = f.model.embedding().local_shards().back();
    s.weights[(s.row_end - s.row_begin - 1) * s.dim + 2] = kNaN;  // the shard's last row
  }
  const std::string bad = writer.snapshot(describe_checkpoint(f.model, meta, rank));
  if (holder) {
    const auto& s = f.model.embedding().local_shards().back();
    EXPECT_EQ(bad, "embedding/" + std::to_string(s.table) + "/weights row " + std::to_string(s.row_end - 1) +
                       " holds nan");
  } else {
    EXPECT_EQ(bad, "");
  }
  int threw = 0;
  try {
    agree_finite_model(bad, *f.comm, meta.step, "unwritten.h5");
  } catch (const DivergedError& e) {
    threw = 1;
    EXPECT_NE(std::string(e.what()).find("unwritten.h5 not written"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sum_over_world(threw), f.comm->size());
  EXPECT_FALSE(writer.in_flight());
}

}  // namespace
}  // namespace recmix::runtime
