#pragma once
// ControlPlane: the messages between rank 0's scheduler service and every rank's executor in
// `recmix run`. It runs on its own duplicate of the world communicator (its traffic never mixes
// with a job's), point to point, polled without blocking, so neither side is ever stuck behind a
// job's collectives. A message is a kind, a job id and a JSON body (docs/run.md lists them).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"

namespace recmix::runtime::run {

struct Message {
  std::string kind;        // start, stop, shutdown, io_grant | sample, finished, failed, io_request, io_release
  std::int64_t job = -1;   // the job it is about (-1: none)
  int from = -1;           // sending world rank (set on receipt)
  nlohmann::json body = nlohmann::json::object();
};

// What the scheduler service needs of the ranks: how many there are, their messages to it, and
// a way to each rank's executor. ControlPlane is the real one over MPI; a benchmark drives the
// service with synthetic ranks through the same interface (bench/sched/bench_service_rounds.cpp).
class SchedulerLink {
 public:
  virtual ~SchedulerLink() = default;
  virtual int size() const = 0;
  virtual void send_to_executor(int rank, const Message& message) = 0;
  virtual std::optional<Message> poll_scheduler() = 0;
};

class ControlPlane final : public SchedulerLink {
 public:
  // Collective over the world: every rank constructs it (after MPI is initialised).
  ControlPlane();
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  int rank() const { return rank_; }
  int size() const override { return size_; }

  // Thread-safe (MPI_THREAD_MULTIPLE): job threads report while the executor thread polls.
  void send_to_executor(int rank, const Message& message) override;
  void send_to_scheduler(const Message& message);  // to rank 0

  // The next message waiting for this rank's executor / for the scheduler (rank 0), if any.
  std::optional<Message> poll_executor();
  std::optional<Message> poll_scheduler() override;

  // The parent of the jobs' communicators (another world duplicate). Only the executor thread
  // creates communicators from it, in the order the scheduler's start messages arrive.
  comm::Communicator& job_parent() { return *job_parent_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<comm::Communicator> job_parent_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace recmix::runtime::run
