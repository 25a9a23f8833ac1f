// The reader's sample order (a block shuffle, then a shuffle within windows of blocks) and the
// shuffled reads of independent I/O, which serve each batch from whole blocks kept in a cache.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <utility>
#include <vector>

#include "core/random.hpp"
#include "data/reader_impl.hpp"

namespace recmix::data {

// --- sample order ---

// The order of the full blocks for `epoch`; a last, shorter block always stays at the end, so
// that windows that are multiples of the block size hold whole blocks.
void Reader::Impl::ensure_block_perm(std::int64_t epoch) const {
  if (perm_epoch == epoch) return;
  const std::int64_t nb = info.rows / block;
  block_perm.resize(static_cast<std::size_t>(nb));
  std::iota(block_perm.begin(), block_perm.end(), 0);
  random::CounterRng rng(opt.seed, random::hash(0xB10C, static_cast<std::uint64_t>(epoch), 0));
  for (std::int64_t i = nb - 1; i > 0; --i)
    std::swap(block_perm[i], block_perm[rng.next_below(static_cast<std::uint64_t>(i + 1))]);
  perm_epoch = epoch;
}

const std::vector<std::uint32_t>& Reader::Impl::window_perm(std::int64_t epoch, std::int64_t w) const {
  for (const WindowPerm& c : window_cache)
    if (c.epoch == epoch && c.window == w) return c.perm;
  WindowPerm& c = window_cache[window_next];
  window_next ^= 1;
  const std::int64_t base = w * window;
  const std::int64_t len = std::min(window, info.rows - base);
  c.perm.resize(static_cast<std::size_t>(len));
  std::iota(c.perm.begin(), c.perm.end(), 0u);
  random::CounterRng rng(opt.seed, random::hash(0x3D0, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(w)));
  for (std::int64_t i = len - 1; i > 0; --i)
    std::swap(c.perm[i], c.perm[rng.next_below(static_cast<std::uint64_t>(i + 1))]);
  c.epoch = epoch;
  c.window = w;
  return c.perm;
}

// Position p of the epoch's order -> dataset row. Caller holds shuffle_mutex.
std::int64_t Reader::Impl::row_locked(std::int64_t epoch, std::int64_t p) const {
  if (!opt.shuffle) return p;
  const std::int64_t w = p / window;
  const std::int64_t q = w * window + window_perm(epoch, w)[static_cast<std::size_t>(p - w * window)];
  ensure_block_perm(epoch);
  const std::int64_t slot = q / block;
  if (slot >= static_cast<std::int64_t>(block_perm.size())) return q;  // the short last block
  return block_perm[static_cast<std::size_t>(slot)] * block + q % block;
}

std::int64_t Reader::Impl::sample_row(std::int64_t epoch, std::int64_t p) const {
  std::lock_guard<std::mutex> lock(shuffle_mutex);
  return row_locked(epoch, p);
}

// --- shuffled reads (independent I/O): whole blocks of rows, cached while the window lasts ---

const Batch& Reader::Impl::load_block(std::int64_t id) {
  for (CachedBlock& b : block_cache)
    if (b.id == id) {
      b.used = ++block_clock;
      return b.rows;
    }
  const std::size_t capacity = static_cast<std::size_t>(window / block) + 2;
  CachedBlock* slot = nullptr;
  if (block_cache.size() < capacity) {
    slot = &block_cache.emplace_back();
  } else {
    slot = &*std::min_element(block_cache.begin(), block_cache.end(),
                              [](const CachedBlock& a, const CachedBlock& b) { return a.used < b.used; });
  }
  slot->id = -1;  // invalid until read completely
  const std::int64_t first = id * block, count = std::min(block, info.rows - first);
  std::vector<std::pair<std::int64_t, std::int64_t>> rows(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) rows[i] = {first + i, i};
  read_rows(rows, true, {}, slot->rows);
  if (!info.multi_hot) {
    const int T = info.num_tables();
    slot->row_major.resize(static_cast<std::size_t>(count * T));
    for (int t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < count; ++i) slot->row_major[i * T + t] = slot->rows.indices[t][i];
  }
  slot->id = id;
  slot->used = ++block_clock;
  return slot->rows;
}

void Reader::Impl::gather_from_blocks(const std::vector<std::pair<std::int64_t, std::int64_t>>& rows, Batch& out) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const int D = info.num_dense, T = info.num_tables();
  shape_batch(out, n);
  if (!info.multi_hot) {
    for (int t = 0; t < T; ++t) out.indices[t].resize(static_cast<std::size_t>(n));
    one_hot_offsets(out, n);
  } else {
    for (int t = 0; t < T; ++t) {
      out.offsets[t].resize(static_cast<std::size_t>(n + 1));
      out.offsets[t][0] = 0;
      out.indices[t].clear();
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = rows[i].first;
    const std::int64_t id = row / block;
    if (cached == nullptr || cached->id != id) {
      load_block(id);
      for (CachedBlock& c : block_cache)
        if (c.id == id) cached = &c;
    }
    const Batch& b = cached->rows;
    const std::int64_t k = row - id * block;
    const float* src = b.dense.data() + k * D;
    float* to = out.dense.data() + i * D;
    for (int d = 0; d < D; ++d) to[d] = src[d];
    out.labels[i] = b.labels[k];
    if (!info.multi_hot) {
      const std::int64_t* idx = cached->row_major.data() + k * T;
      for (int t = 0; t < T; ++t) out.indices[t][i] = idx[t];
      continue;
    }
    for (int t = 0; t < T; ++t) {
      const auto* begin = b.indices[t].data() + b.offsets[t][k];
      out.indices[t].insert(out.indices[t].end(), begin, b.indices[t].data() + b.offsets[t][k + 1]);
      out.offsets[t][i + 1] = static_cast<std::int64_t>(out.indices[t].size());
    }
  }
  cached = nullptr;  // the cache may be reorganised before the next batch
}

}  // namespace recmix::data
