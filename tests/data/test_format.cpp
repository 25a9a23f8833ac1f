// The dataset format: write/read round trips, the HDF5 helpers, and every way a file can be
// wrong (missing dataset, wrong type or shape, bad version, not HDF5, truncated, values out of range).
#include <gtest/gtest.h>

#include <fstream>

#include <cmath>
#include <filesystem>
#include <limits>

#include "data/format.hpp"
#include "data/inspect.hpp"
#include "data/h5.hpp"
#include "data/reader.hpp"
#include "data/writer.hpp"
#include "dataset_fixture.hpp"
#include "test_util.hpp"

namespace recmix::data {
namespace {

using test::ScratchDir;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(H5Helpers, ArraysAndAttributes) {
  ScratchDir dir;
  const std::string path = dir / "a.h5";
  {
    h5::File f = h5::create_file(path);
    std::vector<float> a = {1, 2, 3, 4, 5, 6};
    h5::write_array(f, "group/a", a.data(), {2, 3}, {{1, 3}, 4, false});
    std::vector<std::int64_t> b = {-1, 1LL << 40};
    h5::write_array(f, "b", b.data(), {2});
    h5::write_attribute(f, "name", std::string("hello"));
    h5::write_attribute(f, "empty", std::string());
    h5::write_attribute(f, "n", std::int64_t{42});
    h5::write_attribute(f, "x", 2.5);
    h5::write_attribute(f, "v", std::vector<std::int64_t>{3, 4, 5});
    h5::Dataset rows = h5::create_dataset(f, "rows", H5T_IEEE_F32LE, {0, 2}, {{4, 2}, 0, true});
    std::vector<float> r = {7, 8, 9, 10};
    h5::extend_rows(rows, 2);
    h5::write_rows(rows, 0, 2, r.data());
  }
  h5::File f = h5::open_file(path);
  std::vector<hsize_t> dims;
  EXPECT_EQ(h5::read_array<float>(f, "group/a", &dims), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(dims, (std::vector<hsize_t>{2, 3}));
  EXPECT_EQ(h5::read_array<std::int64_t>(f, "b"), (std::vector<std::int64_t>{-1, 1LL << 40}));
  EXPECT_EQ(h5::read_string_attribute(f, "name"), "hello");
  EXPECT_EQ(h5::read_string_attribute(f, "empty"), "");
  EXPECT_EQ(h5::read_int_attribute(f, "n"), 42);
  EXPECT_EQ(h5::read_double_attribute(f, "x"), 2.5);
  EXPECT_EQ(h5::read_int_vector_attribute(f, "v"), (std::vector<std::int64_t>{3, 4, 5}));
  h5::Dataset rows = h5::open_dataset(f, "rows");
  float second[2];
  h5::read_rows(rows, 1, 1, second);
  EXPECT_EQ(second[0], 9);
  EXPECT_EQ(second[1], 10);
  EXPECT_FALSE(h5::exists(f, "group/missing/deeper"));
  // errors name the file and object
  std::string e = error_of([&] { h5::read_array<float>(f, "nope"); });
  EXPECT_NE(e.find("a.h5"), std::string::npos) << e;
  EXPECT_NE(e.find("nope"), std::string::npos) << e;
  e = error_of([&] { h5::read_array<float>(f, "b"); });  // int64 read as float
  EXPECT_NE(e.find("/b"), std::string::npos) << e;
  e = error_of([&] { h5::read_rows(rows, 1, 5, second); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { h5::read_int_attribute(f, "zz"); }).find("missing attribute zz"), std::string::npos);
}

TEST(H5Helpers, AtomicPathLeavesNothingOnFailure) {
  ScratchDir dir;
  {
    h5::AtomicPath out(dir / "x.h5");
    h5::File f = h5::create_file(out.temp());
  }  // never committed
  EXPECT_TRUE(dir.entries().empty());
  {
    h5::AtomicPath out(dir / "x.h5");
    { h5::File f = h5::create_file(out.temp()); }
    out.commit();
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.h5"});
}

TEST(Format, OneHotRoundTrip) {
  ScratchDir dir;
  const std::vector<std::int64_t> tables = {5, 100000, 3};
  test::write_fixture(dir / "d.h5", 0, 1000, 4, tables, false, {.chunk_rows = 64});
  DatasetInfo info = open_dataset_info({dir / "d.h5"});
  EXPECT_EQ(info.rows, 1000);
  EXPECT_EQ(info.num_dense, 4);
  EXPECT_EQ(info.table_rows, tables);
  EXPECT_FALSE(info.multi_hot);
  // read back with the raw helpers, independent of the reader
  h5::File f = h5::open_file(dir / "d.h5");
  std::vector<hsize_t> dims;
  auto dense = h5::read_array<float>(f, "dense", &dims);
  ASSERT_EQ(dims, (std::vector<hsize_t>{1000, 4}));
  auto sparse = h5::read_array<std::int64_t>(f, "sparse", &dims);
  ASSERT_EQ(dims, (std::vector<hsize_t>{1000, 3}));
  auto labels = h5::read_array<float>(f, "labels");
  for (std::int64_t r = 0; r < 1000; ++r) {
    for (int d = 0; d < 4; ++d) ASSERT_EQ(dense[r * 4 + d], test::fixture_dense(r, d));
    for (int t = 0; t < 3; ++t) ASSERT_EQ(sparse[r * 3 + t], test::fixture_index(r, t, tables[t]));
    ASSERT_EQ(labels[r], test::fixture_label(r));
  }
  std::size_t size = 0;
  h5::Dataset s = h5::open_dataset(f, "sparse");
  EXPECT_EQ(h5::type_class(s, &size), H5T_INTEGER);
  EXPECT_EQ(size, 4u);  // every table fits int32
}

TEST(Format, MultiHotRoundTripCsr) {
  ScratchDir dir;
  const std::vector<std::int64_t> tables = {10, 7};
  test::write_fixture(dir / "m.h5", 0, 300, 2, tables, true, {.chunk_rows = 32, .gzip_level = 3});
  DatasetInfo info = open_dataset_info({dir / "m.h5"});
  EXPECT_TRUE(info.multi_hot);
  h5::File f = h5::open_file(dir / "m.h5");
  for (int t = 0; t < 2; ++t) {
    auto offsets = h5::read_array<std::int64_t>(f, "sparse/" + std::to_string(t) + "/offsets");
    auto indices = h5::read_array<std::int64_t>(f, "sparse/" + std::to_string(t) + "/indices");
    ASSERT_EQ(offsets.size(), 301u);
    ASSERT_EQ(offsets[0], 0);
    for (std::int64_t r = 0; r < 300; ++r) {
      auto bag = test::fixture_bag(r, t, tables[t]);
      ASSERT_EQ(offsets[r + 1] - offsets[r], static_cast<std::int64_t>(bag.size()));
      for (std::size_t k = 0; k < bag.size(); ++k) ASSERT_EQ(indices[offsets[r] + k], bag[k]);
    }
  }
}

// Builds a valid file, then lets `damage` break it with raw HDF5 calls.
template <class Damage>
std::string open_error_after(const std::string& path, Damage&& damage) {
  test::write_fixture(path, 0, 50, 3, {4, 4}, false);
  {
    h5::File f = h5::open_file(path, true);
    damage(f);
  }
  return error_of([&] { open_dataset_info({path}); });
}

TEST(Format, LayoutErrorsNameFileAndDataset) {
  ScratchDir dir;
  std::string e = open_error_after(dir / "a.h5", [](hid_t f) { H5Ldelete(f, "labels", H5P_DEFAULT); });
  EXPECT_NE(e.find("a.h5"), std::string::npos) << e;
  EXPECT_NE(e.find("missing dataset labels"), std::string::npos) << e;

  e = open_error_after(dir / "b.h5", [](hid_t f) {
    H5Ldelete(f, "dense", H5P_DEFAULT);
    std::vector<std::int32_t> wrong(150, 0);
    h5::write_array(f, "dense", wrong.data(), {50, 3});
  });
  EXPECT_NE(e.find("b.h5:/dense"), std::string::npos) << e;
  EXPECT_NE(e.find("float32"), std::string::npos) << e;

  e = open_error_after(dir / "c.h5", [](hid_t f) {
    H5Ldelete(f, "dense", H5P_DEFAULT);
    std::vector<float> wrong(49 * 3, 0);
    h5::write_array(f, "dense", wrong.data(), {49, 3});
  });
  EXPECT_NE(e.find("c.h5:/dense: shape [49, 3], expected [50, 3]"), std::string::npos) << e;

  e = open_error_after(dir / "d.h5", [](hid_t f) { h5::write_attribute(f, "format_version", std::int64_t{99}); });
  EXPECT_NE(e.find("format_version 99"), std::string::npos) << e;

  e = open_error_after(dir / "e.h5", [](hid_t f) { h5::write_attribute(f, "format", std::string("other")); });
  EXPECT_NE(e.find("not a recmix dataset"), std::string::npos) << e;

  e = open_error_after(dir / "f.h5", [](hid_t f) { H5Ldelete(f, "sparse", H5P_DEFAULT); });
  EXPECT_NE(e.find("missing dataset sparse"), std::string::npos) << e;
  // Required attributes present, of the documented type, agreeing with the data.
  e = open_error_after(dir / "g.h5", [](hid_t f) { h5::write_attribute(f, "num_tables", std::int64_t{3}); });
  EXPECT_NE(e.find("num_tables (3) disagrees"), std::string::npos) << e;
  e = open_error_after(dir / "h.h5", [](hid_t f) { H5Adelete(f, "rows"); });
  EXPECT_NE(e.find("required attribute rows is missing"), std::string::npos) << e;
  e = open_error_after(dir / "i.h5", [](hid_t f) {
    H5Adelete(f, "table_rows");
    h5::write_attribute(f, "table_rows", std::vector<double>{4.0, 4.0});
  });
  EXPECT_NE(e.find("table_rows"), std::string::npos) << e;
  EXPECT_NE(e.find("must be an integer"), std::string::npos) << e;
}

// A /labels shorter than /dense and the rows attribute is named as the culprit, not /dense.
TEST(Format, ShortLabelsAreNamed) {
  ScratchDir dir;
  const std::string e = open_error_after(dir / "l.h5", [](hid_t f) {
    H5Ldelete(f, "labels", H5P_DEFAULT);
    std::vector<float> shorter(40, 0.f);
    h5::write_array(f, "labels", shorter.data(), {40});
  });
  EXPECT_NE(e.find("l.h5:/labels: 40 rows, but /dense and the attribute rows have 50"), std::string::npos) << e;
}

// A directory (or anything but a regular file) is one line naming it, before HDF5 reads it.
TEST(Format, DirectoryIsNamedNotOpened) {
  ScratchDir dir;
  std::filesystem::create_directories(dir / "data.h5");
  const std::string e = error_of([&] { open_dataset_info({dir / "data.h5"}); });
  EXPECT_NE(e.find("data.h5: is a directory, not an HDF5 file"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// Found by the structured dataset fuzzer (fuzz/dataset_edits_fuzz.cpp); each failed or misread
// before its fix.
TEST(Format, FuzzFindingsAreClearErrors) {
  ScratchDir dir;
  // multi_hot other than 0 or 1 was read as multi-hot.
  std::string e = open_error_after(dir / "a.h5", [](hid_t f) { h5::write_attribute(f, "multi_hot", std::int64_t{2}); });
  EXPECT_NE(e.find("attribute multi_hot is 2"), std::string::npos) << e;
  // A string attribute holding several strings was read into room for one (a stack overflow).
  e = open_error_after(dir / "b.h5", [](hid_t f) {
    H5Adelete(f, "format");
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 16);
    const hsize_t three = 3;
    hid_t space = H5Screate_simple(1, &three, nullptr);
    hid_t a = H5Acreate2(f, "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char text[48] = "recmix-dataset";
    H5Awrite(a, type, text);
    H5Aclose(a), H5Sclose(space), H5Tclose(type);
  });
  EXPECT_NE(e.find("attribute format: holds 3 strings, not one"), std::string::npos) << e;
  // ... and an extra attribute of that kind made `recmix data inspect` refuse a valid file.
  test::write_fixture(dir / "c.h5", 0, 50, 3, {4, 4}, false);
  {
    h5::File f = h5::open_file(dir / "c.h5", true);
    h5::write_attribute(f, "note", std::vector<std::int64_t>{1, 2});
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 4);
    const hsize_t two = 2;
    hid_t space = H5Screate_simple(1, &two, nullptr);
    hid_t a = H5Acreate2(f, "notes", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, "abcdefgh");
    H5Aclose(a), H5Sclose(space), H5Tclose(type);
  }
  InspectReport r = inspect_file(dir / "c.h5");
  EXPECT_TRUE(r.problem.empty()) << r.problem;
  // Stored access counts summing past int64 overflowed (undefined behaviour) in inspect and in
  // the trainer's sum over files; a negative count was taken as is.
  for (std::int64_t bad : {std::numeric_limits<std::int64_t>::max(), std::int64_t{-1}}) {
    const std::string path = dir / (bad < 0 ? "negative.h5" : "overflow.h5");
    test::write_fixture(path, 0, 50, 3, {4, 4}, false);
    {
      h5::File f = h5::open_file(path, true);
      h5::create_group(f, "access_counts");
      std::vector<std::int64_t> counts{10, bad, 1, 1};
      h5::write_array(f, "access_counts/0", counts.data(), {4});
    }
    r = inspect_file(path);
    const std::string want = bad < 0 ? "row 1 has a negative count" : "counts sum to more than the 50 indices of table 0";
    EXPECT_NE(r.problem.find(want), std::string::npos) << r.problem;
    EXPECT_NE(r.problem.find("/access_counts/0"), std::string::npos) << r.problem;
    e = error_of([&] { read_access_counts(path, open_file_info(path), 0); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
  }
  // A max_bag below a row's bag was accepted (it sizes the tiered tables' staging slots).
  test::write_fixture(dir / "bag.h5", 0, 50, 3, {40, 40}, true);  // bags of 0 to 3 indices
  {
    h5::File f = h5::open_file(dir / "bag.h5", true);
    H5Adelete(f, "max_bag");
    h5::write_attribute(f, "max_bag", std::vector<std::int64_t>{3, 2});
  }
  r = inspect_file(dir / "bag.h5", true);
  EXPECT_NE(r.problem.find("a bag of 3 indices, above the attribute max_bag's 2 for table 1"), std::string::npos)
      << r.problem;
  EXPECT_NE(r.problem.find("sparse/1/offsets"), std::string::npos) << r.problem;
}

// A damaged compressed chunk: the read names the file, the dataset and the rows asked for.
TEST(H5Helpers, DamagedChunkNamesFileDatasetAndRows) {
  ScratchDir dir;
  const std::string path = dir / "damaged.h5";
  std::vector<float> values(10000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) * 0.5f;
  haddr_t address = 0;
  hsize_t size = 0;
  {
    h5::File f = h5::create_file(path);
    h5::write_array(f, "x", values.data(), {10000}, {{1000}, 6, false});
    h5::Dataset d = h5::open_dataset(f, "x");
    const hsize_t chunk_start[1] = {3000};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(d, chunk_start, &mask, &address, &size), 0);
  }
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(address + size / 4));
    const std::string garbage(static_cast<std::size_t>(size / 2), '\xff');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  h5::File f = h5::open_file(path);
  h5::Dataset d = h5::open_dataset(f, "x");
  std::vector<float> out(1000);
  h5::read_rows(d, 1000, 1000, out.data());  // an undamaged chunk
  EXPECT_EQ(out[5], values[1005]);
  const std::string e = error_of([&] { h5::read_rows(d, 2500, 1000, out.data()); });
  EXPECT_NE(e.find("damaged.h5:/x rows [2500, 3500)"), std::string::npos) << e;
}

TEST(Format, NotHdf5AndTruncatedFiles) {
  ScratchDir dir;
  test::write_text(dir / "text.h5", "label\tI1\n0\t1\n");
  std::string e = error_of([&] { open_dataset_info({dir / "text.h5"}); });
  EXPECT_NE(e.find("text.h5"), std::string::npos) << e;
  EXPECT_NE(e.find("not an HDF5 file"), std::string::npos) << e;

  EXPECT_NE(error_of([&] { open_dataset_info({dir / "absent.h5"}); }).find("absent.h5: no such file"),
            std::string::npos);

  // a real file cut in the middle: must give an error, never a crash
  test::write_fixture(dir / "full.h5", 0, 20000, 13, {1000, 1000}, false);
  const auto size = std::filesystem::file_size(dir / "full.h5");
  for (double keep : {0.5, 0.9, 0.999}) {
    std::filesystem::copy_file(dir / "full.h5", dir / "cut.h5", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(dir / "cut.h5", static_cast<std::uintmax_t>(size * keep));
    e = error_of([&] {
      Reader reader({dir / "cut.h5"}, {.global_batch = 4096, .prefetch = 0});
      Batch b;
      while (reader.next(b)) {
      }
    });
    EXPECT_NE(e.find("cut.h5"), std::string::npos) << keep << ": " << e;
  }
}

TEST(Format, MultiFileMustAgree) {
  ScratchDir dir;
  test::write_fixture(dir / "a.h5", 0, 10, 3, {4, 4}, false);
  test::write_fixture(dir / "b.h5", 10, 10, 3, {4, 5}, false);
  std::string e = error_of([&] { open_dataset_info({dir / "a.h5", dir / "b.h5"}); });
  EXPECT_NE(e.find("b.h5"), std::string::npos) << e;
  EXPECT_NE(e.find("must agree"), std::string::npos) << e;
}

// embedding_init_rows (each table's initial bound): optional, one entry a table, each at least 1,
// the same in every file of a dataset; a wrong one is an error naming the file.
TEST(Format, EmbeddingInitRows) {
  ScratchDir dir;
  test::write_fixture(dir / "a.h5", 0, 10, 3, {4, 4}, false);
  test::write_fixture(dir / "b.h5", 10, 10, 3, {4, 4}, false);
  EXPECT_TRUE(open_file_info(dir / "a.h5").init_rows.empty());
  auto set = [&](const std::string& file, std::vector<std::int64_t> rows) {
    h5::File f = h5::open_file(dir / file, true);
    if (h5::has_attribute(f, "embedding_init_rows")) H5Adelete(f, "embedding_init_rows");
    h5::write_attribute(f, "embedding_init_rows", rows);
  };
  set("a.h5", {4000, 40});
  EXPECT_EQ(open_file_info(dir / "a.h5").init_rows, (std::vector<std::int64_t>{4000, 40}));
  std::string e = error_of([&] { open_dataset_info({dir / "a.h5", dir / "b.h5"}); });
  EXPECT_NE(e.find("b.h5: num_dense, table_rows, embedding_init_rows or layout differ"), std::string::npos) << e;
  set("b.h5", {4000, 40});
  EXPECT_EQ(open_dataset_info({dir / "a.h5", dir / "b.h5"}).init_rows, (std::vector<std::int64_t>{4000, 40}));
  set("a.h5", {4000});
  e = error_of([&] { open_file_info(dir / "a.h5"); });
  EXPECT_NE(e.find("a.h5: attribute embedding_init_rows has 1 entries for 2 tables"), std::string::npos) << e;
  set("a.h5", {4000, 0});
  e = error_of([&] { open_file_info(dir / "a.h5"); });
  EXPECT_NE(e.find("a.h5: attribute embedding_init_rows holds 0, below 1"), std::string::npos) << e;
}

// Writes a file with one bad value and reads it: the error names file, dataset and row, the same
// whether batches are read ahead or not, packed or one CSR per table.
TEST(Format, ValueErrorsOnReadNameRow) {
  ScratchDir dir;
  auto read_all = [](const std::string& path, bool validate) {
    std::string first;
    for (bool packed : {false, true})
      for (int prefetch : {2, 0}) {
        const std::string e = error_of([&] {
          Reader reader({path}, {.global_batch = 16, .prefetch = prefetch, .drop_last = false, .validate = validate,
                                 .packed_one_hot = packed});
          Batch b;
          while (reader.next(b)) {
          }
        });
        if (!packed && prefetch == 2)
          first = e;
        else
          EXPECT_EQ(e, first) << path << " packed " << packed << ", prefetch " << prefetch;
      }
    return first;
  };
  auto write_with = [&](const std::string& name, std::int64_t bad_row, auto&& change) {
    DatasetWriter w(dir / name, 2, {10, 10}, false, {.chunk_rows = 8});
    for (std::int64_t r = 0; r < 40; ++r) {
      float dense[2] = {1, 2}, label = 0;
      std::int64_t idx[2] = {1, 2};
      if (r == bad_row) change(dense, label, idx);
      w.append(1, dense, &label, idx);
    }
    w.finish();
  };
  write_with("idx.h5", 27, [](float*, float&, std::int64_t* idx) { idx[1] = 10; });
  std::string e = read_all(dir / "idx.h5", true);
  EXPECT_NE(e.find("idx.h5:/sparse row 27"), std::string::npos) << e;
  EXPECT_NE(e.find("index 10 outside table rows [0, 10)"), std::string::npos) << e;
  EXPECT_EQ(read_all(dir / "idx.h5", false), "(no error)");

  write_with("neg.h5", 3, [](float*, float&, std::int64_t* idx) { idx[0] = -1; });
  EXPECT_NE(read_all(dir / "neg.h5", true).find("neg.h5:/sparse row 3"), std::string::npos);

  write_with("nan.h5", 33, [](float* d, float&, std::int64_t*) { d[1] = std::numeric_limits<float>::quiet_NaN(); });
  e = read_all(dir / "nan.h5", true);
  EXPECT_NE(e.find("nan.h5:/dense row 33: column 1 is not finite"), std::string::npos) << e;

  write_with("inf.h5", 0, [](float* d, float&, std::int64_t*) { d[0] = std::numeric_limits<float>::infinity(); });
  EXPECT_NE(read_all(dir / "inf.h5", true).find("inf.h5:/dense row 0"), std::string::npos);

  write_with("label.h5", 39, [](float*, float& y, std::int64_t*) { y = 2; });
  e = read_all(dir / "label.h5", true);
  EXPECT_NE(e.find("label.h5:/labels row 39"), std::string::npos) << e;
  EXPECT_NE(e.find("outside [0, 1]"), std::string::npos) << e;

  // multi-hot: an index beyond the table, and broken offsets
  {
    DatasetWriter w(dir / "mh.h5", 1, {6}, true, {.chunk_rows = 8});
    for (std::int64_t r = 0; r < 20; ++r) {
      float d = 0;
      w.append_multi_hot(&d, 1, {r == 13 ? std::vector<std::int64_t>{1, 6} : std::vector<std::int64_t>{1, 2}});
    }
    w.finish();
  }
  e = read_all(dir / "mh.h5", true);
  EXPECT_NE(e.find("mh.h5:/sparse/0/indices row 27"), std::string::npos) << e;  // 13 * 2 + 1
  EXPECT_NE(e.find("sample row 13"), std::string::npos) << e;
  {
    h5::File f = h5::open_file(dir / "mh.h5", true);
    h5::Dataset off = h5::open_dataset(f, "sparse/0/offsets");
    std::int64_t bad = 100;
    h5::write_rows(off, 5, 1, &bad);
  }
  e = read_all(dir / "mh.h5", false);
  EXPECT_NE(e.find("mh.h5:/sparse/0/offsets row 5"), std::string::npos) << e;
}

}  // namespace
}  // namespace recmix::data
