// The one-hot -> multi-hot expansion (the MLPerf DLRM-DCNv2 recipe): shapes, every bag's first
// index the original one, indices in range and uniform, max_bag, equal bags for equal indices,
// determinism, recounted access counts, each bad input named, an interrupted run leaving nothing,
// the real Criteo rows, and the synth preset (equal to its one-hot data expanded).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>

#include "core/error.hpp"
#include "data/converter.hpp"
#include "data/format.hpp"
#include "data/h5.hpp"
#include "data/inspect.hpp"
#include "data/multihot.hpp"
#include "data/synth.hpp"
#include "test_util.hpp"

namespace recmix::data {
namespace {

using test::ScratchDir;

// The rows of a file, whole (the files here are small).
struct Contents {
  std::vector<float> dense, labels;
  std::vector<std::int64_t> sparse;                            // one-hot [N x T]
  std::vector<std::vector<std::int64_t>> offsets, indices;     // multi-hot, per table
  std::vector<std::int64_t> max_bag;
};

Contents read_contents(const std::string& path) {
  const DatasetInfo info = open_file_info(path);
  h5::File f = h5::open_file(path);
  Contents c;
  if (info.num_dense > 0) c.dense = h5::read_array<float>(f, "dense");
  c.labels = h5::read_array<float>(f, "labels");
  if (!info.multi_hot) {
    c.sparse = h5::read_array<std::int64_t>(f, "sparse");
    return c;
  }
  for (int t = 0; t < info.num_tables(); ++t) {
    c.offsets.push_back(h5::read_array<std::int64_t>(f, "sparse/" + std::to_string(t) + "/offsets"));
    c.indices.push_back(h5::read_array<std::int64_t>(f, "sparse/" + std::to_string(t) + "/indices"));
  }
  c.max_bag = h5::read_int_vector_attribute(f, "max_bag");
  return c;
}

// A one-hot synthetic file (with access counts) of `rows` rows over small tables.
std::string one_hot(const ScratchDir& dir, const std::string& name, std::int64_t rows = 3000) {
  SynthOptions s;
  s.output = dir / name;
  s.rows = rows;
  s.table_rows = {50, 7, 1, 1000};
  s.num_dense = 3;
  s.seed = 11;
  synthesize(s);
  return s.output;
}

MultiHotOptions expansion(const std::string& in, const std::string& out, std::vector<int> sizes) {
  MultiHotOptions o;
  o.input = in;
  o.output = out;
  o.sizes = std::move(sizes);
  o.progress = false;
  o.chunk_rows = 512;  // several blocks
  return o;
}

// Every property of an expansion of `in` into `out` with bag sizes `sizes`.
void check_expansion(const std::string& in, const std::string& out, const std::vector<int>& sizes) {
  const DatasetInfo info = open_file_info(in);
  const Contents a = read_contents(in), b = read_contents(out);
  const int T = info.num_tables();
  const auto N = static_cast<std::int64_t>(a.labels.size());
  EXPECT_EQ(b.dense, a.dense);
  EXPECT_EQ(b.labels, a.labels);
  EXPECT_EQ(b.max_bag, std::vector<std::int64_t>(sizes.begin(), sizes.end()));
  EXPECT_TRUE(open_file_info(out).multi_hot);
  for (int t = 0; t < T; ++t) {
    ASSERT_EQ(static_cast<std::int64_t>(b.offsets[t].size()), N + 1);
    ASSERT_EQ(static_cast<std::int64_t>(b.indices[t].size()), N * sizes[t]);
    std::map<std::int64_t, std::vector<std::int64_t>> bag_of;  // equal indices, equal bags
    for (std::int64_t i = 0; i < N; ++i) {
      ASSERT_EQ(b.offsets[t][i], i * sizes[t]);
      const auto first = b.indices[t].begin() + i * sizes[t];
      const std::vector<std::int64_t> bag(first, first + sizes[t]);
      ASSERT_EQ(bag[0], a.sparse[i * T + t]) << "table " << t << " row " << i;
      for (std::int64_t x : bag) ASSERT_TRUE(x >= 0 && x < info.table_rows[t]) << x;
      auto [it, fresh] = bag_of.emplace(bag[0], bag);
      if (!fresh) {
        ASSERT_EQ(it->second, bag);
      }
    }
  }
  InspectReport r = inspect_file(out, true);
  EXPECT_EQ(r.problem, "");
}

TEST(MultiHot, ExpandsOneHotRows) {
  ScratchDir dir;
  const std::string in = one_hot(dir, "one.h5");
  const std::vector<int> sizes = {3, 1, 2, 5};
  MultiHotStats s = expand_to_multi_hot(expansion(in, dir / "multi.h5", sizes));
  EXPECT_EQ(s.rows, 3000);
  EXPECT_EQ(s.indices, 3000 * 11);
  EXPECT_EQ(s.access_counts, "recounted");
  check_expansion(in, dir / "multi.h5", sizes);

  // the access counts are those of the bags; the attributes record the recipe
  const Contents b = read_contents(dir / "multi.h5");
  const DatasetInfo info = open_file_info(dir / "multi.h5");
  for (int t = 0; t < 4; ++t) {
    std::vector<std::int64_t> expect(static_cast<std::size_t>(info.table_rows[t]), 0);
    for (std::int64_t x : b.indices[t]) ++expect[x];
    EXPECT_EQ(read_access_counts(dir / "multi.h5", info, t), expect) << t;
  }
  h5::File f = h5::open_file(dir / "multi.h5");
  EXPECT_EQ(h5::read_string_attribute(f, "producer"), "recmix data multihot");
  EXPECT_EQ(h5::read_string_attribute(f, "source_producer"), "recmix data synth");
  EXPECT_EQ(h5::read_int_vector_attribute(f, "multi_hot_sizes"), (std::vector<std::int64_t>{3, 1, 2, 5}));
  EXPECT_EQ(h5::read_int_attribute(f, "multi_hot_seed"), 0);
}

TEST(MultiHot, DeterministicForASeedWhateverTheBlocks) {
  ScratchDir dir;
  const std::string in = one_hot(dir, "one.h5");
  MultiHotOptions o = expansion(in, dir / "a.h5", {4, 2, 3, 6});
  o.seed = 5;
  expand_to_multi_hot(o);
  o.output = dir / "b.h5";
  o.chunk_rows = 777;
  expand_to_multi_hot(o);
  o.output = dir / "c.h5";
  o.seed = 6;
  expand_to_multi_hot(o);
  const Contents a = read_contents(dir / "a.h5"), b = read_contents(dir / "b.h5"), c = read_contents(dir / "c.h5");
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_NE(a.indices[3], c.indices[3]);
  for (int t = 0; t < 4; ++t)  // another seed changes the extra indices only
    for (std::size_t i = 0; i < a.indices[t].size(); i += o.sizes[t]) ASSERT_EQ(a.indices[t][i], c.indices[t][i]);
}

TEST(MultiHot, ExtraIndicesAreUniformOverTheTable) {
  const std::int64_t rows = 10;
  const int size = 11;
  std::vector<double> seen(rows, 0);
  std::vector<std::int64_t> bag;
  const std::int64_t indices = 10000;
  for (std::int64_t i = 0; i < indices; ++i) {
    multi_hot_bag(0, 2, i, size, rows * indices, bag);  // distinct originals
    for (int k = 1; k < size; ++k) ++seen[bag[k] % rows];
  }
  const double draws = static_cast<double>(indices) * (size - 1), p = 1.0 / rows;
  for (std::int64_t r = 0; r < rows; ++r) EXPECT_NEAR(seen[r], draws * p, 5 * std::sqrt(draws * p * (1 - p))) << r;
  multi_hot_bag(0, 0, 3, 1, 7, bag);
  EXPECT_EQ(bag, std::vector<std::int64_t>{3});
}

// The error's type and a piece of its message.
template <class E>
void expect_error(const MultiHotOptions& o, const std::string& text) {
  try {
    expand_to_multi_hot(o);
    ADD_FAILURE() << "no error; expected " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(MultiHot, BadInputsAreNamed) {
  ScratchDir dir;
  const std::string in = one_hot(dir, "one.h5", 100);
  const std::vector<int> ok = {1, 2, 3, 4};
  expect_error<IoError>(expansion(dir / "missing.h5", dir / "o.h5", ok), "missing.h5: no such file");
  expect_error<IoError>(expansion(dir.path(), dir / "o.h5", ok), ": not a regular file");
  test::write_text(dir / "text.h5", "not hdf5\n");
  expect_error<Error>(expansion(dir / "text.h5", dir / "o.h5", ok), "text.h5");
  expect_error<ConfigError>(expansion(in, dir / "o.h5", {1, 2}), "--sizes: 2 values for the 4 tables of");
  expect_error<ConfigError>(expansion(in, dir / "o.h5", {1, 0, 3, 4}), "table 1 has bag size 0");
  expand_to_multi_hot(expansion(in, dir / "multi.h5", ok));
  expect_error<DataError>(expansion(dir / "multi.h5", dir / "o.h5", ok), "multi.h5: already multi-hot");
  expect_error<IoError>(expansion(in, dir / "multi.h5", ok), "multi.h5: already exists; --force replaces it");
  MultiHotOptions self = expansion(in, in, ok);
  self.replace = true;
  expect_error<IoError>(self, "is the input of the expansion");
  EXPECT_FALSE(std::filesystem::exists(dir / "o.h5"));
}

TEST(MultiHot, AnInterruptedRunLeavesNoFile) {
  ScratchDir dir;
  const std::string in = one_hot(dir, "one.h5");
  MultiHotOptions o = expansion(in, dir / "multi.h5", {2, 2, 2, 2});
  o.fail_after_rows = 1024;
  expect_error<IoError>(o, "injected failure after 1024 rows");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"one.h5"});
  // with --force, a file already there is kept as it was
  test::write_text(dir / "multi.h5", "before");
  o.replace = true;
  expect_error<IoError>(o, "injected failure");
  EXPECT_EQ(test::read_text(dir / "multi.h5"), "before");
  EXPECT_EQ(dir.entries().size(), 2u);
}

TEST(MultiHot, RealCriteoRowsWithTheBenchmarkSizes) {
  ScratchDir dir;
  ConvertOptions c;
  c.inputs = {test::criteo_dir() + "/kaggle_sample_a.tsv"};
  c.output = dir / "criteo.h5";
  c.hash_rows = 1000;
  c.progress = false;
  convert_criteo(c);
  MultiHotStats s = expand_to_multi_hot(expansion(dir / "criteo.h5", dir / "multi.h5", mlperf_dcnv2_bag_sizes()));
  EXPECT_EQ(s.rows, 100);
  EXPECT_EQ(s.indices, 100 * 214);
  check_expansion(dir / "criteo.h5", dir / "multi.h5", mlperf_dcnv2_bag_sizes());
}

TEST(MultiHot, TheBenchmarkConstants) {
  const std::vector<int>& sizes = mlperf_dcnv2_bag_sizes();
  ASSERT_EQ(sizes.size(), 26u);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), 0), 214);
  const std::vector<std::int64_t>& rows = mlperf_dcnv2_table_rows();
  ASSERT_EQ(rows.size(), 26u);
  EXPECT_EQ(*std::max_element(rows.begin(), rows.end()), 40000000);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 40000000), 5);
  EXPECT_EQ(rows[5], 3);
}

TEST(SynthPreset, MlperfDcnv2IsItsOneHotDataExpanded) {
  ScratchDir dir;
  SynthOptions p;
  apply_mlperf_dcnv2_preset(p, 1000);
  ASSERT_EQ(p.table_rows.size(), 26u);
  for (std::size_t t = 0; t < 26; ++t)
    EXPECT_EQ(p.table_rows[t], std::max<std::int64_t>(1, (mlperf_dcnv2_table_rows()[t] + 999) / 1000)) << t;
  EXPECT_EQ(p.table_rows[0], 40000);
  EXPECT_EQ(p.table_rows[5], 1);
  EXPECT_EQ(p.num_dense, 13);
  p.output = dir / "preset.h5";
  p.rows = 1500;
  p.seed = 4;
  synthesize(p);

  SynthOptions one = p;  // the same rows one-hot, then expanded
  one.output = dir / "one.h5";
  one.multi_hot = false;
  one.bag_sizes.clear();
  one.pooling_min = one.pooling_max = 1;
  one.preset.clear();
  synthesize(one);
  MultiHotOptions m = expansion(one.output, dir / "expanded.h5", mlperf_dcnv2_bag_sizes());
  m.seed = 4;
  expand_to_multi_hot(m);
  check_expansion(one.output, dir / "preset.h5", mlperf_dcnv2_bag_sizes());
  const Contents a = read_contents(dir / "preset.h5"), b = read_contents(dir / "expanded.h5");
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.labels, b.labels);
  h5::File f = h5::open_file(dir / "preset.h5");
  EXPECT_EQ(h5::read_string_attribute(f, "preset"), "mlperf-dcnv2");
  EXPECT_EQ(h5::read_int_attribute(f, "preset_scale"), 1000);
  // The scaled tables start as the benchmark's: their initial bounds take its rows.
  EXPECT_EQ(open_file_info(dir / "preset.h5").init_rows, mlperf_dcnv2_table_rows());
  EXPECT_TRUE(open_file_info(one.output).init_rows.empty());

  EXPECT_THROW(apply_mlperf_dcnv2_preset(p, 0), ConfigError);
  apply_mlperf_dcnv2_preset(p, 1);
  EXPECT_EQ(p.table_rows, mlperf_dcnv2_table_rows());
}

}  // namespace
}  // namespace recmix::data
