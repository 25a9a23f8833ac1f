// The reader under MPI (1, 2 and 4 ranks): collective and independent I/O give each rank the
// slice of the one-rank batch that the rank-order split assigns it, and over an epoch the ranks
// together see every row exactly once (summed with one all-reduce, so every rank agrees).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "data/reader.hpp"
#include "dataset_fixture.hpp"
#include "test_util.hpp"

namespace recmix::data {
namespace {

constexpr int kDense = 2;
const std::vector<std::int64_t> kTables = {13, 50};

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

// Rank 0 writes two files (700 and 333 rows); every rank gets their paths.
struct SharedFiles {
  std::unique_ptr<test::ScratchDir> dir;
  std::vector<std::string> paths;
  explicit SharedFiles(bool multi_hot) {
    World w;
    char name[512] = {0};
    if (w.rank == 0) {
      dir = std::make_unique<test::ScratchDir>();
      test::write_fixture(*dir / "a.h5", 0, 700, kDense, kTables, multi_hot, {.chunk_rows = 128});
      test::write_fixture(*dir / "b.h5", 700, 333, kDense, kTables, multi_hot, {.chunk_rows = 128});
      std::snprintf(name, sizeof name, "%s", dir->path().c_str());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    paths = {std::string(name) + "/a.h5", std::string(name) + "/b.h5"};
  }
  ~SharedFiles() { MPI_Barrier(MPI_COMM_WORLD); }  // nobody reads once rank 0 removes the files
};

std::vector<std::int64_t> rows_of(const Batch& b) {
  std::vector<std::int64_t> rows;
  for (std::int64_t i = 0; i < b.size; ++i) rows.push_back(static_cast<std::int64_t>(b.dense[i * kDense]));
  return rows;
}

void check_values(const Batch& b, bool multi_hot) {
  for (std::int64_t i = 0; i < b.size; ++i) {
    const auto r = static_cast<std::int64_t>(b.dense[i * kDense]);
    ASSERT_EQ(b.dense[i * kDense + 1], test::fixture_dense(r, 1));
    ASSERT_EQ(b.labels[i], test::fixture_label(r));
    for (std::size_t t = 0; t < kTables.size(); ++t) {
      std::vector<std::int64_t> got(b.indices[t].begin() + b.offsets[t][i], b.indices[t].begin() + b.offsets[t][i + 1]);
      auto want = multi_hot ? test::fixture_bag(r, static_cast<int>(t), kTables[t])
                            : std::vector<std::int64_t>{test::fixture_index(r, static_cast<int>(t), kTables[t])};
      ASSERT_EQ(got, want);
    }
  }
}

void run_epochs(bool multi_hot, bool shuffle, bool collective, int prefetch) {
  World w;
  SharedFiles files(multi_hot);
  ReaderOptions o{.global_batch = 90, .rank = w.rank, .world = w.size, .shuffle = shuffle, .seed = 11,
                  .shuffle_window = 512, .shuffle_block = 128, .prefetch = prefetch, .drop_last = false};
  MPI_Comm comm = MPI_COMM_WORLD;
  std::unique_ptr<Reader> reader = collective ? std::make_unique<Reader>(files.paths, o, &comm)
                                              : std::make_unique<Reader>(files.paths, o);
  ReaderOptions single = o;
  single.rank = 0;
  single.world = 1;
  single.prefetch = 0;
  Reader whole(files.paths, single);  // the one-rank view, read by every rank on its own
  ASSERT_EQ(reader->batches_per_epoch(), 12);
  Batch mine, all;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen(1033, 0);
    while (true) {
      bool got = false;
      try {
        got = reader->next(mine);
      } catch (const std::exception& e) {
        // a collective reader cannot unwind on one rank alone: report and stop every rank
        std::fprintf(stderr, "[rank %d] reader failed: %s\n", w.rank, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      ASSERT_EQ(got, whole.next(all));
      if (!got) break;
      // rank-order split: sizes differ by at most one, ranks in order
      const std::int64_t g = all.size, per = g / w.size, extra = g % w.size;
      const std::int64_t lo = w.rank * per + std::min<std::int64_t>(w.rank, extra);
      const std::int64_t n = per + (w.rank < extra ? 1 : 0);
      auto expected = rows_of(all);
      ASSERT_EQ(rows_of(mine), std::vector<std::int64_t>(expected.begin() + lo, expected.begin() + lo + n));
      try {
        check_values(mine, multi_hot);
      } catch (const std::exception& e) {  // e.g. offsets that make no range
        std::fprintf(stderr, "[rank %d] bad batch: %s\n", w.rank, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      for (std::int64_t r : rows_of(mine)) ++seen[r];
    }
    MPI_Allreduce(MPI_IN_PLACE, seen.data(), static_cast<int>(seen.size()), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (std::size_t r = 0; r < seen.size(); ++r) ASSERT_EQ(seen[r], 1) << "row " << r << " epoch " << epoch;
  }
}

TEST(ReaderMpi, CollectiveInFileOrder) { run_epochs(false, false, true, 2); }
TEST(ReaderMpi, CollectiveShuffledMultiHot) { run_epochs(true, true, true, 2); }
TEST(ReaderMpi, CollectiveSynchronous) { run_epochs(false, true, true, 0); }
TEST(ReaderMpi, CollectiveMultiHotSynchronous) { run_epochs(true, true, true, 0); }
TEST(ReaderMpi, CollectiveMultiHotFileOrder) { run_epochs(true, false, true, 2); }
TEST(ReaderMpi, IndependentShuffled) { run_epochs(false, true, false, 2); }
TEST(ReaderMpi, IndependentInFileOrder) { run_epochs(false, false, false, 2); }
TEST(ReaderMpi, IndependentInFileOrderSynchronous) { run_epochs(false, false, false, 0); }
TEST(ReaderMpi, IndependentMultiHot) { run_epochs(true, false, false, 1); }

TEST(ReaderMpi, CollectiveSeekAndPause) {
  World w;
  SharedFiles files(false);
  ReaderOptions o{.global_batch = 64, .shuffle = true, .seed = 4, .prefetch = 2};
  MPI_Comm comm = MPI_COMM_WORLD;
  Reader reader(files.paths, o, &comm);
  Batch b;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(reader.next(b));
  const ReaderPosition saved = reader.position();
  reader.pause_prefetch();  // as before a checkpoint
  std::vector<std::vector<std::int64_t>> after;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(reader.next(b));
    after.push_back(rows_of(b));
  }
  reader.seek(saved);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(reader.next(b));
    EXPECT_EQ(rows_of(b), after[i]);
  }
}

}  // namespace
}  // namespace recmix::data
