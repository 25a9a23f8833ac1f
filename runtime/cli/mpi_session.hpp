#pragma once
// MPI bootstrap for commands that run under mpirun (train, eval, run). Initialises MPI with
// thread support on first use and finalises at exit; commands that need no MPI never start it.
#include <string>

namespace recmix::runtime {

// Initialises MPI (MPI_THREAD_MULTIPLE requested) if it is not yet; returns the world rank.
int ensure_mpi();
int world_rank();
int world_size();
// Ranks of the world on this rank's host (MPI_Comm_split_type, shared memory). Collective.
int local_ranks();
// "recmix", or "recmix (rank 3)" when MPI runs several ranks: the prefix of error lines.
std::string error_prefix();
// Called by main after an error: under more than one rank, aborts the job so no rank hangs.
void abort_other_ranks_on_failure();

}  // namespace recmix::runtime
