#pragma once
// A stable LSD radix sort of non-negative int64 keys that carries one int64 payload per key: the
// grouping step of the sparse update (equal rows together, in batch order within a row). Linear
// in the entries; `digit_bits` trades passes against the size of the count array. Internal to
// recmix_embedding.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace recmix::embedding::detail {

// Sorts keys[0, n) (each below 2^key_bits), moving payload along; keys_tmp and payload_tmp are
// scratch of n entries. Returns the arrays that hold the result: (keys, payload) or the scratch.
inline std::pair<std::int64_t*, std::int64_t*> radix_sort(std::int64_t* keys, std::int64_t* payload,
                                                          std::int64_t* keys_tmp, std::int64_t* payload_tmp,
                                                          std::int64_t n, int key_bits, int digit_bits,
                                                          std::vector<std::int64_t>& count) {
  const std::int64_t mask = (std::int64_t(1) << digit_bits) - 1;
  count.resize(std::size_t(1) << digit_bits);
  std::int64_t* c = count.data();
  for (int shift = 0; shift < key_bits; shift += digit_bits) {
    std::fill(count.begin(), count.end(), 0);
    for (std::int64_t i = 0; i < n; ++i) ++c[(keys[i] >> shift) & mask];
    std::int64_t sum = 0;
    for (auto& x : count) {
      const std::int64_t here = x;
      x = sum;
      sum += here;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t at = c[(keys[i] >> shift) & mask]++;
      keys_tmp[at] = keys[i];
      payload_tmp[at] = payload[i];
    }
    std::swap(keys, keys_tmp);
    std::swap(payload, payload_tmp);
  }
  return {keys, payload};
}

// Bits needed for values below `limit`.
inline int bits_below(std::int64_t limit) {
  int bits = 0;
  while (bits < 63 && (std::int64_t(1) << bits) < limit) ++bits;
  return bits;
}

}  // namespace recmix::embedding::detail
