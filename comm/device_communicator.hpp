#pragma once
// The communicator for a job's device buffers, chosen in one place for every backend: NCCL's on
// CUDA; under cpu-strict the staged one (device to host, MPI, host to device), which stands in
// for NCCL; on the CPU backend none, since device memory is host memory and the host
// communicator serves. In two calls, because on CUDA the NCCL communicator comes first: making
// it (a collective) picks this rank's GPU, one per node-local rank, and makes it the calling
// thread's current device, on which the backend then creates its handles, streams and memory.
#include <memory>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "device/types.hpp"

namespace recmix::comm {

// Before the backend exists: NCCL's communicator over `host` for a cuda backend, else nullptr.
std::unique_ptr<Communicator> device_communicator_before_backend(Communicator& host, device::BackendKind kind);

// Once it exists: `early` (what the first call returned) if any, else the staged communicator
// where device memory is not host memory, else nullptr. `shared` (the job shares its device with
// other jobs of a recmix run) wraps it in the epoch communicator, so that several jobs' device
// collectives never interleave.
std::unique_ptr<Communicator> device_communicator(Communicator& host, device::Backend& backend,
                                                  std::unique_ptr<Communicator> early, bool shared);

}  // namespace recmix::comm
