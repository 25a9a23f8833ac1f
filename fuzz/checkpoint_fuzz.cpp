// Fuzz target for the checkpoint loader (runtime/checkpoint.hpp): the input is written to a file,
// read with read_checkpoint_meta and loaded with load_checkpoint into a small model (1 MPI rank,
// CPU backend, tables of 10 and 30 rows, 3 dense features: the shape of the corpus's valid
// checkpoints). A damaged file must be a recmix::Error (DataError, IoError) naming it; anything
// else is a finding. A checkpoint that loads must hold finite values only.
//
// RECMIX_FUZZ_WRITE_SEED=<path> makes the target write such a checkpoint (freshly initialised
// weights, step 3) to <path> at start, for the corpus.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharding_plan.hpp"
#include "fuzz/fuzz_files.hpp"
#include "runtime/checkpoint.hpp"
#include "runtime/dlrm_model.hpp"
#include "runtime/job_spec.hpp"

namespace {

using namespace recmix;

constexpr const char* kSpec =
    "name = \"fuzz\"\n[model]\nembedding_dim = 4\nbottom_mlp = [8, 4]\ntop_mlp = [8, 1]\n"
    "[optimizer]\ndense = \"adagrad\"\nsparse = \"rowwise_adagrad\"\n[data]\ntrain = \"none.h5\"\n";

struct Model {
  std::unique_ptr<comm::Communicator> comm = comm::make_mpi_world_communicator();
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "fuzz"};
  runtime::JobSpec spec = runtime::parse_job_spec(kSpec, "fuzz");
  std::vector<std::int64_t> rows{10, 30};
  embedding::ShardingPlan plan = embedding::ShardingPlan::automatic({{10, 4}, {30, 4}}, 1);
  runtime::DlrmModel model{spec, rows, 3, *comm, *comm, *backend, pool, 8, plan};
};

Model* model = nullptr;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "checkpoint fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  // MPI is left initialised at exit: MPI_Finalize unloads Open MPI's components, and what they
  // still hold would be reported as leaks from unknown modules, which no suppression can name.
  model = new Model;
  if (const char* seed = std::getenv("RECMIX_FUZZ_WRITE_SEED")) {
    runtime::CheckpointMeta meta;
    meta.step = 3;
    meta.position.epoch = 0;
    meta.position.batch = 3;
    meta.seed = 1;
    meta.world_size = 1;
    meta.job_spec = kSpec;
    meta.table_rows = model->rows;
    meta.num_dense = 3;
    runtime::save_checkpoint(seed, model->model, meta, *model->comm);
    std::printf("wrote %s\n", seed);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = recmix::fuzz::write_scratch_file("ckpt.h5", data, size);
  try {
    const runtime::CheckpointMeta meta = runtime::read_checkpoint_meta(path);
    require(meta.step >= 0 && meta.world_size >= 1 && meta.num_dense >= 0, "damaged metadata accepted");
    require(meta.position.epoch >= 0 && meta.position.epoch <= meta.step && meta.position.batch >= 0,
            "damaged data position accepted");
    for (auto r : meta.table_rows) require(r > 0, "a table without rows accepted");
  } catch (const Error&) {
  }
  try {
    runtime::load_checkpoint(path, model->model);
    require(runtime::first_non_finite(model->model, false).empty(), "a value that is not finite loaded");
  } catch (const Error&) {
  }
  return 0;
}
