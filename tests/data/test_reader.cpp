// The reader: batches in file order across several files, per-rank slices that add up to the
// one-rank batch, multi-hot CSR, shuffle determinism and coverage, epochs, and position restore.
// Every expected value comes from the fixture's formula for the row (dataset_fixture.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/reader.hpp"
#include "dataset_fixture.hpp"
#include "test_util.hpp"

namespace recmix::data {
namespace {

using test::ScratchDir;

constexpr int kDense = 3;
const std::vector<std::int64_t> kTables = {11, 1000};

// The dataset row of each sample of a batch (dense[0] holds the row).
std::vector<std::int64_t> rows_of(const Batch& b) {
  std::vector<std::int64_t> rows;
  for (std::int64_t i = 0; i < b.size; ++i) rows.push_back(static_cast<std::int64_t>(b.dense[i * kDense]));
  return rows;
}

// Checks every value of `b` against the fixture, given the rows it should hold.
void expect_fixture(const Batch& b, const std::vector<std::int64_t>& rows, bool multi_hot) {
  ASSERT_EQ(b.size, static_cast<std::int64_t>(rows.size()));
  ASSERT_EQ(b.offsets.size(), kTables.size());
  for (std::int64_t i = 0; i < b.size; ++i) {
    const std::int64_t r = rows[i];
    for (int d = 0; d < kDense; ++d) ASSERT_EQ(b.dense[i * kDense + d], test::fixture_dense(r, d)) << "row " << r;
    ASSERT_EQ(b.labels[i], test::fixture_label(r));
    for (std::size_t t = 0; t < kTables.size(); ++t) {
      const auto& off = b.offsets[t];
      ASSERT_EQ(off.size(), static_cast<std::size_t>(b.size + 1));
      std::vector<std::int64_t> got(b.indices[t].begin() + off[i], b.indices[t].begin() + off[i + 1]);
      std::vector<std::int64_t> want = multi_hot ? test::fixture_bag(r, static_cast<int>(t), kTables[t])
                                                 : std::vector<std::int64_t>{test::fixture_index(r, static_cast<int>(t), kTables[t])};
      ASSERT_EQ(got, want) << "row " << r << " table " << t;
    }
  }
}

struct Files {
  ScratchDir dir;
  std::vector<std::string> paths;
  // 3 files of 700, 0 and 551 rows (an empty file in the middle), chunks of 64 rows
  explicit Files(bool multi_hot) {
    std::int64_t first = 0;
    for (std::int64_t n : {700, 0, 551}) {
      paths.push_back(dir / ("part" + std::to_string(paths.size()) + ".h5"));
      test::write_fixture(paths.back(), first, n, kDense, kTables, multi_hot, {.chunk_rows = 64});
      first += n;
    }
  }
};

TEST(Reader, SequentialAcrossFiles) {
  for (bool multi_hot : {false, true}) {
    Files files(multi_hot);
    for (int prefetch : {0, 3}) {
      Reader reader(files.paths, {.global_batch = 100, .prefetch = prefetch, .drop_last = false});
      EXPECT_EQ(reader.info().rows, 1251);
      ASSERT_EQ(reader.batches_per_epoch(), 13);
      Batch b;
      for (std::int64_t k = 0; k < 13; ++k) {
        ASSERT_TRUE(reader.next(b));
        EXPECT_EQ(b.global_index, k);
        std::vector<std::int64_t> want;
        for (std::int64_t r = k * 100; r < std::min<std::int64_t>(1251, (k + 1) * 100); ++r) want.push_back(r);
        expect_fixture(b, want, multi_hot);
      }
      EXPECT_FALSE(reader.next(b));
      EXPECT_EQ(reader.position(), (ReaderPosition{1, 0}));
      ASSERT_TRUE(reader.next(b));  // next epoch starts again at row 0
      EXPECT_EQ(rows_of(b).front(), 0);
    }
  }
}

TEST(Reader, DropLast) {
  Files files(false);
  Reader reader(files.paths, {.global_batch = 100, .prefetch = 1});
  EXPECT_EQ(reader.batches_per_epoch(), 12);
  Batch b;
  int n = 0;
  while (reader.next(b)) ++n;
  EXPECT_EQ(n, 12);
  Reader big(files.paths, {.global_batch = 5000, .prefetch = 1});
  EXPECT_EQ(big.batches_per_epoch(), 0);
  EXPECT_FALSE(big.next(b));
}

// W ranks' slices, concatenated in rank order, are exactly the one-rank batch; sizes differ by <= 1.
TEST(Reader, RankSlicesMakeUpTheGlobalBatch) {
  for (bool shuffle : {false, true}) {
    Files files(true);
    ReaderOptions base{.global_batch = 97, .shuffle = shuffle, .seed = 5, .shuffle_window = 300,
                       .shuffle_block = 64, .prefetch = 2, .drop_last = false};
    Reader one(files.paths, base);
    std::vector<std::vector<std::int64_t>> whole;
    Batch b;
    while (one.next(b)) whole.push_back(rows_of(b));
    for (int world : {2, 3, 4}) {
      std::vector<std::unique_ptr<Reader>> ranks;
      for (int r = 0; r < world; ++r) {
        ReaderOptions o = base;
        o.rank = r;
        o.world = world;
        ranks.push_back(std::make_unique<Reader>(files.paths, o));
      }
      for (std::size_t k = 0; k < whole.size(); ++k) {
        std::vector<std::int64_t> joined;
        std::int64_t smallest = 1 << 30, largest = 0;
        for (int r = 0; r < world; ++r) {
          ASSERT_TRUE(ranks[r]->next(b));
          auto rows = rows_of(b);
          expect_fixture(b, rows, true);
          joined.insert(joined.end(), rows.begin(), rows.end());
          smallest = std::min(smallest, b.size);
          largest = std::max(largest, b.size);
        }
        ASSERT_EQ(joined, whole[k]) << "world " << world << " batch " << k;
        ASSERT_LE(largest - smallest, 1);
      }
      for (int r = 0; r < world; ++r) EXPECT_FALSE(ranks[r]->next(b));
    }
  }
}

TEST(Reader, ShuffleIsAPermutationDeterministicPerSeedAndEpoch) {
  Files files(false);
  auto epoch_rows = [&](std::uint64_t seed, int epochs, std::int64_t window) {
    Reader reader(files.paths, {.global_batch = 50, .shuffle = true, .seed = seed, .shuffle_window = window,
                                .shuffle_block = 64, .prefetch = 2, .drop_last = false});
    std::vector<std::vector<std::int64_t>> out(epochs);
    Batch b;
    for (int e = 0; e < epochs; ++e) {
      while (reader.next(b)) {
        auto rows = rows_of(b);
        expect_fixture(b, rows, false);
        out[e].insert(out[e].end(), rows.begin(), rows.end());
      }
    }
    return out;
  };
  auto a = epoch_rows(1, 2, 256);
  for (const auto& epoch : a) {
    std::vector<std::int64_t> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted.size(), 1251u);
    for (std::int64_t r = 0; r < 1251; ++r) ASSERT_EQ(sorted[r], r);  // every row exactly once
  }
  EXPECT_NE(a[0], a[1]);                    // epochs differ
  EXPECT_EQ(a, epoch_rows(1, 2, 256));      // same seed, same order
  EXPECT_NE(a[0], epoch_rows(2, 1, 256)[0]);  // another seed, another order
  // it is a real shuffle: few samples stay next to their file-order neighbour
  int neighbours = 0;
  for (std::size_t i = 1; i < a[0].size(); ++i) neighbours += a[0][i] == a[0][i - 1] + 1;
  EXPECT_LT(neighbours, 100);
  // with a window of one block, rows move only inside their block: blocks stay contiguous
  auto blocky = epoch_rows(1, 1, 64)[0];
  for (std::size_t i = 0; i + 64 <= 1216; i += 64) {
    std::set<std::int64_t> blocks;
    for (std::size_t j = i; j < i + 64; ++j) blocks.insert(blocky[j] / 64);
    EXPECT_EQ(blocks.size(), 1u) << i;
  }
  Reader reader(files.paths, {.global_batch = 50, .shuffle = true, .seed = 1, .shuffle_window = 256, .shuffle_block = 64});
  EXPECT_EQ(reader.sample_row(0, 0), a[0][0]);
  EXPECT_EQ(reader.sample_row(1, 1250), a[1][1250]);
}

TEST(Reader, PositionRestoreGivesTheSameBatches) {
  Files files(true);
  ReaderOptions o{.global_batch = 64, .shuffle = true, .seed = 9, .prefetch = 3, .drop_last = true};
  Reader reader(files.paths, o);
  Batch b;
  const std::int64_t bpe = reader.batches_per_epoch();  // 19
  for (int i = 0; i < 25; ++i) {
    if (!reader.next(b)) {
      ASSERT_TRUE(reader.next(b));
    }
  }
  ReaderPosition saved = reader.position();
  EXPECT_EQ(saved, (ReaderPosition{1, 25 - bpe}));
  std::vector<std::vector<std::int64_t>> after;
  for (int i = 0; i < 30; ++i) {
    if (!reader.next(b)) {
      after.push_back({-1});  // epoch boundary
      continue;
    }
    after.push_back(rows_of(b));
  }
  for (int prefetch : {0, 2}) {
    ReaderOptions p = o;
    p.prefetch = prefetch;
    Reader restored(files.paths, p);
    restored.next(b);  // some reading before the seek must not matter
    restored.seek(saved);
    for (std::size_t i = 0; i < after.size(); ++i) {
      bool got = restored.next(b);
      if (after[i] == std::vector<std::int64_t>{-1}) {
        EXPECT_FALSE(got) << i;
      } else {
        ASSERT_TRUE(got) << i;
        EXPECT_EQ(rows_of(b), after[i]) << i;
      }
    }
  }
  // a position beyond the epoch is refused
  EXPECT_THROW(reader.seek({0, bpe + 1}), ConfigError);
}

TEST(Reader, PauseAndDestroyWhileReadingAhead) {
  Files files(false);
  for (int i = 0; i < 3; ++i) {
    Reader reader(files.paths, {.global_batch = 10, .prefetch = 4});
    Batch b;
    ASSERT_TRUE(reader.next(b));
    reader.pause_prefetch();
    ASSERT_TRUE(reader.next(b));
    EXPECT_EQ(rows_of(b).front(), 10);
  }  // destroyed with reads in flight
}

}  // namespace
}  // namespace recmix::data
