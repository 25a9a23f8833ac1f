#pragma once
// Device collectives of co-located jobs in epochs. NCCL kernels of different communicators on one
// GPU may deadlock when two GPUs run them in different orders: job A's kernel on GPU 0 spins
// waiting for A's kernel on GPU 1, which cannot start while B's kernel, waiting for B's kernel on
// GPU 0, occupies GPU 1. NCCL's own advice is to use communicators that share a device in separate
// epochs, each finished before the next starts, in one order on every rank. The ranks of a job
// cannot see other jobs' orders, so the epoch wrapper makes the order unnecessary: before each
// device collective, each rank of the job tries its device's lock (one per device per process)
// and the job's ranks all-reduce, over its host communicator, whether every one of them got it.
// If so, the collective runs and is waited for (its stream synchronised) before the locks are
// released; if not, the ranks that got the lock release it and all retry after a jittered,
// growing pause. A collective then only ever starts when no other job's collective can be
// running on any of its devices, so no cycle of waiting kernels can form, in whatever order the
// jobs arrive. The cost: one host all-reduce per device collective (more under contention) and
// no overlap of a device collective with the job's later work.
#include <memory>

#include "comm/communicator.hpp"

namespace recmix::comm {

// device: the job's device communicator (NCCL, or the staged one under the emulator); host: the
// job's host communicator over the same ranks in the same order; device_index: the device this
// rank's part runs on (its lock is shared by every job of the process on that device). host must
// outlive the returned communicator. Not collective.
std::unique_ptr<Communicator> make_epoch_communicator(std::unique_ptr<Communicator> device, Communicator& host,
                                                      int device_index);

// Epochs this process's collectives on `device_index` waited for with their lock taken elsewhere
// (retries of the agreement), for tests and metrics.
long long epoch_retries(int device_index);

}  // namespace recmix::comm
