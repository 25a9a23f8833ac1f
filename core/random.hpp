#pragma once
// Counter-based random numbers: a value is a pure function of (seed, stream, index), so a
// parameter initialised on any rank, in any order, in any shard layout, gets the same value.
// This is what lets an N-rank run start from exactly the weights of a 1-rank run.
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace recmix::random {

RECMIX_HOST_DEVICE inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

RECMIX_HOST_DEVICE inline std::uint64_t hash(std::uint64_t seed, std::uint64_t stream,
                                             std::uint64_t index) {
  return mix64(mix64(mix64(seed) ^ stream) ^ index);
}

// Uniform in [0, 1) with 24 random bits.
RECMIX_HOST_DEVICE inline float uniform01(std::uint64_t seed, std::uint64_t stream,
                                          std::uint64_t index) {
  return static_cast<float>(hash(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

RECMIX_HOST_DEVICE inline float uniform(std::uint64_t seed, std::uint64_t stream,
                                        std::uint64_t index, float lo, float hi) {
  return lo + (hi - lo) * uniform01(seed, stream, index);
}

// Standard normal by Box-Muller on two independent uniforms of the same counter.
RECMIX_HOST_DEVICE inline float normal(std::uint64_t seed, std::uint64_t stream,
                                       std::uint64_t index, float mean, float stddev) {
  std::uint64_t h = hash(seed, stream, index);
  double u1 = (static_cast<double>(h >> 40) + 1.0) * (1.0 / 16777217.0);  // (0, 1]
  double u2 = static_cast<double>(mix64(h) >> 40) * (1.0 / 16777216.0);
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return static_cast<float>(mean + stddev * z);
}

// A small sequential generator (for shuffles and synthetic data) whose whole state is one
// 64-bit counter, so it can be saved in a checkpoint and restored exactly.
class CounterRng {
 public:
  explicit CounterRng(std::uint64_t seed, std::uint64_t stream = 0, std::uint64_t counter = 0)
      : seed_(seed), stream_(stream), counter_(counter) {}
  std::uint64_t next_u64() { return hash(seed_, stream_, counter_++); }
  float next_uniform01() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
  std::uint64_t next_below(std::uint64_t n) {
    __extension__ using u128 = unsigned __int128;  // GCC/Clang extension, silenced for -Wpedantic
    return static_cast<std::uint64_t>((static_cast<u128>(next_u64()) * n) >> 64);
  }
  std::uint64_t counter() const { return counter_; }
  void set_counter(std::uint64_t c) { counter_ = c; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::uint64_t seed_, stream_, counter_;
};

}  // namespace recmix::random
