#pragma once
// JobRunner: one placed job on one rank of `recmix run`. It owns the job's thread, which builds
// a Trainer (its own backend with the job's thread count, its own memory pool capped at the
// job's share, the job's communicator over exactly its ranks) and trains with the run's hooks:
// utilisation samples to the scheduler, a stop flag the ranks agree on, and checkpoint writes
// gated by the scheduler. Success or failure goes back to the scheduler as one message.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"
#include "comm/guarded/guarded_communicator.hpp"
#include "runtime/run/control_plane.hpp"
#include "runtime/run/messages.hpp"
#include "runtime/train/job_spec.hpp"

namespace recmix::runtime {
class Trainer;
}

namespace recmix::runtime::run {

class JobRunner {
 public:
  // Starts the job's thread at once; comm is the job's communicator (this rank's part). The job
  // trains over it guarded (comm/guarded), so a failure on one rank anywhere in a step ends the
  // job on all its ranks and on no other job.
  JobRunner(ControlPlane& plane, JobPlacement placement, std::unique_ptr<comm::Communicator> comm);
  ~JobRunner();  // joins the thread
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void request_stop() { stop_.store(true); }
  void grant_io();
  bool done() const { return done_.load(); }
  const JobPlacement& placement() const { return placement_; }

 private:
  class Sampler;
  void main();
  JobSpec job_spec() const;
  std::unique_ptr<Trainer> build_trainer(const JobSpec& spec);
  void finish(std::string outcome, JobReport& report);
  void gated_write(const std::function<void()>& write);

  ControlPlane& plane_;
  JobPlacement placement_;
  std::unique_ptr<comm::GuardedCommunicator> comm_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::mutex io_mutex_;
  std::condition_variable io_cv_;
  bool io_granted_ = false;
  std::thread thread_;
};

}  // namespace recmix::runtime::run
