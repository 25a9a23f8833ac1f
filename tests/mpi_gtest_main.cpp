// main() for MPI tests: initialises MPI, runs the tests on every rank, prints the full report on
// rank 0 only (other ranks print their failures), and fails every rank when any rank failed.
// With more than one rank, a test that fails on a rank ends every rank at once (MPI_Abort) once
// that rank has printed its failure: the other ranks may be waiting in a collective the failed
// rank left, and would otherwise hang until ctest's timeout. The tests after it do not run.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

class EndWorldOnFailure : public testing::EmptyTestEventListener {
 public:
  explicit EndWorldOnFailure(int rank) : rank_(rank) {}
  void OnTestEnd(const testing::TestInfo& test) override {
    if (!test.result()->Failed()) return;
    std::fprintf(stderr, "[rank %d] %s.%s failed: ending every rank (the others may wait in a collective it left)\n",
                 rank_, test.test_suite_name(), test.name());
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) listeners.Append(new EndWorldOnFailure(rank));
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !local_failed)
    std::fprintf(stderr, "a test failed on another rank (see its output above)\n");
  MPI_Finalize();
  return any_failed;
}
