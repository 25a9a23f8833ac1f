// The MPI test harness (tests/mpi_gtest_main.cpp) itself: a test that fails on rank 1 only while
// the other ranks wait in a collective rank 1 never joins. The harness must print rank 1's
// failure and end every rank within seconds; expect_abort.sh checks both (ctest runs it at 2 and
// 4 ranks). Not a test of recmix: it always fails, by design.
#include <gtest/gtest.h>
#include <mpi.h>

TEST(Harness, ARankThatFailsEndsTheWorld) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 1) {
    ADD_FAILURE() << "planted failure on rank 1";
    return;
  }
  MPI_Barrier(MPI_COMM_WORLD);  // never completes: rank 1 left the test
}
