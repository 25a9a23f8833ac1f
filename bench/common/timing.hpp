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

// Calls of f a second: one untimed, then at least min_calls and at least min_seconds of them.
template <class F>
double calls_per_second(const F& f, double min_seconds, int min_calls = 3) {
  f();
  int calls = 0;
  const double t0 = now();
  while (now() - t0 < min_seconds || calls < min_calls) {
    f();
    ++calls;
  }
  return calls / (now() - t0);
}

// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace recmix::bench
