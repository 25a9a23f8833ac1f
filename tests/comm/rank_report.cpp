// Payload for launcher tests (mpirun wrapper, srun, sbatch): every rank reports its place in
// the world and the sum of all ranks, which proves the ranks form one job rather than N
// single-rank jobs.
#include <cinttypes>
#include <cstdint>
#include <cstdio>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "runtime/cli/mpi_session.hpp"

int main() {
  try {
    recmix::runtime::ensure_mpi();
    auto comm = recmix::comm::make_mpi_world_communicator();
    std::int64_t mine = comm->rank(), sum = 0;
    comm->all_reduce_sum(&mine, &sum, 1, recmix::comm::DataType::i64);
    std::printf("rank %d of %d: sum of ranks %" PRId64 "\n", comm->rank(), comm->size(), sum);
    return 0;
  } catch (const recmix::Error& e) {
    std::fprintf(stderr, "rank_report: %s: %s\n", e.kind(), e.what());
    recmix::runtime::abort_other_ranks_on_failure();
    return 1;
  }
}
