#pragma once
// Access to the MPI_Comm inside an MPI communicator, for code that must call MPI directly
// (parallel HDF5 file access). Only such code includes this header (it pulls in mpi.h).
#include <mpi.h>

#include "comm/communicator.hpp"

namespace recmix::comm {

// An MPI_Comm over comm's ranks, in their order, for MPI calls made outside the communicator
// (owned by comm; do not free it). It is not the one comm's own collectives use, so the two
// kinds of traffic never meet. Throws CommError when comm is not an MPI communicator.
MPI_Comm mpi_handle(const Communicator& comm);

}  // namespace recmix::comm
