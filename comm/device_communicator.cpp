#include "comm/device_communicator.hpp"

#include "comm/epoch/epoch_communicator.hpp"
#include "comm/nccl/nccl_communicator.hpp"
#include "comm/staged/staged_communicator.hpp"

namespace recmix::comm {

std::unique_ptr<Communicator> device_communicator_before_backend(Communicator& host, device::BackendKind kind) {
  if (kind == device::BackendKind::cuda) return make_nccl_communicator(host);
  return nullptr;
}

std::unique_ptr<Communicator> device_communicator(Communicator& host, device::Backend& backend,
                                                  std::unique_ptr<Communicator> early, bool shared) {
  std::unique_ptr<Communicator> c = std::move(early);
  if (!c && !device::device_memory_is_host(backend)) c = make_staged_communicator(host, backend);
  if (c && shared) c = make_epoch_communicator(std::move(c), host, backend.device_index(), &backend);
  return c;
}

}  // namespace recmix::comm
