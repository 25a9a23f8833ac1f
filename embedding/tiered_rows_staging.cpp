// TieredRows' staging: a step's cold rows copied from the host tier into the staging slots and its
// lookups remapped to slots (stage()), and the lookahead that maps and gathers the next step's
// cold rows on a background thread while this step computes (prefetch()). The slot map is in
// tiered_rows.cpp, writing the staged rows back in tiered_rows_write_back.cpp.
#include "embedding/tiered_rows.hpp"

#include <algorithm>
#include <cstring>

#include "embedding/tiered_rows_internal.hpp"

namespace recmix::embedding {

using detail::Clock;
using detail::kAhead;
using detail::since;

void TieredRows::copies_after(device::Stream& stream) {
  compute_point_->record(stream);
  compute_point_->wait(*copy_stream_);
}

void TieredRows::prefetch(const std::int64_t* rows, std::int64_t n) {
  join();
  ahead_ = false;
  if (rerank_due(step_ + 1)) return;
  ahead_in_.assign(rows, rows + n);
  ahead_ = true;
  const bool retire = retire_pending_;  // the thread writes them back first, then reads
  retire_pending_ = false;
  // This step's staged rows carry the tag of pass staged_pass_; the thread's rows get the next.
  const std::uint64_t previous = staged_pass_;
  ahead_pass_ = next_pass();
  worker_ = std::thread([this, retire, previous, pass = ahead_pass_] {
    if (retire) scatter_to_host(retire_rows_, bytes(retire_w_), retire_s_.data());
    const std::int64_t n = static_cast<std::int64_t>(ahead_in_.size());
    ahead_slots_.resize(std::size_t(n));
    overlap_.clear();
    overlap_from_.clear();
    ahead_hits_ = map_lookups(ahead_in_.data(), ahead_slots_.data(), n, pass, previous, ahead_rows_);
    const std::size_t W = wb_, S = state_per_row_, m = ahead_rows_.size();
    ahead_w_.resize(transit_floats(m));
    ahead_s_.resize(m * S);
    unsigned char* aw = bytes(ahead_w_);
    for (std::size_t i = 0; i < m; ++i) {
      if (i + kAhead < m) {
        const std::size_t next = std::size_t(ahead_rows_[i + kAhead]);
        __builtin_prefetch(host_w_.data() + next * W);
        if (S > 0) __builtin_prefetch(host_s_.data() + next * S);
      }
      const std::size_t r = std::size_t(ahead_rows_[i]);
      std::memcpy(aw + i * W, host_w_.data() + r * W, W);
      if (S > 0) std::memcpy(ahead_s_.data() + i * S, host_s_.data() + r * S, S * sizeof(float));
    }
  });
}

void TieredRows::stage(device::Stream& stream, std::int64_t* rows, std::int64_t n) {
  const auto t0 = Clock::now();
  join();
  stats_.lookahead_wait_s += since(t0);
  // Device path: the previous step's copies have finished (its staged rows are back in host
  // memory, and the buffers they came from may be written).
  if (copy_stream_) copy_stream_->synchronize();
  bool ahead = ahead_ && n == static_cast<std::int64_t>(ahead_in_.size()) &&
               std::equal(rows, rows + n, ahead_in_.begin()) && !rerank_due(step_ + 1);
  ahead_ = false;
  if (ahead) {
    // The rows the previous step staged too (the thread listed them: it read them before their
    // update) are re-staged below; the previous step's updated rows are copied aside here (and
    // written back by the next lookahead thread).
    complete_retire();
    defer_retire(stream);
  } else {
    complete_retire();
    retire(stream);
  }
  ++step_;
  if (rerank_due(step_)) rerank(stream);
  ++stats_.steps;
  stats_.lookups += n;
  if (ahead) {
    std::copy(ahead_slots_.begin(), ahead_slots_.end(), rows);
    staged_.swap(ahead_rows_);
    staged_pass_ = ahead_pass_;
    stats_.hot_hits += ahead_hits_;
  } else {  // as the thread maps them, here
    const std::uint64_t pass = next_pass();
    stats_.hot_hits += map_lookups(rows, rows, n, pass, 0, staged_);
    staged_pass_ = pass;
  }
  const std::size_t W = wb_, S = state_per_row_, m = staged_.size();
  if (static_cast<std::int64_t>(m) > staging_) {  // more cold rows than slots (long multi-hot bags): grow
    allocate_device(std::min(local_rows_ - hot_, std::max<std::int64_t>(std::int64_t(m), 2 * staging_)), stream);
    upload_hot(stream);
  }
  set_slot_rows(stream, hot_, hot_ + std::int64_t(m));
  unsigned char* w = device_weights() + std::size_t(hot_) * W;
  float* s = state_.data() + std::size_t(hot_) * S;
  if (ahead) {  // gathered ahead: the overlap again, then into the slots
    for (std::size_t k = 0; k < overlap_.size(); ++k) {
      // From the copies set aside (cold updates in staging), else from the host tier (cold
      // updates there, or no update).
      const std::size_t i = overlap_[k], a = overlap_from_[k], r = std::size_t(staged_[i]);
      const unsigned char* w_src = retire_pending_ ? bytes(retire_w_) + a * W : host_w_.data() + r * W;
      const float* s_src = retire_pending_ ? retire_s_.data() + a * S : host_s_.data() + r * S;
      std::memcpy(bytes(ahead_w_) + i * W, w_src, W);
      if (S > 0) std::memcpy(ahead_s_.data() + i * S, s_src, S * sizeof(float));
    }
    stats_.rows_restaged += static_cast<std::int64_t>(overlap_.size());
    stats_.rows_ahead += static_cast<std::int64_t>(m);
    if (on_host_) {
      if (m > 0) {  // no rows: the buffers may be empty, and memcpy's pointers must not be null
        std::memcpy(w, bytes(ahead_w_), m * W);
        if (S > 0) std::memcpy(s, ahead_s_.data(), m * S * sizeof(float));
      }
    } else {
      ahead_w_.swap(bounce_w_);
      ahead_s_.swap(bounce_s_);
    }
  } else {
    if (!on_host_) {
      bounce_w_.resize(transit_floats(m));
      bounce_s_.resize(m * S);
      w = bytes(bounce_w_);
      s = bounce_s_.data();
    }
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t r = std::size_t(staged_[i]);
      std::memcpy(w + i * W, host_w_.data() + r * W, W);
      if (S > 0) std::memcpy(s + i * S, host_s_.data() + r * S, S * sizeof(float));
    }
  }
  if (!on_host_ && m > 0) {  // on the copy stream after every earlier use of the slots; the step waits for it
    copies_after(stream);
    backend_.copy(device_weights() + std::size_t(hot_) * W, bounce_w_.data(), m * W, *copy_stream_);
    if (S > 0)
      backend_.copy(state_.data() + std::size_t(hot_) * S, bounce_s_.data(), m * S * sizeof(float), *copy_stream_);
    staged_copy_->record(*copy_stream_);
    staged_copy_->wait(stream);
  }
  stats_.rows_staged += static_cast<std::int64_t>(m);
  stats_.bytes_to_device += m * (W + S * sizeof(float));
  stats_.staging_s += since(t0);
}

}  // namespace recmix::embedding
