#include "runtime/run/executor.hpp"

#include <sched.h>

#include <chrono>
#include <thread>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"

namespace recmix::runtime::run {

Executor::Executor(ControlPlane& plane, const std::atomic<bool>* terminate) : plane_(plane), terminate_(terminate) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus_.push_back(c);
}

void Executor::handle(const Message& m) {
  if (m.kind == "start") {
    auto placement = JobPlacement::from_json(m.body);
    try {
      auto comm = comm::make_mpi_group_communicator(plane_.job_parent(), placement.ranks, placement.launch % 32768);
      if (!comm) throw CommError("start message for a job that does not include this rank");
      const int launch = placement.launch;
      std::vector<int> free;
      for (int c : cpus_)
        if (!cpu_owner_.count(c)) free.push_back(c);
      if (static_cast<int>(free.size()) >= placement.threads) {
        placement.cores.assign(free.begin(), free.begin() + placement.threads);
        for (int c : placement.cores) cpu_owner_[c] = launch;
      }
      auto& runner = runners_[launch] = std::make_unique<JobRunner>(plane_, std::move(placement), std::move(comm));
      if (draining_) runner->request_stop();
    } catch (const Error& e) {
      JobReport report;
      report.launch = placement.launch;
      report.rank = plane_.rank();
      report.error = std::string(e.kind()) + ": " + e.what();
      plane_.send_to_scheduler({"failed", m.job, -1, report.to_json()});
    }
  } else if (m.kind == "stop" || m.kind == "io_grant") {
    const auto it = runners_.find(launch_of(m));
    if (it == runners_.end()) return;  // ended already
    if (m.kind == "stop")
      it->second->request_stop();
    else
      it->second->grant_io();
  } else if (m.kind == "shutdown") {
    shutdown_ = true;
  }
}

void Executor::reap() {
  for (auto it = runners_.begin(); it != runners_.end();) {
    if (!it->second->done()) {
      ++it;
      continue;
    }
    for (int c : it->second->placement().cores) cpu_owner_.erase(c);
    it = runners_.erase(it);  // joins the job's thread
  }
}

void Executor::run() {
  while (!(shutdown_ && runners_.empty())) {
    reap();
    if (!draining_ && terminate_ && terminate_->load()) {
      draining_ = true;  // each job stops at a step its ranks agree on, with a checkpoint
      for (auto& [launch, runner] : runners_) runner->request_stop();
    }
    while (auto m = plane_.poll_executor()) {
      if (m->kind == "start") reap();  // a job that just ended gives its cores back first
      handle(*m);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace recmix::runtime::run
