#pragma once
// The small model the checkpoint fuzz targets load into: 1 MPI rank, CPU backend, tables of 10
// and 30 rows of dim 4, 3 dense features, Adagrad. MPI is initialised (and left so at exit:
// MPI_Finalize unloads Open MPI's components, and what they still hold would be reported as
// leaks from unknown modules, which no suppression can name).
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharding_plan.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::fuzz {

inline constexpr const char* kCheckpointSpec =
    "name = \"fuzz\"\n[model]\nembedding_dim = 4\nbottom_mlp = [8, 4]\ntop_mlp = [8, 1]\n"
    "[optimizer]\ndense = \"adagrad\"\nsparse = \"rowwise_adagrad\"\n[data]\ntrain = \"none.h5\"\n";

struct CheckpointModel {
  std::unique_ptr<comm::Communicator> comm = comm::make_mpi_world_communicator();
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "fuzz"};
  runtime::JobSpec spec = runtime::parse_job_spec(kCheckpointSpec, "fuzz");
  std::vector<std::int64_t> rows{10, 30};
  std::vector<embedding::TableSpec> tables{{10, 4}, {30, 4}};
  embedding::ShardingPlan plan = embedding::ShardingPlan::automatic(tables, 1);
  runtime::DlrmModel model{spec, tables, 3, *comm, *comm, *backend, pool, 8, plan};

  // Writes a valid checkpoint of the model (freshly initialised weights, step 3) to `path`.
  void save(const std::string& path) {
    runtime::CheckpointMeta meta;
    meta.step = 3;
    meta.position.epoch = 0;
    meta.position.batch = 3;
    meta.seed = 1;
    meta.world_size = 1;
    meta.job_spec = kCheckpointSpec;
    meta.table_rows = rows;
    meta.num_dense = 3;
    runtime::save_checkpoint(path, model, meta, *comm);
  }
};

// LeakSanitizer's interface, where the build has it (weak: the corpus replays are built without).
extern "C" void __lsan_disable() __attribute__((weak));
extern "C" void __lsan_enable() __attribute__((weak));

// While alive, what is allocated is never reported as leaked. For the one-off set-up: Open MPI
// loads its components at MPI_Init and at the first MPI-IO file (the first checkpoint), keeps
// small strings of theirs and unloads the ones it does not select; with fast stack unwinding such
// a leak's stack ends in an unloaded module, which no suppression can name, and libFuzzer would
// blame it on whichever input it checks leaks after.
struct LeaksIgnored {
  LeaksIgnored() {
    if (__lsan_disable) __lsan_disable();
  }
  ~LeaksIgnored() {
    if (__lsan_enable) __lsan_enable();
  }
  LeaksIgnored(const LeaksIgnored&) = delete;
  LeaksIgnored& operator=(const LeaksIgnored&) = delete;
};

// Initialises MPI (threads: multiple) and makes the model; when `base` is not empty, also writes
// a valid checkpoint of it there (which opens the first MPI-IO file).
inline CheckpointModel* start_checkpoint_model(int* argc, char*** argv, const std::string& base = {}) {
  LeaksIgnored set_up;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  auto* model = new CheckpointModel;
  if (!base.empty()) model->save(base);
  return model;
}

}  // namespace recmix::fuzz
