// The Criteo converter on the real rows in shared/data/criteo: row counts, values worked out by
// hand, missing values, TSV vs CSV vs gzip giving identical files, the vocabulary mapping against
// an independent count, splits, every malformed-input case (with --strict leaving nothing), the
// limit on skipped lines, inputs that give no row, data after a gzip stream, each bad option named,
// and the outputs it refuses (existing files without replace, inputs, devices, directories, FIFOs).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>

#include "data/converter.hpp"
#include "data/h5.hpp"
#include "data/inspect.hpp"
#include "data/reader.hpp"
#include "test_util.hpp"

namespace recmix::data {
namespace {

using test::ScratchDir;

std::string sample_a() { return test::criteo_dir() + "/kaggle_sample_a.tsv"; }
std::string sample_b() { return test::criteo_dir() + "/kaggle_sample_b.tsv"; }

ConvertOptions options(std::vector<std::string> in, std::string out) {
  ConvertOptions o;
  o.inputs = std::move(in);
  o.output = std::move(out);
  o.hash_rows = 1000;
  o.progress = false;
  o.max_malformed_share = 1.0;  // the tests of what is skipped; the limit has its own
  return o;
}

struct Contents {
  std::vector<float> dense, labels;
  std::vector<std::int64_t> sparse;
  std::vector<std::int64_t> table_rows;
  bool operator==(const Contents&) const = default;
};

Contents load(const std::string& path) {
  h5::File f = h5::open_file(path);
  Contents c;
  c.dense = h5::read_array<float>(f, "dense");
  c.labels = h5::read_array<float>(f, "labels");
  c.sparse = h5::read_array<std::int64_t>(f, "sparse");
  c.table_rows = h5::read_int_vector_attribute(f, "table_rows");
  return c;
}

TEST(Converter, RealRowsByHand) {
  ScratchDir dir;
  ConvertStats s = convert_criteo(options({sample_a()}, dir / "a.h5"));
  // 100 rows: 99 end in '\n', the last one is complete but has none (not malformed)
  EXPECT_EQ(s.rows, 100);
  EXPECT_EQ(s.malformed, 0);
  Contents c = load(dir / "a.h5");
  ASSERT_EQ(c.labels.size(), 100u);
  EXPECT_EQ(c.table_rows, std::vector<std::int64_t>(26, 1000));
  // line 1: 0 | "" 0 5 4 13275 14 35 4 41 "" 4 0 4 | 05db9164 f0cf0024 ... C22 "" ... 731c3655
  EXPECT_EQ(c.labels[0], 0.0f);
  const float want1[13] = {0.0f,      0.0f,     1.791759f, 1.609438f, 9.493713f, 2.708050f, 3.583519f,
                           1.609438f, 3.737670f, 0.0f,     1.609438f, 0.0f,      1.609438f};
  for (int d = 0; d < 13; ++d) EXPECT_NEAR(c.dense[d], want1[d], 1e-5) << "I" << d + 1;
  EXPECT_EQ(c.sparse[0], 684);       // 0x05db9164 = 98275684, mod 1000
  EXPECT_EQ(c.sparse[1], 828);       // 0xf0cf0024 = 4040097828
  EXPECT_EQ(c.sparse[6], 60);        // 0x25c8362c = 633878060
  EXPECT_EQ(c.sparse[21], 0);        // C22 missing -> value 0
  EXPECT_EQ(c.sparse[25], 757);      // 0x731c3655 = 1931228757
  // line 12: 1 | 2 -1 2 1 50 1 73 4 127 1 14 0 1 | 68fd1e64 ... C19 C20 C22 C25 C26 missing
  const std::size_t r = 11;
  EXPECT_EQ(c.labels[r], 1.0f);
  EXPECT_NEAR(c.dense[r * 13 + 0], 1.098612, 1e-5);  // log(3)
  EXPECT_EQ(c.dense[r * 13 + 1], 0.0f);              // -1 clamped to 0 -> log(1)
  EXPECT_NEAR(c.dense[r * 13 + 8], 4.852030, 1e-5);  // 127 -> log(128)
  EXPECT_EQ(c.sparse[r * 26 + 0], 852);              // 0x68fd1e64 = 1761418852
  EXPECT_EQ(c.sparse[r * 26 + 11], 98);              // 0xfa20173a = 4196407098
  for (int t : {18, 19, 21, 24, 25}) EXPECT_EQ(c.sparse[r * 26 + t], 0) << "C" << t + 1;
  // attributes record how the data was made
  h5::File f = h5::open_file(dir / "a.h5");
  EXPECT_EQ(h5::read_string_attribute(f, "producer"), "recmix data convert criteo");
  EXPECT_EQ(h5::read_string_attribute(f, "categorical_mapping"), "hash");
  EXPECT_EQ(h5::read_string_attribute(f, "source_files"), sample_a());
  EXPECT_TRUE(h5::exists(f, "access_counts/25"));
  EXPECT_TRUE(inspect_file(dir / "a.h5").problem.empty());
}

TEST(Converter, RealMalformedLinesInSampleB) {
  // kaggle_sample_b.tsv has 36 lines whose trailing empty fields were dropped (37 or 38 fields)
  ScratchDir dir;
  ConvertStats s = convert_criteo(options({sample_b()}, dir / "b.h5"));
  EXPECT_EQ(s.rows, 64);
  EXPECT_EQ(s.malformed, 36);
  ASSERT_EQ(s.reported.size(), 20u);
  EXPECT_EQ(s.reported[0].line, 2);
  EXPECT_EQ(s.reported[1].line, 6);
  EXPECT_EQ(s.reported[2].line, 12);
  EXPECT_NE(s.reported[0].reason.find("wrong number of fields"), std::string::npos);
  ConvertOptions strict = options({sample_b()}, dir / "strict.h5");
  strict.strict = true;
  try {
    convert_criteo(strict);
    FAIL() << "strict conversion passed";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("kaggle_sample_b.tsv:2: wrong number of fields"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"b.h5"});  // nothing half-written
}

// The same rows as TSV, as CSV with a header and float dense values, and gzip-compressed.
TEST(Converter, TsvCsvAndGzipGiveIdenticalFiles) {
  ScratchDir dir;
  const std::string tsv = test::read_text(sample_a());
  std::string csv = "label";
  for (int i = 1; i <= 13; ++i) csv += ",I" + std::to_string(i);
  for (int i = 1; i <= 26; ++i) csv += ",C" + std::to_string(i);
  csv += "\n";
  for (const std::string& line : test::split(tsv, '\n')) {
    if (line.empty()) continue;
    auto fields = test::split(line, '\t');
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (i) csv += ",";
      csv += fields[i];
      if (i >= 1 && i <= 13 && !fields[i].empty()) csv += ".0";
    }
    csv += "\n";
  }
  test::write_text(dir / "a.csv", csv);
  gzFile gz = gzopen((dir / "a.tsv.gz").c_str(), "wb");
  gzwrite(gz, tsv.data(), static_cast<unsigned>(tsv.size()));
  gzclose(gz);

  convert_criteo(options({sample_a()}, dir / "tsv.h5"));
  ConvertStats s = convert_criteo(options({dir / "a.csv"}, dir / "csv.h5"));
  EXPECT_EQ(s.rows, 100);
  EXPECT_EQ(s.malformed, 0);
  // The header is reported as taken, with its text; the TSV without one reports none.
  ASSERT_EQ(s.headers.size(), 1u);
  EXPECT_EQ(s.headers[0].file, dir / "a.csv");
  EXPECT_EQ(s.headers[0].text.substr(0, 12), "label,I1,I2,");
  EXPECT_TRUE(convert_criteo(options({sample_a()}, dir / "tsv2.h5")).headers.empty());
  convert_criteo(options({dir / "a.tsv.gz"}, dir / "gz.h5"));
  Contents a = load(dir / "tsv.h5");
  EXPECT_TRUE(a == load(dir / "csv.h5"));
  EXPECT_TRUE(a == load(dir / "gz.h5"));
}

// Vocabulary mode against an independent count of the raw fields.
TEST(Converter, VocabularyMatchesIndependentCount) {
  ScratchDir dir;
  ConvertOptions o = options({sample_a(), sample_b()}, dir / "v.h5");
  o.mapping = "vocabulary";
  o.min_count = 2;
  ConvertStats s = convert_criteo(o);
  // reference: count C1..C26 over the well-formed (40-field) lines of both files
  std::vector<std::map<std::string, int>> counts(26);
  std::vector<std::vector<std::string>> rows;
  for (const std::string& file : {sample_a(), sample_b()})
    for (const std::string& line : test::split(test::read_text(file), '\n')) {
      auto f = test::split(line, '\t');
      if (f.size() != 40) continue;
      rows.push_back(f);
      for (int t = 0; t < 26; ++t)
        if (!f[14 + t].empty()) ++counts[t][f[14 + t]];
    }
  ASSERT_EQ(static_cast<std::int64_t>(rows.size()), s.rows);
  Contents c = load(dir / "v.h5");
  for (int t = 0; t < 26; ++t) {
    std::int64_t frequent = 0;
    for (const auto& [v, n] : counts[t]) frequent += n >= 2;
    EXPECT_EQ(c.table_rows[t], frequent + 2) << "C" << t + 1;
  }
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (int t = 0; t < 26; ++t) {
      const std::string& v = rows[r][14 + t];
      const std::int64_t id = c.sparse[r * 26 + t];
      if (v.empty()) {
        ASSERT_EQ(id, 0) << r << " " << t;
      } else if (counts[t][v] < 2) {
        ASSERT_EQ(id, 1) << r << " " << t;
      } else {
        // frequent values: id 2 + number of values seen more often (ties broken by value)
        std::int64_t more = 0;
        const std::uint64_t mine = std::stoull(v, nullptr, 16);
        for (const auto& [w, n] : counts[t])
          more += n > counts[t][v] || (n == counts[t][v] && std::stoull(w, nullptr, 16) < mine);
        ASSERT_EQ(id, 2 + more) << r << " " << t;
      }
    }
  // C6 has missing values in these rows; C9 ("a73ee510" everywhere) is the most frequent row 2
  h5::File f = h5::open_file(dir / "v.h5");
  EXPECT_EQ(h5::read_int_attribute(f, "vocabulary_min_count"), 2);
}

TEST(Converter, Splits) {
  ScratchDir dir;
  ConvertOptions o = options({sample_a(), sample_b()}, dir / "d.h5");
  o.split = "day";
  ConvertStats s = convert_criteo(o);
  ASSERT_EQ(s.outputs.size(), 2u);  // two days: train and test
  EXPECT_EQ(s.outputs[0], dir / "d_train.h5");
  EXPECT_EQ(s.output_rows, (std::vector<std::int64_t>{100, 64}));
  EXPECT_EQ(open_dataset_info({dir / "d_test.h5"}).rows, 64);

  ConvertOptions r = options({sample_a(), sample_b()}, dir / "r.h5");
  r.split = "ratio";
  r.ratios = {0.5, 0.25, 0.25};
  r.seed = 3;
  s = convert_criteo(r);
  ASSERT_EQ(s.output_rows.size(), 3u);
  EXPECT_EQ(s.output_rows[0] + s.output_rows[1] + s.output_rows[2], 164);
  EXPECT_GT(s.output_rows[0], 50);
  EXPECT_GT(s.output_rows[1], 15);
  EXPECT_GT(s.output_rows[2], 15);
  // the three parts hold together exactly the rows of the whole
  ConvertOptions all = options({sample_a(), sample_b()}, dir / "all.h5");
  convert_criteo(all);
  auto labels_sum = [](const std::string& p) {
    double sum = 0;
    for (float y : load(p).labels) sum += y;
    return sum;
  };
  EXPECT_EQ(labels_sum(dir / "r_train.h5") + labels_sum(dir / "r_val.h5") + labels_sum(dir / "r_test.h5"),
            labels_sum(dir / "all.h5"));
  ConvertOptions one_day = options({sample_a()}, dir / "x.h5");
  one_day.split = "day";
  EXPECT_THROW(convert_criteo(one_day), ConfigError);
}

// Every malformed case: skipped and reported with its line number, or fatal under --strict.
TEST(Converter, MalformedCases) {
  ScratchDir dir;
  const auto lines = test::split(test::read_text(sample_a()), '\n');
  const std::string good = lines[0];
  auto with_field = [&](int field, const std::string& value) {
    auto f = test::split(good, '\t');
    f[field] = value;
    std::string s;
    for (std::size_t i = 0; i < f.size(); ++i) s += (i ? "\t" : "") + f[i];
    return s;
  };
  struct Case {
    std::string name, text, reason;
    std::int64_t line, rows;
  };
  const std::vector<Case> cases = {
      {"fields", good + "\n" + good.substr(0, good.rfind('\t')) + "\n" + good + "\n", "wrong number of fields", 2, 2},
      {"integer", good + "\n" + good + "\n" + with_field(3, "5a") + "\n", "integer feature is not a number (field I3)", 3, 2},
      {"hex", with_field(20, "xyz") + "\n" + good + "\n", "not hexadecimal (field C7)", 1, 1},
      {"label", good + "\n" + with_field(0, "7") + "\n", "label is not 0 or 1", 2, 1},
      {"crlf", good + "\r\n" + good + "\n", "CRLF line ending (row kept)", 1, 2},
      {"truncated", good + "\n" + good + "\n" + good.substr(0, 100), "truncated last line", 3, 2},
      {"empty", good + "\n\n" + good + "\n", "empty line", 2, 2},
  };
  for (const Case& c : cases) {
    const std::string in = dir / (c.name + ".tsv");
    test::write_text(in, c.text);
    ConvertStats s = convert_criteo(options({in}, dir / (c.name + ".h5")));
    EXPECT_EQ(s.rows, c.rows) << c.name;
    EXPECT_EQ(s.malformed, 1) << c.name;
    ASSERT_EQ(s.reported.size(), 1u) << c.name;
    EXPECT_EQ(s.reported[0].line, c.line) << c.name;
    EXPECT_NE(s.reported[0].reason.find(c.reason), std::string::npos) << c.name << ": " << s.reported[0].reason;
    EXPECT_EQ(open_dataset_info({dir / (c.name + ".h5")}).rows, c.rows);
    ConvertOptions strict = options({in}, dir / (c.name + "-strict.h5"));
    strict.strict = true;
    try {
      convert_criteo(strict);
      ADD_FAILURE() << c.name << ": strict conversion passed";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(c.name + ".tsv:" + std::to_string(c.line) + ":"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir / (c.name + "-strict.h5"))) << c.name;
  }
  for (const std::string& e : dir.entries()) EXPECT_EQ(e.find(".tmp."), std::string::npos) << e;
}

TEST(Converter, FailuresLeaveNothing) {
  ScratchDir dir;
  // the second input is missing: the first was already converted into the temporary file
  EXPECT_THROW(convert_criteo(options({sample_a(), dir / "missing.tsv"}, dir / "o.h5")), IoError);
  // a gzip file cut short
  const std::string tsv = test::read_text(sample_a());
  gzFile gz = gzopen((dir / "cut.gz").c_str(), "wb");
  gzwrite(gz, tsv.data(), static_cast<unsigned>(tsv.size()));
  gzclose(gz);
  std::filesystem::resize_file(dir / "cut.gz", std::filesystem::file_size(dir / "cut.gz") / 2);
  ConvertOptions o = options({dir / "cut.gz"}, dir / "o.h5");
  o.strict = true;
  EXPECT_THROW(convert_criteo(o), Error);
  ConvertOptions bad = options({sample_a()}, dir / "no-such-dir/o.h5");
  EXPECT_THROW(convert_criteo(bad), IoError);
  for (const std::string& e : dir.entries()) EXPECT_EQ(e, "cut.gz");
}

// The message of the error `f` throws, which must be of type E ("" and a failure otherwise).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every bad option is refused with the message naming it, before anything is written.
TEST(Converter, EachBadOptionIsNamed) {
  ScratchDir dir;
  const std::vector<std::pair<std::function<void(ConvertOptions&)>, std::string>> cases = {
      {[](ConvertOptions& o) { o.inputs.clear(); }, "convert: no input files"},
      {[](ConvertOptions& o) { o.output.clear(); }, "convert: no output file (-o)"},
      {[](ConvertOptions& o) { o.format = "json"; }, "convert: --format must be auto, tsv or csv"},
      {[](ConvertOptions& o) { o.mapping = "lookup"; }, "convert: --mapping must be hash or vocabulary"},
      {[](ConvertOptions& o) { o.split = "week"; }, "convert: --split must be none, day or ratio"},
      {[](ConvertOptions& o) { o.table_rows = {10, 10}; },
       "convert: --table-rows needs 26 values (one per categorical feature)"},
      {[](ConvertOptions& o) { o.table_rows.assign(26, 10), o.table_rows[25] = 0; },
       "convert: --table-rows must be positive"},
      {[](ConvertOptions& o) { o.hash_rows = 0; }, "convert: --hash-rows must be positive"},
      {[](ConvertOptions& o) { o.min_count = 0; }, "convert: --min-count must be at least 1"},
      {[](ConvertOptions& o) { o.split = "ratio", o.ratios = {0.5, 0.5}; },
       "convert: --ratios needs three values (train, val, test)"},
      {[](ConvertOptions& o) { o.split = "ratio", o.ratios = {1.2, -0.1, -0.1}; },
       "convert: --ratios must be non-negative"},
      {[](ConvertOptions& o) { o.split = "ratio", o.ratios = {0.5, 0.2, 0.2}; }, "convert: --ratios must sum to 1"},
      {[](ConvertOptions& o) { o.split = "day"; },
       "convert: --split day needs at least two input files (one per day)"},
      {[](ConvertOptions& o) { o.mapping = "vocabulary", o.inputs.push_back("-"); },
       "convert: --mapping vocabulary reads the input twice; stdin cannot be used"},
      {[](ConvertOptions& o) { o.max_malformed_share = 1.5; },
       "convert: --max-malformed must be a count or a share between 0% and 100%"},
      // checked after the first pass, where the vocabulary's rows are counted
      {[](ConvertOptions& o) { o.mapping = "vocabulary", o.table_rows.assign(26, 5), o.table_rows[3] = 1; },
       "convert: vocabulary tables need at least 2 rows"},
  };
  for (const auto& [spoil, message] : cases) {
    ConvertOptions o = options({sample_a()}, dir / "o.h5");
    spoil(o);
    EXPECT_EQ(error_of<ConfigError>([&] { convert_criteo(o); }), message);
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Converter, OutputsThatAreRefused) {
  ScratchDir dir;
  const std::string input = dir / "in.tsv";
  test::write_text(input, test::read_text(sample_a()));
  const std::string original = test::read_text(input);

  // an existing file: kept without replace, replaced with it
  test::write_text(dir / "old.h5", "keep me");
  ConvertOptions keep = options({input}, dir / "old.h5");
  keep.replace = false;
  std::string msg = error_of<IoError>([&] { convert_criteo(keep); });
  EXPECT_TRUE(contains(msg, dir / "old.h5") && contains(msg, "already exists")) << msg;
  EXPECT_EQ(test::read_text(dir / "old.h5"), "keep me");
  EXPECT_EQ(convert_criteo(options({input}, dir / "old.h5")).rows, 100);
  EXPECT_EQ(open_dataset_info({dir / "old.h5"}).rows, 100);

  // the input itself, by its name or through a link, even with replace
  msg = error_of<IoError>([&] { convert_criteo(options({input}, input)); });
  EXPECT_TRUE(contains(msg, input) && contains(msg, "is also an input")) << msg;
  std::filesystem::create_symlink(input, dir / "link.h5");
  msg = error_of<IoError>([&] { convert_criteo(options({sample_b(), input}, dir / "link.h5")); });
  EXPECT_TRUE(contains(msg, dir / "link.h5") && contains(msg, "is also an input")) << msg;
  EXPECT_EQ(test::read_text(input), original);

  // a directory and a FIFO are never replaced
  std::filesystem::create_directory(dir / "folder.h5");
  msg = error_of<IoError>([&] { convert_criteo(options({input}, dir / "folder.h5")); });
  EXPECT_TRUE(contains(msg, dir / "folder.h5") && contains(msg, "is a directory")) << msg;
  ASSERT_EQ(::mkfifo((dir / "fifo.h5").c_str(), 0600), 0);
  msg = error_of<IoError>([&] { convert_criteo(options({input}, dir / "fifo.h5")); });
  EXPECT_TRUE(contains(msg, dir / "fifo.h5") && contains(msg, "is a FIFO")) << msg;
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "fifo.h5"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "folder.h5"));

  // a split: one existing part stops the whole conversion before anything is written
  test::write_text(dir / "d_test.h5", "keep me too");
  ConvertOptions split = options({input, sample_b()}, dir / "d.h5");
  split.split = "day";
  split.replace = false;
  msg = error_of<IoError>([&] { convert_criteo(split); });
  EXPECT_TRUE(contains(msg, dir / "d_test.h5")) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir / "d_train.h5"));
  EXPECT_EQ(test::read_text(dir / "d_test.h5"), "keep me too");
  for (const std::string& e : dir.entries()) EXPECT_EQ(e.find(".tmp."), std::string::npos) << e;
}

// The last line of defence, for a path that changed while the file was written.
TEST(Converter, AtomicPathReplacesOnlyFiles) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  {
    h5::AtomicPath out(dir / "fifo");
    test::write_text(out.temp(), "data");
    const std::string msg = error_of<IoError>([&] { out.commit(); });
    EXPECT_TRUE(contains(msg, dir / "fifo") && contains(msg, "is a FIFO")) << msg;
  }
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "fifo"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"fifo"});  // the temporary is gone
  EXPECT_THROW(h5::check_output_path("/dev/null", true), IoError);
  EXPECT_NO_THROW(h5::check_output_path(dir / "absent.h5", false));
}

TEST(Converter, InputsWithoutRowsFail) {
  ScratchDir dir;
  const std::string good = test::split(test::read_text(sample_a()), '\n')[0];
  std::string header = "label";
  for (int i = 1; i <= 13; ++i) header += "\tI" + std::to_string(i);
  for (int i = 1; i <= 26; ++i) header += "\tC" + std::to_string(i);
  test::write_text(dir / "empty.tsv", "");
  test::write_text(dir / "header.tsv", header + "\n");
  test::write_text(dir / "bad.tsv", "1\t2\t3\n\n" + good.substr(0, good.rfind('\t')) + "\n");
  test::write_text(dir / "good.tsv", good + "\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.tsv", "the input is empty"},
      {"header.tsv", "the input holds a header line and nothing else"},
      {"bad.tsv", "all 3 lines are malformed (the first, line 1: wrong number of fields"},
  };
  for (const auto& [name_, why] : cases) {
    const std::string& name = name_;  // clang 14 cannot capture a structured binding
    std::string msg = error_of<DataError>([&] { convert_criteo(options({dir / name}, dir / "out.h5")); });
    EXPECT_TRUE(contains(msg, dir / name + ": no rows to convert: " + why)) << msg;
    // with a good input beside it: still an error, naming only the empty one
    msg = error_of<DataError>([&] { convert_criteo(options({dir / "good.tsv", dir / name}, dir / "out.h5")); });
    EXPECT_TRUE(contains(msg, dir / name + ": no rows to convert")) << msg;
    EXPECT_FALSE(contains(msg, "good.tsv")) << msg;
  }
  EXPECT_EQ(convert_criteo(options({dir / "good.tsv"}, dir / "out.h5")).rows, 1);
  std::filesystem::remove(dir / "out.h5");
  for (const std::string& e : dir.entries()) EXPECT_TRUE(e.ends_with(".tsv")) << e;
}

// kaggle_sample_b.tsv: 36 of its 100 lines are skipped, the first at line 2.
TEST(Converter, MaxMalformed) {
  ScratchDir dir;
  EXPECT_EQ(ConvertOptions().max_malformed, -1);
  EXPECT_DOUBLE_EQ(ConvertOptions().max_malformed_share, 0.01);
  ConvertOptions o = options({sample_b()}, dir / "b.h5");
  o.max_malformed_share = 0.01;  // the default
  std::string msg = error_of<DataError>([&] { convert_criteo(o); });
  EXPECT_TRUE(contains(msg, "36 of 100 lines malformed") && contains(msg, "kaggle_sample_b.tsv:2: wrong number"))
      << msg;
  o.max_malformed_share = 0.35;
  EXPECT_THROW(convert_criteo(o), DataError);
  o.max_malformed_share = 0.36;
  EXPECT_EQ(convert_criteo(o).skipped, 36);
  std::filesystem::remove(dir / "b.h5");
  o.max_malformed = 35;  // a count wins over the share
  o.max_malformed_share = 1.0;
  msg = error_of<DataError>([&] { convert_criteo(o); });
  EXPECT_TRUE(contains(msg, "36 malformed lines skipped, more than --max-malformed 35") &&
              contains(msg, "kaggle_sample_b.tsv:2:"))
      << msg;
  o.max_malformed = 36;
  EXPECT_EQ(convert_criteo(o).rows, 64);
  // CRLF lines are kept: they do not count
  const std::string good = test::split(test::read_text(sample_a()), '\n')[0];
  test::write_text(dir / "crlf.tsv", good + "\r\n" + good + "\r\n");
  ConvertOptions crlf = options({dir / "crlf.tsv"}, dir / "crlf.h5");
  crlf.max_malformed = 0;
  ConvertStats s = convert_criteo(crlf);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.malformed, 2);
  EXPECT_EQ(s.skipped, 0);
}

TEST(Converter, DataAfterTheGzipStream) {
  ScratchDir dir;
  const std::string tsv = test::read_text(sample_a());
  auto gzip = [&](const std::string& text) {
    gzFile gz = gzopen((dir / "member.gz").c_str(), "wb");
    gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
    gzclose(gz);
    std::string bytes = test::read_text(dir / "member.gz");
    std::filesystem::remove(dir / "member.gz");
    return bytes;
  };
  // two members (files joined with cat) are one stream: 200 lines (tsv has no final '\n')
  test::write_text(dir / "two.gz", gzip(tsv + "\n") + gzip(tsv));
  EXPECT_EQ(convert_criteo(options({dir / "two.gz"}, dir / "two.h5")).rows, 200);
  for (const std::string& tail : {std::string("junk\n"), std::string(512, '\0'), std::string("\x1f")}) {
    const std::string whole = gzip(tsv);
    test::write_text(dir / "tail.gz", whole + tail);
    const std::string msg = error_of<DataError>([&] { convert_criteo(options({dir / "tail.gz"}, dir / "t.h5")); });
    EXPECT_TRUE(contains(msg, dir / "tail.gz: data after the end of the gzip stream, at byte " +
                                  std::to_string(whole.size())))
        << msg;
    EXPECT_FALSE(std::filesystem::exists(dir / "t.h5"));
  }
}

}  // namespace
}  // namespace recmix::data
