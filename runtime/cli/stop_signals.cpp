#include "runtime/cli/stop_signals.hpp"

#include <csignal>

namespace recmix::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
  if (sig == SIGINT && g_stop.load()) {  // the second Ctrl-C: stop now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_stop.store(true);
}

}  // namespace

const std::atomic<bool>& install_stop_signals() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGUSR1, &action, nullptr);
    return true;
  }();
  (void)installed;
  return g_stop;
}

const char* stop_signal_name() {
  switch (g_signal.load()) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "";
  }
}

}  // namespace recmix::cli
