#pragma once
// Access to the MPI_Comm inside an MPI communicator, for code that must call MPI directly
// (parallel HDF5 file access). Only such code includes this header (it pulls in mpi.h).
#include <mpi.h>

#include "comm/communicator.hpp"

namespace recmix::comm {

// The communicator's MPI_Comm (owned by comm; do not free it). Throws CommError when comm is not
// an MPI communicator.
MPI_Comm mpi_handle(const Communicator& comm);

}  // namespace recmix::comm
