// The reader: batches in file order across several files, per-rank slices that add up to the
// one-rank batch, multi-hot CSR, shuffle determinism and coverage, epochs, and position restore.
// Every expected value comes from the fixture's formula for the row (dataset_fixture.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "core/error.hpp"
#include "data/h5.hpp"
#include "data/reader.hpp"
#include "data/writer.hpp"
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

// Sample i's indices into table t, from either layout of a batch (after checking its shape).
std::vector<std::int64_t> bag_of(const Batch& b, std::int64_t i, std::size_t t) {
  if (b.packed) {
    EXPECT_EQ(b.tables, static_cast<int>(kTables.size()));
    EXPECT_EQ(b.one_hot.size(), static_cast<std::size_t>(b.size) * kTables.size());
    EXPECT_TRUE(b.offsets.empty() && b.indices.empty());
    return {b.one_hot[i * kTables.size() + t]};
  }
  EXPECT_EQ(b.offsets.size(), kTables.size());
  const auto& off = b.offsets[t];
  EXPECT_EQ(off.size(), static_cast<std::size_t>(b.size + 1));
  return std::vector<std::int64_t>(b.indices[t].begin() + off[i], b.indices[t].begin() + off[i + 1]);
}

// Checks every value of `b` against the fixture, given the rows it should hold. One-hot batches
// are checked in the layout asked for (packed: ReaderOptions::packed_one_hot); multi-hot ones are
// always one CSR per table.
void expect_fixture(const Batch& b, const std::vector<std::int64_t>& rows, bool multi_hot, bool packed = false) {
  ASSERT_EQ(b.size, static_cast<std::int64_t>(rows.size()));
  ASSERT_EQ(b.packed, packed && !multi_hot);
  for (std::int64_t i = 0; i < b.size; ++i) {
    const std::int64_t r = rows[i];
    for (int d = 0; d < kDense; ++d) ASSERT_EQ(b.dense[i * kDense + d], test::fixture_dense(r, d)) << "row " << r;
    ASSERT_EQ(b.labels[i], test::fixture_label(r));
    for (std::size_t t = 0; t < kTables.size(); ++t) {
      std::vector<std::int64_t> got = bag_of(b, i, t);
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
    for (auto [prefetch, packed] : {std::pair{0, false}, {3, false}, {0, true}, {3, true}}) {
      Reader reader(files.paths,
                    {.global_batch = 100, .prefetch = prefetch, .drop_last = false, .packed_one_hot = packed});
      EXPECT_EQ(reader.info().rows, 1251);
      ASSERT_EQ(reader.batches_per_epoch(), 13);
      Batch b;
      for (std::int64_t k = 0; k < 13; ++k) {
        ASSERT_TRUE(reader.next(b));
        EXPECT_EQ(b.global_index, k);
        std::vector<std::int64_t> want;
        for (std::int64_t r = k * 100; r < std::min<std::int64_t>(1251, (k + 1) * 100); ++r) want.push_back(r);
        expect_fixture(b, want, multi_hot, packed);
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
  for (auto [shuffle, multi_hot] : {std::pair{false, true}, {true, true}, {false, false}, {true, false}}) {
    Files files(multi_hot);
    // one-hot files are read packed (in file order straight from the file, shuffled by the
    // per-table path and then packed)
    ReaderOptions base{.global_batch = 97, .shuffle = shuffle, .seed = 5, .shuffle_window = 300,
                       .shuffle_block = 64, .prefetch = 2, .drop_last = false, .packed_one_hot = !multi_hot};
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
          expect_fixture(b, rows, multi_hot, !multi_hot);
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

// --- file order with independent I/O: read units of several batches ---
//
// Rows wide enough (1200 dense values, about 4.8 kB) that a read unit (about 4 MiB of file data)
// holds 8 batches of 100 rows: the dataset spans several units, one unit crosses the boundary
// between the first and the last file (with an empty file between them), and the last batch is
// partial.

constexpr int kWide = 1200;

struct WideFiles {
  ScratchDir dir;
  std::vector<std::string> paths;
  static constexpr std::int64_t kRows = 2801;
  // int64_last: the last file stores its indices as int64 (a dataset may mix both)
  explicit WideFiles(bool int64_last = false) {
    std::int64_t first = 0;
    for (std::int64_t n : {1500, 0, 1301}) {
      paths.push_back(dir / ("wide" + std::to_string(paths.size()) + ".h5"));
      test::write_fixture(paths.back(), first, n, kWide, kTables, false,
                          {.chunk_rows = 256, .index_int64 = int64_last && paths.size() == 3});
      first += n;
    }
  }
};

std::vector<std::int64_t> wide_rows(const Batch& b) {
  std::vector<std::int64_t> rows;
  for (std::int64_t i = 0; i < b.size; ++i) rows.push_back(static_cast<std::int64_t>(b.dense[i * kWide]));
  return rows;
}

// Every value of a batch of the wide files, against the fixture formula of its row.
void expect_wide(const Batch& b, const std::vector<std::int64_t>& rows) {
  ASSERT_EQ(b.size, static_cast<std::int64_t>(rows.size()));
  ASSERT_EQ(b.dense.size(), rows.size() * kWide);
  ASSERT_EQ(b.labels.size(), rows.size());
  if (b.packed) {
    for (std::int64_t i = 0; i < b.size; ++i) {
      ASSERT_EQ(b.dense[i * kWide], static_cast<float>(rows[i]));
      ASSERT_EQ(b.labels[i], test::fixture_label(rows[i]));
      for (std::size_t t = 0; t < kTables.size(); ++t)
        ASSERT_EQ(bag_of(b, i, t), std::vector<std::int64_t>{test::fixture_index(rows[i], static_cast<int>(t), kTables[t])})
            << "row " << rows[i];
    }
    for (std::size_t k = 0; k < b.dense.size(); ++k)
      ASSERT_EQ(b.dense[k], test::fixture_dense(rows[k / kWide], static_cast<int>(k % kWide)));
    return;
  }
  ASSERT_EQ(b.offsets.size(), kTables.size());
  ASSERT_EQ(b.indices.size(), kTables.size());
  for (std::int64_t i = 0; i < b.size; ++i) {
    const std::int64_t r = rows[i];
    for (int d = 0; d < kWide; ++d) ASSERT_EQ(b.dense[i * kWide + d], test::fixture_dense(r, d)) << "row " << r;
    ASSERT_EQ(b.labels[i], test::fixture_label(r));
  }
  for (std::size_t t = 0; t < kTables.size(); ++t) {
    ASSERT_EQ(b.offsets[t].size(), rows.size() + 1);
    ASSERT_EQ(b.indices[t].size(), rows.size());
    for (std::int64_t i = 0; i <= b.size; ++i) ASSERT_EQ(b.offsets[t][i], i) << "table " << t;
    for (std::int64_t i = 0; i < b.size; ++i)
      ASSERT_EQ(b.indices[t][i], test::fixture_index(rows[i], static_cast<int>(t), kTables[t])) << "row " << rows[i];
  }
}

std::vector<std::int64_t> range(std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> v;
  for (std::int64_t r = lo; r < hi; ++r) v.push_back(r);
  return v;
}

TEST(Reader, ReadUnitsAcrossBatchesFilesAndEpochs) {
  for (bool int64_last : {false, true}) {
    WideFiles files(int64_last);
    for (auto [prefetch, packed] : {std::pair{0, false}, {2, false}, {0, true}, {2, true}}) {
      for (bool drop_last : {false, true}) {
        Reader reader(files.paths, {.global_batch = 100, .prefetch = prefetch, .drop_last = drop_last,
                                    .packed_one_hot = packed});
        const std::int64_t bpe = drop_last ? 28 : 29;
        ASSERT_EQ(reader.batches_per_epoch(), bpe);
        Batch b;
        for (int epoch = 0; epoch < 2; ++epoch) {
          for (std::int64_t k = 0; k < bpe; ++k) {
            ASSERT_TRUE(reader.next(b)) << k;
            EXPECT_EQ(b.global_index, k);
            ASSERT_EQ(b.packed, packed);
            expect_wide(b, range(k * 100, std::min<std::int64_t>(WideFiles::kRows, (k + 1) * 100)));
          }
          EXPECT_FALSE(reader.next(b));
        }
      }
    }
  }
}

// Seeking to any batch (inside the unit being served, before it, after it, the partial last
// batch) gives the batches that follow it in the epoch.
TEST(Reader, SeekIntoTheMiddleOfAReadUnit) {
  WideFiles files;
  for (auto [prefetch, packed] : {std::pair{0, false}, {3, false}, {3, true}}) {
    Reader reader(files.paths,
                  {.global_batch = 100, .prefetch = prefetch, .drop_last = false, .packed_one_hot = packed});
    Batch b;
    for (std::int64_t target : {5, 2, 13, 14, 9, 28, 0, 20}) {
      reader.seek({1, target});
      for (std::int64_t k = target; k < std::min<std::int64_t>(29, target + 4); ++k) {
        ASSERT_TRUE(reader.next(b)) << target << " " << k;
        EXPECT_EQ(b.global_index, k);
        expect_wide(b, range(k * 100, std::min<std::int64_t>(WideFiles::kRows, (k + 1) * 100)));
      }
    }
    reader.seek({2, 29});  // the end of an epoch: the next call ends it
    EXPECT_FALSE(reader.next(b));
    ASSERT_TRUE(reader.next(b));
    expect_wide(b, range(0, 100));
  }
}

// At 1, 2 and 4 ranks (and 3, which does not divide the batch) the slices of every batch join
// into the one-rank batch, and over an epoch every row is read exactly once.
TEST(Reader, ReadUnitRankSlicesCoverEveryRowOnce) {
  WideFiles files;
  for (int world : {1, 2, 3, 4}) {
    std::vector<int> seen(WideFiles::kRows, 0);
    std::vector<std::unique_ptr<Reader>> ranks;
    for (int r = 0; r < world; ++r)  // odd ranks read ahead, ranks 2 and 3 read packed
      ranks.push_back(std::make_unique<Reader>(
          files.paths, ReaderOptions{.global_batch = 90, .rank = r, .world = world, .prefetch = r % 2 ? 2 : 0,
                                     .drop_last = false, .packed_one_hot = r >= 2}));
    Batch b;
    for (std::int64_t k = 0; k < ranks[0]->batches_per_epoch(); ++k) {
      std::vector<std::int64_t> joined;
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(ranks[r]->next(b));
        const auto rows = wide_rows(b);
        expect_wide(b, rows);
        joined.insert(joined.end(), rows.begin(), rows.end());
        for (std::int64_t row : rows) ++seen[row];
      }
      ASSERT_EQ(joined, range(k * 90, std::min<std::int64_t>(WideFiles::kRows, (k + 1) * 90))) << world << " " << k;
    }
    for (int r = 0; r < world; ++r) EXPECT_FALSE(ranks[r]->next(b));
    for (std::int64_t row = 0; row < WideFiles::kRows; ++row) ASSERT_EQ(seen[row], 1) << world << " row " << row;
  }
}

// The one-hot offsets are written only into buffers that do not hold them already: a batch of
// another size, a new one, or one that a multi-hot reader filled in between all come out right.
TEST(Reader, OneHotOffsetsWhateverTheBatchHeld) {
  Files one_hot(false), multi_hot(true);
  for (int prefetch : {0, 2}) {
    Reader a(one_hot.paths, {.global_batch = 100, .prefetch = prefetch, .drop_last = false});
    Reader m(multi_hot.paths, {.global_batch = 100, .prefetch = prefetch, .drop_last = false});
    Batch b;
    for (std::int64_t k = 0; k < 13; ++k) {
      ASSERT_TRUE(m.next(b));  // multi-hot CSR in the buffers, then one-hot again
      ASSERT_TRUE(a.next(b));
      expect_fixture(b, range(k * 100, std::min<std::int64_t>(1251, (k + 1) * 100)), false);
    }
    a.seek({0, 12});  // the partial batch (51 rows), then a full one in the same buffers
    ASSERT_TRUE(a.next(b));
    expect_fixture(b, range(1200, 1251), false);
    EXPECT_FALSE(a.next(b));
    ASSERT_TRUE(a.next(b));
    expect_fixture(b, range(0, 100), false);
    Batch fresh;
    ASSERT_TRUE(a.next(fresh));
    expect_fixture(fresh, range(100, 200), false);
  }
}

// A bad value inside a read unit is reported on the batch that holds it (the batches before it
// are served), naming file, dataset and row; a damaged file serves the batches it can.
TEST(Reader, ErrorsInsideAReadUnitSurfaceOnTheirBatch) {
  ScratchDir dir;
  const std::string path = dir / "bad.h5";
  {
    DatasetWriter w(path, kWide, kTables, false, {.chunk_rows = 256});
    std::vector<float> dense(kWide);
    for (std::int64_t r = 0; r < 2000; ++r) {
      for (int d = 0; d < kWide; ++d) dense[d] = test::fixture_dense(r, d);
      float label = test::fixture_label(r);
      std::int64_t idx[2] = {test::fixture_index(r, 0, kTables[0]), test::fixture_index(r, 1, kTables[1])};
      if (r == 1234) idx[1] = kTables[1];
      w.append(1, dense.data(), &label, idx);
    }
    w.finish();
  }
  // Reads batches of 100 in file order, checking each, until the reader throws: (batches served,
  // the error).
  auto read_until_error = [](Reader& reader, Batch& b) {
    std::int64_t served = 0;
    std::string error;
    try {
      while (reader.next(b)) {
        expect_wide(b, range(served * 100, (served + 1) * 100));
        ++served;
      }
    } catch (const Error& e) {
      error = e.what();
    }
    return std::pair{served, error};
  };
  for (auto [prefetch, packed] : {std::pair{0, false}, {2, false}, {0, true}, {2, true}}) {
    Reader reader({path}, {.global_batch = 100, .prefetch = prefetch, .packed_one_hot = packed});
    Batch b;
    const auto [served, error] = read_until_error(reader, b);
    EXPECT_EQ(served, 12);
    EXPECT_NE(error.find("bad.h5:/sparse row 1234: column 1: index 1000 outside table rows [0, 1000)"),
              std::string::npos)
        << error;
    // every later call reports it too, until a seek
    EXPECT_THROW(reader.next(b), DataError);
    reader.seek({0, 13});
    ASSERT_TRUE(reader.next(b));
    expect_wide(b, range(1300, 1400));
  }

  // a compressed chunk that cannot be decoded (rows 1280-1535 of /sparse): the unit holding it
  // cannot be read whole, and its batches are read one by one, so that the 12 batches before the
  // damage come out, and then an error naming the file
  test::write_fixture(dir / "gz.h5", 0, 2000, kWide, kTables, false, {.chunk_rows = 256, .gzip_level = 1});
  haddr_t addr = HADDR_UNDEF;
  hsize_t bytes = 0;
  {
    h5::File f = h5::open_file(dir / "gz.h5");
    h5::Dataset sparse = h5::open_dataset(f, "sparse");
    hsize_t offset[2] = {1280, 0};
    unsigned mask = 0;
    h5::Lock lock(h5::api_mutex());
    ASSERT_GE(H5Dget_chunk_info_by_coord(sparse, offset, &mask, &addr, &bytes), 0);
  }
  {
    std::fstream f(dir / "gz.h5", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(addr));
    const std::string zeros(bytes, '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  for (auto [prefetch, packed] : {std::pair{0, false}, {2, false}, {2, true}}) {
    Reader reader({dir / "gz.h5"}, {.global_batch = 100, .prefetch = prefetch, .packed_one_hot = packed});
    Batch b;
    const auto [served, error] = read_until_error(reader, b);
    EXPECT_EQ(served, 12);
    EXPECT_NE(error.find("gz.h5"), std::string::npos) << error;
    // every later call reports it too, until a seek past the damage
    EXPECT_THROW(reader.next(b), Error);
    reader.seek({0, 16});
    ASSERT_TRUE(reader.next(b));
    expect_wide(b, range(1600, 1700));
  }
}

}  // namespace
}  // namespace recmix::data
