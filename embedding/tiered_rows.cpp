// TieredRows: the tiers themselves and the slot map. The host tier (every owned row) and the
// device tier (hot slots, then staging slots) made and filled; which local row sits in which hot
// slot, and which staging slot each of a step's cold rows takes (map_lookups); the hot set ranked
// by access counts, and ranked again (re-ranks). Staging a step's cold rows and the lookahead are
// in tiered_rows_staging.cpp, writing them back and flushes in tiered_rows_write_back.cpp.
#include "embedding/tiered_rows.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/huge_pages.hpp"
#include "embedding/tiered_rows_internal.hpp"

namespace recmix::embedding {

using detail::kAhead;

void TierStats::add(const TierStats& o) {
  steps += o.steps;
  lookups += o.lookups;
  hot_hits += o.hot_hits;
  rows_staged += o.rows_staged;
  rows_written_back += o.rows_written_back;
  rows_promoted += o.rows_promoted;
  rows_demoted += o.rows_demoted;
  reranks += o.reranks;
  rows_ahead += o.rows_ahead;
  rows_restaged += o.rows_restaged;
  bytes_to_device += o.bytes_to_device;
  bytes_to_host += o.bytes_to_host;
  staging_s += o.staging_s;
  lookahead_wait_s += o.lookahead_wait_s;
}

std::int64_t staging_rows_needed(const std::vector<std::int64_t>& cold_rows, std::int64_t global_batch,
                                 std::int64_t bag_rows) {
  std::int64_t n = 0;
  for (auto cold : cold_rows) n += std::min(cold, global_batch * bag_rows);
  return n;
}

TieredRows::TieredRows(device::Backend& backend, device::MemoryPool& pool, std::vector<TierShard> shards, int dim,
                       std::size_t state_per_row, TierOptions options, int rank, bool on_host, TierWeights weights,
                       device::Buffer<float>& state)
    : backend_(backend), pool_(pool), shards_(std::move(shards)), dim_(dim),
      wb_(std::size_t(dim) * weights.element_bytes()), state_per_row_(state_per_row), opt_(std::move(options)),
      rank_(rank), on_host_(on_host), weights_(weights), state_(state) {
  RECMIX_REQUIRE(opt_.host_pool, Error, "tiered embedding: no host-tier pool");
  RECMIX_REQUIRE(opt_.global_batch > 0 && opt_.bag_rows > 0, ConfigError,
                 "tiered embedding: the global batch and the indices per bag size the staging slots (both > 0)");
  for (const auto& s : shards_) local_rows_ += s.row_end - s.row_begin;
  host_w_ = device::Buffer<unsigned char>(*opt_.host_pool, std::size_t(local_rows_) * wb_,
                                          fmt::format("embedding host tier, weights (rank {})", rank_));
  if (state_per_row_ > 0)
    host_s_ = device::Buffer<float>(*opt_.host_pool, std::size_t(local_rows_) * state_per_row_,
                                    fmt::format("embedding host tier, optimizer state (rank {})", rank_));
  // The host tier and the per-row maps are read at random rows (before the init functors and
  // the fills first touch them).
  advise_huge_pages(host_w_.data(), host_w_.bytes());
  advise_huge_pages(host_s_.data(), host_s_.bytes());
  assign_huge<std::int64_t>(slot_of_, std::size_t(local_rows_), -1);
  // Counted only where the hot set is ranked again.
  if (opt_.rerank_interval > 0) assign_huge<std::int64_t>(counted_, std::size_t(local_rows_), 0);
  assign_huge<std::uint64_t>(tag_, std::size_t(local_rows_), 0);
  if (!on_host_) {  // rows in transit in pinned host memory, copied on a stream of their own
    device::MemoryPool* pinned = opt_.host_pool;
    bounce_w_ = TransitRows(pinned, fmt::format("embedding staged rows in transit, weights (rank {})", rank_));
    bounce_s_ = TransitRows(pinned, fmt::format("embedding staged rows in transit, optimizer state (rank {})", rank_));
    ahead_w_ = TransitRows(pinned, fmt::format("embedding rows gathered ahead, weights (rank {})", rank_));
    ahead_s_ = TransitRows(pinned, fmt::format("embedding rows gathered ahead, optimizer state (rank {})", rank_));
    retire_w_ = TransitRows(pinned, fmt::format("embedding rows to write back, weights (rank {})", rank_));
    retire_s_ = TransitRows(pinned, fmt::format("embedding rows to write back, optimizer state (rank {})", rank_));
    copy_stream_ = backend_.create_stream();
    compute_point_ = backend_.create_event();
    staged_copy_ = backend_.create_event();
  }
}

void TransitRows::resize(std::size_t floats) {
  if (!pinned_pool_) {
    plain_.resize(floats);
  } else if (floats > pinned_.size()) {
    // The first size is the one asked for (the staging slots', as the memory estimator counts
    // it); a later growth takes a quarter more, so that a slightly larger batch does not
    // allocate again.
    const std::size_t size = pinned_.size() == 0 ? floats : floats + floats / 4;
    pinned_ = {};  // the old one first: the two never coexist
    pinned_ = device::Buffer<float>(*pinned_pool_, size, what_);
  }
}

void TransitRows::swap(TransitRows& o) noexcept {
  std::swap(pinned_pool_, o.pinned_pool_);
  std::swap(what_, o.what_);
  plain_.swap(o.plain_);
  std::swap(pinned_, o.pinned_);
}

std::uint64_t TieredRows::next_pass() {
  if (pass_ == kIndexMask) {  // 2^32 - 1 passes: the tags start again from zero
    std::fill(tag_.begin(), tag_.end(), 0);
    pass_ = 0;
  }
  return ++pass_ << 32;
}

TieredRows::~TieredRows() {
  join();
  if (copy_stream_) copy_stream_->synchronize();  // nothing in flight from or to the buffers freed next
}

std::int64_t TieredRows::map_lookups(const std::int64_t* in, std::int64_t* slots, std::int64_t n, std::uint64_t pass,
                                     std::uint64_t previous, std::vector<std::int64_t>& cold) {
  cold.clear();
  std::int64_t hits = 0;
  const std::int64_t* slot_of = slot_of_.data();
  std::uint64_t* tag = tag_.data();
  std::int64_t* counted = counted_.empty() ? nullptr : counted_.data();
  for (std::int64_t e = 0; e < n; ++e) {
    if (e + kAhead < n) {  // in[e + kAhead] is still a local row where slots is in
      const std::int64_t next = in[e + kAhead];
      __builtin_prefetch(slot_of + next);
      __builtin_prefetch(tag + next, 1);
      if (counted) __builtin_prefetch(counted + next, 1);
    }
    const std::int64_t r = in[e];
    if (counted) ++counted[r];
    const std::int64_t s = slot_of[r];
    if (s >= 0) {
      slots[e] = s;
      ++hits;
      continue;
    }
    const std::uint64_t t = tag[r];
    if ((t & kPassMask) == pass) {
      slots[e] = hot_ + static_cast<std::int64_t>(t & kIndexMask);
      continue;
    }
    if (previous != 0 && (t & kPassMask) == previous) {  // staged by the step before too: the overlap
      overlap_.push_back(cold.size());
      overlap_from_.push_back(std::size_t(t & kIndexMask));
    }
    tag[r] = pass | cold.size();
    slots[e] = hot_ + static_cast<std::int64_t>(cold.size());
    cold.push_back(r);
  }
  return hits;
}

std::vector<std::int64_t> TieredRows::shard_counts(std::size_t k) const {
  const TierShard& s = shards_[k];
  const std::int64_t rows = s.row_end - s.row_begin;
  std::vector<std::int64_t> c(std::size_t(rows), 0);
  if (!counted_.empty()) std::copy(counted_.begin() + s.base, counted_.begin() + s.base + rows, c.begin());
  if (opt_.hot_set == HotSet::counts && std::size_t(s.table) < opt_.table_counts.size()) {
    const auto& t = opt_.table_counts[std::size_t(s.table)];
    if (!t.empty())
      for (std::int64_t r = 0; r < rows; ++r) c[std::size_t(r)] += t[std::size_t(s.row_begin + r)];
  }
  return c;
}

void TieredRows::place_hot_rows() {
  const std::size_t row_bytes = wb_ + state_per_row_ * sizeof(float);
  std::vector<std::int64_t> rows(shards_.size()), hot(shards_.size());
  std::vector<std::vector<std::int64_t>> counts(shards_.size());
  for (std::size_t k = 0; k < shards_.size(); ++k) {
    rows[k] = shards_[k].row_end - shards_[k].row_begin;
    counts[k] = shard_counts(k);
  }
  if (opt_.device_budget > 0) {
    // Staging is reserved as if every row were cold, so the budget holds whatever the split.
    const std::int64_t staging = staging_rows_needed(rows, opt_.global_batch, opt_.bag_rows);
    const std::uint64_t staging_bytes = std::uint64_t(staging) * row_bytes;
    if (opt_.device_budget < staging_bytes)
      throw ConfigError(fmt::format(
          "'embedding.device_budget' = {} is below the {} the staging slots of rank {} need ({} rows of {} bytes: "
          "the global batch of {} looks up to that many cold rows of its {} shard(s) in one step)",
          device::format_bytes(opt_.device_budget), device::format_bytes(staging_bytes), rank_, staging, row_bytes,
          opt_.global_batch, shards_.size()));
    hot = hot_rows_per_shard(std::int64_t((opt_.device_budget - staging_bytes) / row_bytes), rows, counts);
  } else {
    for (std::size_t k = 0; k < shards_.size(); ++k) hot[k] = hot_rows_for_fraction(rows[k], opt_.hot_fraction);
  }
  tiers_.clear();
  hot_row_of_slot_.clear();
  std::vector<std::int64_t> cold(shards_.size());
  for (std::size_t k = 0; k < shards_.size(); ++k) {
    tiers_.push_back(ShardTiers::by_counts(rows[k], counts[k], hot[k]));
    for (std::int64_t r : tiers_.back().hot_rows()) {
      slot_of_[std::size_t(shards_[k].base + r)] = static_cast<std::int64_t>(hot_row_of_slot_.size());
      hot_row_of_slot_.push_back(shards_[k].base + r);
    }
    cold[k] = rows[k] - hot[k];
  }
  hot_ = static_cast<std::int64_t>(hot_row_of_slot_.size());
  auto stream = backend_.create_stream();
  allocate_device(staging_rows_needed(cold, opt_.global_batch, opt_.bag_rows), *stream);
  if (!on_host_) {  // sized for every staging slot here, so that the lookahead's thread rarely allocates
    for (TransitRows* t : {&bounce_w_, &ahead_w_, &retire_w_}) t->resize(transit_floats(std::size_t(staging_)));
    for (TransitRows* t : {&bounce_s_, &ahead_s_, &retire_s_}) t->resize(std::size_t(staging_) * state_per_row_);
  }
  upload_hot(*stream);
  stream->synchronize();
}

// The device tier for `staging` staging slots. The hot slots' values come from the host tier,
// so a re-allocation first writes them there (the old and new buffers never coexist).
void TieredRows::allocate_device(std::int64_t staging, device::Stream& stream) {
  if (!weights_.empty()) download_hot(stream);
  state_ = {};
  dev_slot_row_ = {};
  staging_ = staging;
  const std::size_t n = std::size_t(hot_ + staging_);
  weights_.allocate(pool_, std::max<std::size_t>(n, 1) * dim_,
                    fmt::format("embedding weights{}, {} hot rows and {} staging slots (rank {})",
                                weights_.half ? " (16-bit)" : "", hot_, staging_, rank_));
  if (state_per_row_ > 0)
    state_ = device::Buffer<float>(pool_, std::max<std::size_t>(n, 1) * state_per_row_,
                                   fmt::format("embedding optimizer state, {} hot rows and {} staging slots (rank {})",
                                               hot_, staging_, rank_));
  if (on_host_) {
    advise_huge_pages(device_weights(), std::max<std::size_t>(n, 1) * wb_);
    advise_huge_pages(state_.data(), state_.bytes());
  }
  // 16-bit tables: the slots' local rows, the hot ones now, the staged ones as each step stages them.
  if (weights_.half) {
    slot_row_.assign(std::max<std::size_t>(n, 1), 0);
    if (!on_host_)
      dev_slot_row_ = device::Buffer<std::int64_t>(pool_, std::max<std::size_t>(n, 1),
                                                   fmt::format("embedding local row of each slot (rank {})", rank_));
    set_slot_rows(stream, 0, hot_);
  }
}

void TieredRows::set_slot_rows(device::Stream& stream, std::int64_t from, std::int64_t to) {
  if (!weights_.half) return;  // only the 16-bit tables' rounding asks
  for (std::int64_t slot = from; slot < to; ++slot)
    slot_row_[std::size_t(slot)] = slot < hot_ ? hot_row_of_slot_[std::size_t(slot)] : staged_[std::size_t(slot - hot_)];
  if (!on_host_ && to > from)
    backend_.copy(dev_slot_row_.data() + from, slot_row_.data() + from, std::size_t(to - from) * sizeof(std::int64_t),
                  stream);
}

void TieredRows::download_hot(device::Stream& stream) {
  if (hot_ == 0) return;
  const std::size_t W = wb_, S = state_per_row_;
  const unsigned char* w = device_weights();
  const float* s = state_.data();
  if (!on_host_) {  // rare and large (re-ranks, checkpoints, growth): pageable memory, synchronous
    hot_w_.resize(std::size_t(hot_) * W);
    backend_.copy(hot_w_.data(), device_weights(), hot_w_.size(), stream);
    if (S > 0) {
      hot_s_.resize(std::size_t(hot_) * S);
      backend_.copy(hot_s_.data(), state_.data(), hot_s_.size() * sizeof(float), stream);
    }
    stream.synchronize();
    w = hot_w_.data();
    s = hot_s_.data();
  }
  for (std::int64_t slot = 0; slot < hot_; ++slot) {
    const std::size_t r = std::size_t(hot_row_of_slot_[std::size_t(slot)]);
    std::memcpy(host_w_.data() + r * W, w + std::size_t(slot) * W, W);
    if (S > 0) std::memcpy(host_s_.data() + r * S, s + std::size_t(slot) * S, S * sizeof(float));
  }
}

void TieredRows::upload_hot(device::Stream& stream) {
  if (hot_ == 0) return;
  const std::size_t W = wb_, S = state_per_row_;
  unsigned char* w = device_weights();
  float* s = state_.data();
  if (!on_host_) {
    hot_w_.resize(std::size_t(hot_) * W);
    hot_s_.resize(std::size_t(hot_) * S);
    w = hot_w_.data();
    s = hot_s_.data();
  }
  for (std::int64_t slot = 0; slot < hot_; ++slot) {
    const std::size_t r = std::size_t(hot_row_of_slot_[std::size_t(slot)]);
    std::memcpy(w + std::size_t(slot) * W, host_w_.data() + r * W, W);
    if (S > 0) std::memcpy(s + std::size_t(slot) * S, host_s_.data() + r * S, S * sizeof(float));
  }
  if (!on_host_) {
    backend_.copy(device_weights(), hot_w_.data(), hot_w_.size(), stream);
    if (S > 0) backend_.copy(state_.data(), hot_s_.data(), hot_s_.size() * sizeof(float), stream);
  }
}

// Ranks the rows again by their counts (the dataset's plus those counted here, or only those for
// lfu), keeping each shard's hot row count: rows turning cold go to the host tier with their
// state, rows turning hot take the slots they free. The host path moves just those rows; the
// device path moves the hot slots whole (one copy each way).
void TieredRows::rerank(device::Stream& stream) {
  const std::size_t W = wb_, S = state_per_row_;
  if (!on_host_) download_hot(stream);
  std::vector<std::int64_t> freed;
  for (std::size_t k = 0; k < shards_.size(); ++k) {
    const TierShard& sh = shards_[k];
    const auto counts = shard_counts(k);
    ShardTiers next = ShardTiers::by_counts(sh.row_end - sh.row_begin, counts, tiers_[k].hot_count());
    const TierMoves moves = tier_moves(tiers_[k], next);
    freed.clear();
    for (std::int64_t r : moves.to_host) {
      const std::size_t row = std::size_t(sh.base + r);
      const std::int64_t slot = slot_of_[row];
      if (on_host_) {
        std::memcpy(host_w_.data() + row * W, device_weights() + std::size_t(slot) * W, W);
        if (S > 0) std::memcpy(host_s_.data() + row * S, state_.data() + std::size_t(slot) * S, S * sizeof(float));
      }
      slot_of_[row] = -1;
      freed.push_back(slot);
    }
    for (std::size_t i = 0; i < moves.to_device.size(); ++i) {
      const std::size_t row = std::size_t(sh.base + moves.to_device[i]);
      const std::int64_t slot = freed[i];
      if (on_host_) {
        std::memcpy(device_weights() + std::size_t(slot) * W, host_w_.data() + row * W, W);
        if (S > 0) std::memcpy(state_.data() + std::size_t(slot) * S, host_s_.data() + row * S, S * sizeof(float));
      }
      slot_of_[row] = slot;
      hot_row_of_slot_[std::size_t(slot)] = static_cast<std::int64_t>(row);
    }
    stats_.rows_promoted += static_cast<std::int64_t>(moves.to_device.size());
    stats_.rows_demoted += static_cast<std::int64_t>(moves.to_host.size());
    stats_.bytes_to_device += moves.to_device.size() * (W + S * sizeof(float));
    stats_.bytes_to_host += moves.to_host.size() * (W + S * sizeof(float));
    tiers_[k] = std::move(next);
  }
  if (!on_host_) upload_hot(stream);
  set_slot_rows(stream, 0, hot_);
  ++stats_.reranks;
}

TierStats TieredRows::take_stats() {
  TierStats s = stats_;
  stats_ = {};
  return s;
}

}  // namespace recmix::embedding
