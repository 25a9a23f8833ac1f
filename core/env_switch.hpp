#pragma once
// A process-wide on/off switch for an A/B of two code paths: on unless the environment variable
// named at its definition holds its "off" word ("off" unless given; read once, at first use), and
// settable at run time (benchmarks flip it between runs). Reads are relaxed atomics, cheap enough
// for a launch path.
#include <atomic>
#include <cstdlib>
#include <string_view>

namespace recmix {

class EnvSwitch {
 public:
  explicit EnvSwitch(const char* variable, std::string_view off_word = "off") {
    const char* v = std::getenv(variable);
    on_.store(!(v && std::string_view(v) == off_word), std::memory_order_relaxed);
  }
  bool on() const { return on_.load(std::memory_order_relaxed); }
  void set(bool on) { on_.store(on, std::memory_order_relaxed); }

 private:
  std::atomic<bool> on_{true};
};

}  // namespace recmix
