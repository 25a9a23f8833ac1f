#pragma once
// Executor: the part of `recmix run` on every rank. It takes the scheduler's messages in order:
// a start creates the job's communicator over exactly its ranks (from this thread, in the order
// the starts arrive, which is the same on every rank, so two ranks never wait on each other's
// creations in opposite orders) and a JobRunner on it; stop and io_grant go to the job's runner;
// shutdown ends the loop once every job of this rank has ended. Each job's threads are bound to
// cores of their own among the rank's CPUs while enough are free (else left unbound).
#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "runtime/run/control_plane.hpp"
#include "runtime/run/job_runner.hpp"

namespace recmix::runtime::run {

class Executor {
 public:
  // terminate (may be null): when set, every job of this rank stops with a checkpoint.
  Executor(ControlPlane& plane, const std::atomic<bool>* terminate);
  // Runs until shutdown (blocking; rank 0 runs it on a thread beside the scheduler service).
  void run();

 private:
  void handle(const Message& message);
  void reap();  // ends the runners whose job is done

  ControlPlane& plane_;
  std::map<int, std::unique_ptr<JobRunner>> runners_;  // by launch
  std::vector<int> cpus_;                              // the CPUs this rank may use
  std::map<int, int> cpu_owner_;                       // cpu -> launch holding it
  bool shutdown_ = false;
  const std::atomic<bool>* terminate_ = nullptr;
  bool draining_ = false;
};

}  // namespace recmix::runtime::run
