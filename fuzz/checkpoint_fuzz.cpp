// Fuzz target for the checkpoint loader (runtime/checkpoint/checkpoint.hpp): the input is written to a file,
// read with read_checkpoint_meta and loaded with load_checkpoint into a small model (1 MPI rank,
// CPU backend, tables of 10 and 30 rows, 3 dense features: the shape of the corpus's valid
// checkpoints). A damaged file must be a recmix::Error (DataError, IoError) naming it; anything
// else is a finding. A checkpoint that loads must hold finite values only.
//
// RECMIX_FUZZ_WRITE_SEED=<path> makes the target write such a checkpoint (freshly initialised
// weights, step 3) to <path> at start, for the corpus.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "fuzz/checkpoint_model.hpp"
#include "fuzz/fuzz_files.hpp"

namespace {

using namespace recmix;

fuzz::CheckpointModel* model = nullptr;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "checkpoint fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* seed = std::getenv("RECMIX_FUZZ_WRITE_SEED");
  model = fuzz::start_checkpoint_model(argc, argv, seed ? seed : "");
  if (seed) std::printf("wrote %s\n", seed);
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
