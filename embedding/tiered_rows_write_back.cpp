// TieredRows' write-back: a step's updated staged rows copied back from the device (updated())
// and written to the host tier before their slots are reused, at once (retire()) or by the next
// lookahead thread (defer_retire()); the flush that makes the host tier whole for checkpoints, and
// the reload of the hot slots after a restore. Staging is in tiered_rows_staging.cpp.
#include "embedding/tiered_rows.hpp"

#include <cstring>

#include "embedding/tiered_rows_internal.hpp"

namespace recmix::embedding {

using detail::Clock;
using detail::kAhead;
using detail::since;

// The previous step's staged rows: written back when updated (device path: the copy to the host
// side was posted by updated() on the copy stream; stage() synchronised it), then forgotten.
void TieredRows::retire(device::Stream& stream) {
  if (staged_.empty()) return;
  const std::size_t W = wb_, S = state_per_row_, m = staged_.size();
  if (dirty_) {
    const unsigned char* w = device_weights() + std::size_t(hot_) * W;
    const float* s = state_.data() + std::size_t(hot_) * S;
    if (!on_host_) {
      w = bytes(bounce_w_);
      s = bounce_s_.data();
    }
    scatter_to_host(staged_, w, s);
    stats_.rows_written_back += static_cast<std::int64_t>(m);
    stats_.bytes_to_host += m * (W + S * sizeof(float));
  }
  staged_.clear();
  staged_pass_ = 0;
  dirty_ = false;
}

void TieredRows::scatter_to_host(const std::vector<std::int64_t>& rows, const unsigned char* w, const float* s) {
  const std::size_t W = wb_, S = state_per_row_, m = rows.size();
  for (std::size_t i = 0; i < m; ++i) {
    if (i + kAhead < m) {
      const std::size_t next = std::size_t(rows[i + kAhead]);
      __builtin_prefetch(host_w_.data() + next * W, 1);
      if (S > 0) __builtin_prefetch(host_s_.data() + next * S, 1);
    }
    const std::size_t r = std::size_t(rows[i]);
    std::memcpy(host_w_.data() + r * W, w + i * W, W);
    if (S > 0) std::memcpy(host_s_.data() + r * S, s + i * S, S * sizeof(float));
  }
}

void TieredRows::complete_retire() {
  if (!retire_pending_) return;
  scatter_to_host(retire_rows_, bytes(retire_w_), retire_s_.data());
  retire_pending_ = false;
}

void TieredRows::defer_retire(device::Stream& stream) {
  if (staged_.empty()) return;
  const std::size_t W = wb_, S = state_per_row_, m = staged_.size();
  if (dirty_) {
    if (on_host_) {
      retire_w_.resize(transit_floats(m));
      retire_s_.resize(m * S);
      std::memcpy(bytes(retire_w_), device_weights() + std::size_t(hot_) * W, m * W);
      if (S > 0) std::memcpy(retire_s_.data(), state_.data() + std::size_t(hot_) * S, m * S * sizeof(float));
    } else {  // the copy to the host side that updated() posted has landed (stage() synchronised it)
      retire_w_.swap(bounce_w_);
      retire_s_.swap(bounce_s_);
    }
    retire_rows_ = staged_;
    retire_pending_ = true;
    stats_.rows_written_back += static_cast<std::int64_t>(m);
    stats_.bytes_to_host += m * (W + S * sizeof(float));
  }
  staged_.clear();
  staged_pass_ = 0;
  dirty_ = false;
}

void TieredRows::updated(device::Stream& stream) {
  if (staged_.empty()) return;
  const std::size_t W = wb_, S = state_per_row_, m = staged_.size();
  if (opt_.cold_update == ColdUpdate::host) {  // applied to the host tier: its summed gradients went there
    stats_.bytes_to_host += m * std::size_t(dim_) * sizeof(float);
    return;
  }
  dirty_ = true;
  if (on_host_) return;  // retire() reads the staging slots themselves
  const auto t0 = Clock::now();
  // The staging copy's source, the same size: it does not grow (no reallocation under a copy in
  // flight); the copy stream orders this copy after that one.
  bounce_w_.resize(transit_floats(m));
  bounce_s_.resize(m * S);
  copies_after(stream);
  backend_.copy(bounce_w_.data(), device_weights() + std::size_t(hot_) * W, m * W, *copy_stream_);
  if (S > 0)
    backend_.copy(bounce_s_.data(), state_.data() + std::size_t(hot_) * S, m * S * sizeof(float), *copy_stream_);
  stats_.staging_s += since(t0);
}

void TieredRows::flush(device::Stream& stream) {
  join();
  ahead_ = false;
  if (copy_stream_) copy_stream_->synchronize();  // the staged rows' copy back to the host has landed
  complete_retire();
  retire(stream);
  download_hot(stream);
}

void TieredRows::reload(device::Stream& stream) {
  join();
  ahead_ = false;
  retire_pending_ = false;  // the host tier was just written whole
  staged_.clear();
  staged_pass_ = 0;
  dirty_ = false;
  upload_hot(stream);
  stream.synchronize();
}

}  // namespace recmix::embedding
