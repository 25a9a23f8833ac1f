#include "runtime/cli/mpi_session.hpp"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "core/error.hpp"

namespace recmix::runtime {
namespace {
bool g_we_initialised = false;
bool g_known_to_every_rank = false;
std::string g_failure_log;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}
}  // namespace

int ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw CommError("MPI_Init_thread failed");
    g_we_initialised = true;
    std::atexit(finalize_at_exit);
    // Several jobs' threads and the control plane call MPI at once (recmix run): anything less
    // than MPI_THREAD_MULTIPLE would corrupt messages silently.
    if (provided < MPI_THREAD_MULTIPLE)
      throw CommError("the MPI library provides thread level " + std::to_string(provided) +
                      ", recmix needs MPI_THREAD_MULTIPLE (" + std::to_string(MPI_THREAD_MULTIPLE) +
                      "): use an MPI built with thread support (Debian's Open MPI has it)");
  }
  return world_rank();
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

RankPlaces rank_places() {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    throw CommError("MPI_Comm_split_type (ranks per host) failed");
  const int me = world_rank();
  int key = me;
  MPI_Allreduce(&me, &key, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  constexpr int kHostBytes = 256;
  char host[kHostBytes] = {};
  gethostname(host, kHostBytes - 1);
  const int n = world_size();
  RankPlaces out;
  out.node_key.resize(n);
  std::vector<char> hosts(static_cast<std::size_t>(n) * kHostBytes);
  MPI_Allgather(&key, 1, MPI_INT, out.node_key.data(), 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgather(host, kHostBytes, MPI_CHAR, hosts.data(), kHostBytes, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < n; ++r) out.host.emplace_back(hosts.data() + static_cast<std::size_t>(r) * kHostBytes);
  return out;
}

std::string error_prefix() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && world_size() > 1) return "recmix (rank " + std::to_string(world_rank()) + ")";
  return "recmix";
}

void abort_other_ranks_on_failure() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && world_size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
}

void error_known_to_every_rank() { g_known_to_every_rank = true; }

void set_failure_log(std::string path) { g_failure_log = std::move(path); }

namespace {

bool several_ranks() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized && world_size() > 1;
}

// Appends the line to the failure log as its logger writes (time, level), when that log exists
// (a run directory that holds no run yet is left without one). False when it was not written.
bool append_to_failure_log(const std::string& line) {
  if (g_failure_log.empty() || !std::filesystem::exists(g_failure_log)) return false;
  std::FILE* f = std::fopen(g_failure_log.c_str(), "a");
  if (f == nullptr) return false;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &local);
  const bool ok = std::fprintf(f, "%s.%03d error %s\n", stamp, static_cast<int>(ms), line.c_str()) > 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int end_after_error(const char* kind, const std::string& what, bool peer_failed) {
  const std::string line = error_prefix() + ": " + kind + ": " + what;
  const bool several = several_ranks();
  if (g_known_to_every_rank) {  // every rank ends in order; rank 0 says why
    if (!several || world_rank() == 0) std::fprintf(stderr, "%s\n", line.c_str());
    return 1;
  }
  if (peer_failed && several) {
    // The failing rank prints the cause and aborts the job; this rank's line is for the log.
    if (!append_to_failure_log(line)) std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::seconds(10));  // ended by that MPI_Abort before then
    abort_other_ranks_on_failure();
    return 1;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  append_to_failure_log(line);
  abort_other_ranks_on_failure();
  return 1;
}

}  // namespace recmix::runtime
