#pragma once
// The NCCL implementation of Communicator: collectives over device buffers, ordered on CUDA
// streams, for one rank per GPU. It is set up through an existing communicator (normally the
// MPI one), which carries NCCL's unique id and is used to end the job on abort. No CUDA or NCCL
// type appears here. Builds without CUDA or NCCL get a stub that throws NotCompiledError.
#include <memory>

#include "comm/communicator.hpp"

namespace recmix::comm {

struct NcclOptions {
  // GPU of this rank; -1 picks the node-local rank (from Open MPI, Slurm or MPICH variables,
  // else the bootstrap rank) modulo the number of visible GPUs.
  int device = -1;
};

// True when this build contains the NCCL communicator.
bool nccl_compiled();

// Collective over bootstrap: every rank calls it. The bootstrap communicator must outlive the
// returned one. Throws NotCompiledError without NCCL, DeviceError when a rank has no usable GPU
// (on every rank, so none is left waiting), CommError when NCCL fails.
//
// Semantics of the returned communicator: buffers are device pointers. With a stream (a CUDA
// stream of the device backend) a call is enqueued on it and returns at once (stream-ordered,
// like the device backend's kernels); with stream == nullptr it runs on an internal stream and
// returns when done. Non-blocking calls return a Request completed when the work on the stream
// has finished. Passing a CPU stream throws CommError.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, const NcclOptions& options = {});

}  // namespace recmix::comm
