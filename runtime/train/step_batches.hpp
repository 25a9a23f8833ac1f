#pragma once
// The batches of Trainer::train's steps: the reader's next batch, the batch after it where tiered
// tables look one batch ahead (DlrmModel::train_step_async's `next`), and the ranks' status word
// before each step when the run has a stop hook (TrainOptions::stop_requested).
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include "comm/communicator.hpp"
#include "data/reader.hpp"

namespace recmix::runtime {

class StepBatches {
 public:
  using Clock = std::chrono::steady_clock;
  // stop_requested: TrainOptions::stop_requested (empty: no status word; a failed read throws).
  StepBatches(data::Reader& reader, comm::Communicator& comm, bool lookahead, std::function<bool()> stop_requested,
              std::string job);

  enum class Got { batch, epoch_end, stop };
  // The batch of the step after `step` steps, into `batch`. epoch_end: the reader's epoch ended
  // (call again for the next one's first batch); stop: every rank stops here (a rank voted to).
  // A rank whose read failed throws its error, and with a stop hook its peers a PeerFailedError.
  Got next(data::Batch& batch, std::int64_t step, std::int64_t total_steps);

  // After next() returned a batch: the batch after it for the look-ahead (null: no look-ahead;
  // an empty batch when its read failed, which is thrown when its turn comes), the reader's
  // position right after the batch (what a checkpoint of this step saves), and when the batch
  // was ready (before the look-ahead read).
  const data::Batch* ahead() const { return next_; }
  const data::ReaderPosition& after_batch() const { return after_batch_; }
  Clock::time_point ready() const { return ready_; }

 private:
  bool read(data::Batch& batch);                 // the batch itself: the look-ahead's, or the reader's
  void read_ahead(std::int64_t step, std::int64_t total_steps);

  data::Reader& reader_;
  comm::Communicator& comm_;
  const bool lookahead_;
  std::function<bool()> stop_requested_;
  std::string job_;
  data::Batch ahead_, no_batch_;
  bool have_ahead_ = false;
  std::exception_ptr ahead_error_;
  const data::Batch* next_ = nullptr;
  data::ReaderPosition after_batch_;
  Clock::time_point ready_;
};

}  // namespace recmix::runtime
