#include "runtime/train/step_batches.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/error.hpp"

namespace recmix::runtime {

StepBatches::StepBatches(data::Reader& reader, comm::Communicator& comm, bool lookahead,
                         std::function<bool()> stop_requested, std::string job)
    : reader_(reader), comm_(comm), lookahead_(lookahead), stop_requested_(std::move(stop_requested)),
      job_(std::move(job)) {}

bool StepBatches::read(data::Batch& batch) {
  if (ahead_error_) {
    std::exception_ptr e = ahead_error_;
    ahead_error_ = nullptr;
    std::rethrow_exception(e);
  }
  if (have_ahead_) {
    std::swap(batch, ahead_);
    have_ahead_ = false;
    return true;
  }
  return reader_.next(batch);
}

StepBatches::Got StepBatches::next(data::Batch& batch, std::int64_t step, std::int64_t total_steps) {
  bool have_batch = false;
  std::exception_ptr read_error;
  try {
    have_batch = read(batch);
  } catch (const std::exception&) {
    if (!stop_requested_) throw;
    read_error = std::current_exception();
  }
  if (stop_requested_) {  // the status word: stop votes, failed reads
    std::int32_t status[2] = {stop_requested_() ? 1 : 0, read_error ? 1 : 0};
    comm_.all_reduce_sum(status, status, 2, comm::DataType::i32);
    if (read_error) std::rethrow_exception(read_error);
    if (status[1] > 0)
      throw PeerFailedError(fmt::format("job '{}' stops at step {}: {} other rank(s) failed to read the batch", job_,
                                        step + 1, status[1]));
    if (status[0] > 0) return Got::stop;
  }
  if (!have_batch) return Got::epoch_end;  // the next call starts the next epoch
  ready_ = Clock::now();
  after_batch_ = reader_.position();
  next_ = nullptr;
  read_ahead(step, total_steps);
  return Got::batch;
}

void StepBatches::read_ahead(std::int64_t step, std::int64_t total_steps) {
  if (!lookahead_ || step + 1 >= total_steps) return;
  try {
    while (!reader_.next(ahead_)) {  // an epoch's end: the next call starts the next epoch
    }
    have_ahead_ = true;
    next_ = &ahead_;
  } catch (const std::exception&) {  // reported when that batch's turn comes
    ahead_error_ = std::current_exception();
    next_ = &no_batch_;
  }
}

}  // namespace recmix::runtime
