#include "runtime/cli/stop_signals.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

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

std::string relaunch_prefix(int ranks) {
  std::error_code ec;
  std::string program = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || program.empty()) program = "recmix";
  auto set = [](const char* name) { const char* v = std::getenv(name); return v != nullptr && *v != '\0'; };
  if (set("RECMIX_LAUNCHER")) return fmt::format("{} -np {} {}", std::getenv("RECMIX_LAUNCHER"), ranks, program);
  if (set("OMPI_COMM_WORLD_SIZE")) return fmt::format("mpirun -np {} {}", ranks, program);
  if (set("SLURM_STEP_ID")) return fmt::format("srun -n {} {}", ranks, program);
  return program;
}

}  // namespace recmix::cli
