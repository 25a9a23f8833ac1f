// Stands in for the NCCL communicator in builds without CUDA or NCCL.
#include "comm/nccl/nccl_communicator.hpp"

#include "core/error.hpp"

namespace recmix::comm {

bool nccl_compiled() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, const NcclOptions&) {
  throw NotCompiledError("the NCCL communicator is not compiled into this build (needs CUDA and NCCL at configure time)");
}

}  // namespace recmix::comm
