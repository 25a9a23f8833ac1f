#pragma once
// Timing helpers shared by the benchmarks: a wall clock and medians.
#include <algorithm>
#include <chrono>
#include <vector>

namespace recmix::bench {

// Seconds on a steady clock (differences only).
inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace recmix::bench
