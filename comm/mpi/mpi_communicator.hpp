#pragma once
// The MPI implementation of Communicator: collectives over host buffers on a private duplicate of
// MPI_COMM_WORLD (errors return as CommError instead of aborting). No MPI type appears here; code
// that needs the raw MPI_Comm (parallel HDF5) includes comm/mpi/mpi_handle.hpp.
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "comm/communicator.hpp"

namespace recmix::comm {

// How a rank waits for a collective (comm/mpi/mpi_wait.hpp says why).
enum class MpiWait {
  automatic,        // poll_then_sleep when every rank of the node can have a CPU, else blocking
  poll_then_sleep,  // poll for PollThenSleep::spin, then sleep between polls
  blocking,         // Open MPI's own blocking calls (they yield between polls when oversubscribed)
};

struct PollThenSleep {
  std::chrono::microseconds spin{1000};  // poll without pause for this long
  std::chrono::microseconds nap{50};     // then sleep this long between polls
};

struct MpiOptions {
  // Largest element count handed to one MPI call. all_reduce_sum and broadcast split longer
  // buffers into pieces of this size; all_gather and all_to_all_v reject them with CommError
  // (MPI counts and displacements are int). Smaller values exist for tests.
  std::size_t max_elements_per_call = 2147483647;
  // make_mpi_world_communicator resolves automatic once, for the world; split and group
  // communicators inherit the world's choice.
  MpiWait wait = MpiWait::automatic;
  PollThenSleep poll;
};

// A communicator over every rank of the job. Collective: every rank must call it. Requires MPI
// to be initialised (runtime::ensure_mpi or MPI_Init_thread); throws CommError otherwise.
// Collectives on one communicator must be issued in the same order on every rank; threads that
// communicate concurrently (several jobs in one rank) each use their own communicator (split).
// Errors (bad counts, MPI failures) throw CommError naming the call; nothing aborts by itself.
std::unique_ptr<Communicator> make_mpi_world_communicator();
std::unique_ptr<Communicator> make_mpi_world_communicator(const MpiOptions& options);

// A communicator over the listed ranks of `parent` (ranks of parent, in the order given: the i-th
// listed rank becomes rank i), created by those ranks alone (MPI_Comm_create_group): ranks not
// listed take no part, so jobs placed on different rank sets never wait for each other. Every
// listed rank calls it with the same ranks and tag; concurrent creations over one parent from
// threads of the same process must use different tags (0 .. 32767). Returns nullptr on a rank
// that is not listed. Throws CommError when parent is not an MPI communicator or a rank is out of
// range or repeated.
std::unique_ptr<Communicator> make_mpi_group_communicator(const Communicator& parent, std::span<const int> ranks,
                                                          int tag);

// True when comm is the MPI implementation (so mpi_handle() works on it).
bool is_mpi_communicator(const Communicator& comm);

// How comm's ranks wait (never automatic: that is resolved when the world is made). Throws
// CommError when comm is not an MPI communicator.
MpiWait mpi_wait(const Communicator& comm);

}  // namespace recmix::comm
