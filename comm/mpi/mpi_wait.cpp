#include "comm/mpi/mpi_wait.hpp"

#include <time.h>
#include <unistd.h>

namespace recmix::comm {

int wait_requests(std::span<MPI_Request> requests, const PollThenSleep& policy) {
  using clock = std::chrono::steady_clock;
  const int n = static_cast<int>(requests.size());
  int done = 0;
  const auto start = clock::now();
  // The clock is read after every poll: on an oversubscribed node a poll can yield the core.
  for (;;) {
    const int rc = MPI_Testall(n, requests.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    if (clock::now() - start >= policy.spin) break;
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(policy.nap).count();
  const timespec nap{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  for (;;) {
    nanosleep(&nap, nullptr);
    const int rc = MPI_Testall(n, requests.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
  }
}

bool ranks_fit_node_cpus(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return true;
  int local = 1;
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus <= 0 || local <= cpus;
}

}  // namespace recmix::comm
