// A job in which rank 1 fails (bad data) while the other ranks wait in a collective it never
// joins. It ends the way the recmix executable ends: one line on stderr from the failing rank,
// then runtime::abort_other_ranks_on_failure() takes every rank down. expect_abort.sh checks
// that this happens within seconds instead of hanging. In mode "abort" rank 1 calls
// Communicator::abort itself instead of throwing.
//   fail_one_rank blocking|nonblocking|abort
#include <cstdio>
#include <cstring>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "runtime/cli/mpi_session.hpp"

int main(int argc, char** argv) {
  const bool non_blocking = argc > 1 && std::strcmp(argv[1], "nonblocking") == 0;
  const bool via_abort = argc > 1 && std::strcmp(argv[1], "abort") == 0;
  try {
    recmix::runtime::ensure_mpi();
    auto comm = recmix::comm::make_mpi_world_communicator();
    if (comm->size() < 2) throw recmix::ConfigError("fail_one_rank needs at least 2 ranks");
    if (comm->rank() == 1 && via_abort)
      comm->abort(3, "train.h5: dataset 'sparse', row 7: index -3 is negative");
    if (comm->rank() == 1)
      throw recmix::DataError("train.h5: dataset 'sparse', row 7: index -3 is negative");
    float x = 1.0f, sum = 0.0f;
    if (non_blocking) {
      auto request = comm->iall_reduce_sum(&x, &sum, 1, recmix::comm::DataType::f32);
      while (!request->test()) {
      }
    } else {
      comm->all_reduce_sum(&x, &sum, 1, recmix::comm::DataType::f32);
    }
    std::printf("rank %d finished although rank 1 failed\n", comm->rank());
    return 0;
  } catch (const recmix::Error& e) {
    std::fprintf(stderr, "recmix: %s: %s\n", e.kind(), e.what());
    recmix::runtime::abort_other_ranks_on_failure();
    return 1;
  }
}
