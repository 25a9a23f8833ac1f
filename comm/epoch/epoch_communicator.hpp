#pragma once
// Device collectives of co-located jobs in epochs. NCCL kernels of different communicators on one
// GPU may deadlock when two GPUs run them in different orders: job A's kernel on GPU 0 spins
// waiting for A's kernel on GPU 1, which cannot start while B's kernel, waiting for B's kernel on
// GPU 0, occupies GPU 1. NCCL's own advice is to use communicators that share a device in separate
// epochs, in one order on every rank. The ranks of a job cannot see other jobs' orders, so the
// epoch wrapper makes one: before each device collective, each rank of the job tries its device's
// lock (one per device per process) and the job's ranks all-reduce, over its host communicator,
// whether every one of them got it. If not, the ranks that got the lock release it and all retry
// after a jittered, growing pause. If so, each rank queues the collective on its device behind
// the collective queued there last by any job (its stream waits for that one's event), marks it
// with an event of its own, and releases the lock. Two jobs that share devices hold all their
// locks at once, in turns, so they queue their collectives on every shared device in the same
// order, and each device runs them in that order: no cycle of waiting kernels can form, in
// whatever order the jobs arrive. A collective that is not ordered on a stream (MPI, the staged
// communicator of the strict emulator) finishes before its lock is released instead.
// The cost: one host all-reduce of one integer per device collective (more under contention), and
// no overlap of two jobs' collectives on one device. The host never waits for the device. The
// order is decided on the host when a collective is issued, which a graph's replay could not take
// part in: an epoch communicator captures no collective (captures_on_stream is false), and its
// jobs keep their collectives out of their graphs.
#include <memory>

#include "comm/communicator.hpp"

namespace recmix::device {
class Backend;
}

namespace recmix::comm {

// device: the job's device communicator (NCCL, or the staged one under the emulator); host: the
// job's host communicator over the same ranks in the same order; device_index: the device this
// rank's part runs on (its lock is shared by every job of the process on that device); backend:
// the job's, which makes the event that marks its queued collectives (nullptr: none; then
// stream-ordered collectives are waited for like the others). host and backend must outlive the
// returned communicator. Not collective.
std::unique_ptr<Communicator> make_epoch_communicator(std::unique_ptr<Communicator> device, Communicator& host,
                                                      int device_index, device::Backend* backend = nullptr);

// Epochs this process's collectives on `device_index` waited for with their lock taken elsewhere
// (retries of the agreement), for tests and metrics.
long long epoch_retries(int device_index);

}  // namespace recmix::comm
