#include "runtime/run/executor.hpp"

#include <chrono>
#include <thread>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"

namespace recmix::runtime::run {

void Executor::handle(const Message& m) {
  if (m.kind == "start") {
    auto placement = JobPlacement::from_json(m.body);
    try {
      auto comm = comm::make_mpi_group_communicator(plane_.job_parent(), placement.ranks, placement.launch % 32768);
      if (!comm) throw CommError("start message for a job that does not include this rank");
      const int launch = placement.launch;
      runners_[launch] = std::make_unique<JobRunner>(plane_, std::move(placement), std::move(comm));
    } catch (const Error& e) {
      plane_.send_to_scheduler({"failed", m.job, -1,
                                {{"launch", placement.launch}, {"rank", plane_.rank()},
                                 {"error", std::string(e.kind()) + ": " + e.what()}}});
    }
  } else if (m.kind == "stop" || m.kind == "io_grant") {
    const auto it = runners_.find(m.body.at("launch").get<int>());
    if (it == runners_.end()) return;  // ended already
    if (m.kind == "stop")
      it->second->request_stop();
    else
      it->second->grant_io();
  } else if (m.kind == "shutdown") {
    shutdown_ = true;
  }
}

void Executor::run() {
  while (!(shutdown_ && runners_.empty())) {
    while (auto m = plane_.poll_executor()) handle(*m);
    for (auto it = runners_.begin(); it != runners_.end();)
      it = it->second->done() ? runners_.erase(it) : std::next(it);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace recmix::runtime::run
