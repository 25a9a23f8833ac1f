#pragma once
// MPI bootstrap for commands that run under mpirun (train, eval, run). Initialises MPI with
// thread support on first use and finalises at exit; commands that need no MPI never start it.
#include <string>
#include <vector>

namespace recmix::runtime {

// Initialises MPI (MPI_THREAD_MULTIPLE requested) if it is not yet; returns the world rank.
int ensure_mpi();
int world_rank();
int world_size();
// Each world rank's node key (the smallest world rank on its host, by MPI_Comm_split_type) and
// host name, in world order, on every rank. Collective.
struct RankPlaces {
  std::vector<int> node_key;
  std::vector<std::string> host;
};
RankPlaces rank_places();
// "recmix", or "recmix (rank 3)" when MPI runs several ranks: the prefix of error lines.
std::string error_prefix();
// Called by main after an error: under more than one rank, aborts the job so no rank hangs.
void abort_other_ranks_on_failure();

// Called just before throwing an error that every rank of the world has learnt of at the same
// point (rank 0's verdict on a job spec or jobs file, broadcast to all): main then prints it once,
// from rank 0, and every rank exits with status 1 through MPI_Finalize. MPI_Abort would add Open
// MPI's banners (and, with two ranks aborting at once, its ORTE_ERROR_LOG lines).
void error_known_to_every_rank();
// The run's log (train.log), once it exists: the error lines main writes there too, and where a
// rank whose peer failed puts its line instead of the terminal (the peer prints the cause).
void set_failure_log(std::string path);
// main's end after an error of this rank, one line "<prefix>: <kind>: <what>"; returns the exit
// status, or does not return (MPI_Abort). A PeerFailedError (peer_failed) is written to the
// failure log, and this rank waits for the failing rank's MPI_Abort (10 s at most, then its own),
// so that the line the user reads first is the cause.
int end_after_error(const char* kind, const std::string& what, bool peer_failed);

}  // namespace recmix::runtime
