#pragma once
// The device-buffer communicator of the strict device emulator: NCCL's part, played over a host
// communicator (MPI). Collectives take device buffers of one backend (and, optionally, one of its
// streams), copy them to host staging buffers with the backend, run the host collective there and
// copy the result back. A host pointer where a device buffer belongs is a DeviceError naming the
// call, as it is a crash or silent garbage with NCCL; so the runtime's choice of communicator is
// exercised under cpu-strict. Counts and semantics are those of make_nccl_communicator: with a
// stream a call is ordered on it (orders_on_stream), and since the strict emulator runs work when
// it is issued, it runs then, and its Request is complete when it returns; so the code above
// takes NCCL's paths, in which the host never waits for a device collective. Without a stream a
// call returns when done, and a non-blocking call's Request completes (and writes its receive
// buffer) in test() or wait(). The staging copies, on a stream of their own, see everything
// issued before the call. A call on a stream that the calling thread captures is recorded in
// the graph, as NCCL's is captured (Communicator::captures_on_stream), and each replay runs it;
// host buffers are refused there too (NCCL takes device buffers only).
#include <memory>

#include "comm/communicator.hpp"
#include "device/backend.hpp"

namespace recmix::comm {

// host and backend must outlive the returned communicator. Not collective (no setup traffic).
std::unique_ptr<Communicator> make_staged_communicator(Communicator& host, device::Backend& backend);

}  // namespace recmix::comm
