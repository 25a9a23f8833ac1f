#include "runtime/cli/mpi_session.hpp"

#include <mpi.h>

#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace recmix::runtime {
namespace {
bool g_we_initialised = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}
}  // namespace

int ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw CommError("MPI_Init_thread failed");
    g_we_initialised = true;
    std::atexit(finalize_at_exit);
    // Several jobs' threads and the control plane call MPI at once (recmix run): anything less
    // than MPI_THREAD_MULTIPLE would corrupt messages silently.
    if (provided < MPI_THREAD_MULTIPLE)
      throw CommError("the MPI library provides thread level " + std::to_string(provided) +
                      ", recmix needs MPI_THREAD_MULTIPLE (" + std::to_string(MPI_THREAD_MULTIPLE) +
                      "): use an MPI built with thread support (Debian's Open MPI has it)");
  }
  return world_rank();
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

int local_ranks() {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    throw CommError("MPI_Comm_split_type (ranks per host) failed");
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

std::string error_prefix() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && world_size() > 1) return "recmix (rank " + std::to_string(world_rank()) + ")";
  return "recmix";
}

void abort_other_ranks_on_failure() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && world_size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace recmix::runtime
