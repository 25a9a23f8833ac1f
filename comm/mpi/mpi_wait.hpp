#pragma once
// How a rank waits for its MPI requests. Open MPI's own waits poll without a pause: the quickest
// wait while every rank has a core to itself, and a waste of the core as soon as it is shared. A
// polling rank then burns the time slices that the work beside it needs, and its peer, off its
// core, can hold a collective for a whole slice. When Open MPI sees more ranks than slots it
// yields between polls instead, and Linux's EEVDF scheduler pushes a yielding task's deadline back
// a slice at every yield, so beside a busy process (a build, another job) such ranks starve.
// wait_requests polls for a short while, then sleeps between polls. docs/operations.md has the
// measurements.
#include <mpi.h>

#include <span>

#include "comm/mpi/mpi_communicator.hpp"

namespace recmix::comm {

// MPI_Waitall on `requests`, polling with MPI_Testall for `policy.spin` and then sleeping
// `policy.nap` between polls. Returns MPI_Testall's error code, or MPI_SUCCESS when all are done.
int wait_requests(std::span<MPI_Request> requests, const PollThenSleep& policy);

// Node-local ranks of `comm` (MPI_COMM_TYPE_SHARED) against the node's online CPUs: true when
// each rank of this node can have a CPU of its own. Collective over comm.
bool ranks_fit_node_cpus(MPI_Comm comm);

}  // namespace recmix::comm
