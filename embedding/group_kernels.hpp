#pragma once
// Grouping the sparse update's entries by row on the device, as host/device functors: a stable
// LSD radix sort of (row, entry) pairs (here, or on CUDA CUB's), then one group per distinct row.
// The sort's functors but the scan run one thread per block of consecutive items, each block
// walked in order, so the result is the same for any thread count or launch shape, and a stable
// sort has one result whoever runs it: entries of a row stay in CSR order (the order of the global
// batch), and UpdateRows sums them in that order, as the host grouping does.
// Driven by DeviceGrouping (device_grouping.hpp).
#include <cstdint>

#include "device/types.hpp"

namespace recmix::embedding::kernels {

inline constexpr int kRadixBits = 8;
inline constexpr int kRadixSize = 1 << kRadixBits;

// First item of block b when n items are split into `blocks` nearly equal blocks.
RECMIX_HOST_DEVICE inline std::int64_t block_begin(std::int64_t n, std::int64_t blocks, std::int64_t b) {
  return n * b / blocks;
}

// A one-hot batch as the owner CSR on the device (one rank, whole tables): bag j = b * tables + t
// holds the one row base[t] + indices[j], so offsets[j] = j. Run over n + 1 items (the last writes
// offsets[n]). The host checked the indices before they went up.
struct OneHotCsr {
  const std::int32_t* indices;  // [batch x tables], row-major, as read
  const std::int64_t* base;     // per table: its first row in the weights
  int tables;
  std::int64_t n;  // batch x tables
  std::int64_t* offsets;
  std::int64_t* rows;
  RECMIX_HOST_DEVICE void operator()(std::int64_t j) const {
    offsets[j] = j;
    if (j < n) rows[j] = base[j % tables] + indices[j];
  }
};

// bag[k] = j for every entry k of bag j of a CSR.
struct BagOfEntry {
  const std::int64_t* offsets;
  std::int64_t* bag;
  RECMIX_HOST_DEVICE void operator()(std::int64_t j) const {
    for (std::int64_t k = offsets[j]; k < offsets[j + 1]; ++k) bag[k] = j;
  }
};

// keys[i] = rows[i], vals[i] = i: the pairs to sort.
struct InitSort {
  const std::int64_t* rows;
  std::int64_t* keys;
  std::int64_t* vals;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const {
    keys[i] = rows[i];
    vals[i] = i;
  }
};

// counts[b * kRadixSize + d]: keys of block b whose digit at `shift` is d.
struct RadixHistogram {
  const std::int64_t* keys;
  std::int64_t n, blocks;
  int shift;
  std::int64_t* counts;
  RECMIX_HOST_DEVICE void operator()(std::int64_t b) const {
    std::int64_t* c = counts + b * kRadixSize;
    for (int d = 0; d < kRadixSize; ++d) c[d] = 0;
    for (std::int64_t i = block_begin(n, blocks, b); i < block_begin(n, blocks, b + 1); ++i)
      ++c[(keys[i] >> shift) & (kRadixSize - 1)];
  }
};

// One thread (launched over 1 item): counts become each (block, digit)'s first output position,
// digits in order, blocks in order within a digit (what makes the sort stable).
struct RadixOffsets {
  std::int64_t* counts;
  std::int64_t blocks;
  RECMIX_HOST_DEVICE void operator()(std::int64_t) const {
    std::int64_t sum = 0;
    for (int d = 0; d < kRadixSize; ++d)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t c = counts[b * kRadixSize + d];
        counts[b * kRadixSize + d] = sum;
        sum += c;
      }
  }
};

// Block b moves its pairs, in order, to the positions RadixOffsets gave it.
struct RadixScatter {
  const std::int64_t* keys_in;
  const std::int64_t* vals_in;
  std::int64_t* keys_out;
  std::int64_t* vals_out;
  std::int64_t n, blocks;
  int shift;
  std::int64_t* offsets;
  RECMIX_HOST_DEVICE void operator()(std::int64_t b) const {
    std::int64_t* at = offsets + b * kRadixSize;
    for (std::int64_t i = block_begin(n, blocks, b); i < block_begin(n, blocks, b + 1); ++i) {
      const std::int64_t pos = at[(keys_in[i] >> shift) & (kRadixSize - 1)]++;
      keys_out[pos] = keys_in[i];
      vals_out[pos] = vals_in[i];
    }
  }
};

// Groups of the sorted entries, one thread per entry: GroupHeads marks the entries that start a
// group (differ from the key before them); an exclusive prefix sum of the marks (ExclusiveSum, or
// on CUDA CUB's) gives each its group; GroupScatter writes the update's inputs (UpdateRows): the
// unique rows, each group's first entry, and per entry the gradient vector it takes (its bag) and,
// when bag_scale is set, that bag's scale, and at the last entry the number of groups and the end
// offset (GroupTotal, launched by itself only for no entries).
struct GroupHeads {
  const std::int64_t* keys;
  std::int64_t* head;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const { head[i] = i == 0 || keys[i] != keys[i - 1]; }
};

// One thread (launched over 1 item): out[i] = head[0] + ... + head[i - 1].
struct ExclusiveSum {
  const std::int64_t* head;
  std::int64_t* out;
  std::int64_t n;
  RECMIX_HOST_DEVICE void operator()(std::int64_t) const {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = sum;
      sum += head[i];
    }
  }
};

// One thread: groups[0] the number of groups, and the group offsets end at n.
struct GroupTotal {
  const std::int64_t* head;
  const std::int64_t* group;
  std::int64_t n;
  std::int64_t* groups;
  std::int64_t* entry_offsets;
  RECMIX_HOST_DEVICE void operator()(std::int64_t) const {
    const std::int64_t total = n > 0 ? group[n - 1] + head[n - 1] : 0;
    groups[0] = total;
    entry_offsets[total] = n;
  }
};

// Entry i's group, and a group's row and first entry at its head. The last of the n entries also
// does GroupTotal's work (nothing else writes entry_offsets[total] or groups), so a grouping of
// n > 0 entries needs no launch of its own for it.
struct GroupScatter {
  const std::int64_t* keys;
  const std::int64_t* vals;
  const std::int64_t* bag_of;  // null: entry j is bag j
  const float* bag_scale;
  const std::int64_t* head;
  const std::int64_t* group;  // exclusive prefix sum of head
  std::int64_t* unique_rows;
  std::int64_t* entry_offsets;
  std::int64_t* entry_grad;
  float* entry_scale;
  std::int64_t n;
  std::int64_t* groups;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const {
    if (head[i]) {
      unique_rows[group[i]] = keys[i];
      entry_offsets[group[i]] = i;
    }
    const std::int64_t j = bag_of ? bag_of[vals[i]] : vals[i];
    entry_grad[i] = j;
    if (bag_scale) entry_scale[i] = bag_scale[j];
    if (i == n - 1) GroupTotal{head, group, n, groups, entry_offsets}(0);
  }
};

}  // namespace recmix::embedding::kernels
