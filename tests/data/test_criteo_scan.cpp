// The converter's scan over its inputs, on two small files written here: which lines come back as
// rows (with their input and line numbers), what the counting pass tallies and reports for a
// header, an empty line, a CRLF line, a short line and a truncated last line, what it leaves alone
// in the other pass, --strict and --max-malformed, and the progress line's ending.
#include "data/criteo_scan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "core/error.hpp"
#include "test_util.hpp"

namespace recmix::data::detail {
namespace {

using test::ScratchDir;

// A well-formed line: the label, I1..I13 = 1..13, C1..C26 = a0..a25, separated by `sep`.
std::string row_line(int label, char sep) {
  std::string s = std::to_string(label);
  for (int i = 1; i <= 13; ++i) (s += sep) += std::to_string(i);
  for (int t = 0; t < 26; ++t) (s += sep) += 'a' + std::to_string(t);
  return s;
}

// Two inputs: five TSV lines (a row; an empty line; a CRLF row; two fields; a row without '\n'),
// then three CSV lines (a header; a row; a row cut short without '\n').
struct Inputs {
  ScratchDir dir;
  std::string tsv = dir / "one.tsv", csv = dir / "two.csv";
  Inputs() {
    test::write_text(tsv, row_line(1, '\t') + "\n\n" + row_line(0, '\t') + "\r\n0\t1\n" + row_line(1, '\t'));
    test::write_text(csv, "label,I1,I2\n" + row_line(0, ',') + "\n" + row_line(1, ',').substr(0, 30));
  }
  ConvertOptions options() const {
    ConvertOptions o;
    o.inputs = {tsv, csv};
    o.output = dir / "out.h5";
    o.progress = false;
    return o;
  }
};

// (input, line, label) of each row a pass gives
using Seen = std::vector<std::tuple<std::size_t, std::int64_t, float>>;

Seen run_pass(CriteoScan& scan, bool counting) {
  Seen seen;
  scan.for_each_row(counting, [&](const criteo::Row& row, std::size_t input, std::int64_t line) {
    EXPECT_FLOAT_EQ(row.dense[2], std::log(4.0f)) << line;  // I3 = 3
    EXPECT_EQ(row.category[25], 0xa25u) << line;
    seen.emplace_back(input, line, row.label);
  });
  return seen;
}

const Seen kRows = {{0, 1, 1.0f}, {0, 3, 0.0f}, {0, 5, 1.0f}, {1, 2, 0.0f}};
const std::string kShort = "wrong number of fields (expected 40)";

TEST(CriteoScan, DelimiterAndHeader) {
  EXPECT_EQ(detect_delimiter("1,2\t3", "tsv", "f"), '\t');
  EXPECT_EQ(detect_delimiter("1\t2", "csv", "f"), ',');
  EXPECT_EQ(detect_delimiter("1\t2,3", "auto", "f"), '\t');
  EXPECT_EQ(detect_delimiter("1,2", "auto", "f"), ',');
  try {
    detect_delimiter("1234", "auto", "in.tsv");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "in.tsv: line 1 has neither TAB nor ',' separators (not a Criteo file?)");
  }
  EXPECT_TRUE(is_header("label\tI1"));
  EXPECT_TRUE(is_header("Label"));
  EXPECT_FALSE(is_header("1\tab"));
  EXPECT_FALSE(is_header(""));
}

TEST(CriteoScan, CountingPassTalliesEachLine) {
  Inputs in;
  const ConvertOptions o = in.options();
  ConvertStats stats;
  CriteoScan scan(o, stats);
  // the first pass (as the vocabulary's) gives the same rows and counts nothing
  EXPECT_EQ(run_pass(scan, false), kRows);
  EXPECT_EQ(stats.lines + stats.malformed + stats.skipped + stats.bytes, 0);
  EXPECT_TRUE(stats.reported.empty());
  EXPECT_EQ(scan.tally()[0].lines + scan.tally()[1].lines, 0);

  EXPECT_EQ(run_pass(scan, true), kRows);
  EXPECT_EQ(stats.lines, 8);
  EXPECT_EQ(stats.malformed, 4);
  EXPECT_EQ(stats.skipped, 3);  // the CRLF row is kept
  EXPECT_EQ(stats.bytes, static_cast<std::int64_t>(std::filesystem::file_size(in.tsv) +
                                                    std::filesystem::file_size(in.csv)));
  EXPECT_EQ(stats.rows, 0);  // rows are the writer's to count
  const std::vector<std::tuple<std::string, std::int64_t, std::string>> reported = {
      {in.tsv, 2, "empty line"},
      {in.tsv, 3, "CRLF line ending (row kept)"},
      {in.tsv, 4, kShort},
      {in.csv, 3, "truncated last line: " + kShort}};
  ASSERT_EQ(stats.reported.size(), reported.size());
  for (std::size_t i = 0; i < reported.size(); ++i)
    EXPECT_EQ(std::tie(stats.reported[i].file, stats.reported[i].line, stats.reported[i].reason), reported[i]) << i;

  const InputTally& one = scan.tally()[0];
  const InputTally& two = scan.tally()[1];
  EXPECT_EQ(std::tie(one.lines, one.rows, one.skipped, one.header), std::make_tuple(5, 3, 2, false));
  EXPECT_EQ(std::tie(two.lines, two.rows, two.skipped, two.header), std::make_tuple(3, 1, 1, true));
  EXPECT_EQ(one.first_skipped.line, 2);
  EXPECT_EQ(two.first_skipped.line, 3);
  EXPECT_EQ(std::tie(scan.first_skipped().file, scan.first_skipped().line), std::make_tuple(in.tsv, 2));
}

TEST(CriteoScan, StrictAndMaxMalformed) {
  Inputs in;
  ConvertOptions o = in.options();
  o.strict = true;
  ConvertStats stats;
  CriteoScan strict(o, stats);
  EXPECT_EQ(run_pass(strict, false), kRows);  // only the counting pass judges lines
  try {
    run_pass(strict, true);
    ADD_FAILURE() << "strict pass went through";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), in.tsv + ":2: empty line (--strict)");
  }

  o.strict = false;
  o.max_malformed = 2;
  o.max_reported = 1;
  ConvertStats limited;
  CriteoScan scan(o, limited);
  try {
    run_pass(scan, true);
    ADD_FAILURE() << "a third skipped line went through";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "3 malformed lines skipped, more than --max-malformed 2 allows; the first: " +
                                         in.tsv + ":2: empty line");
  }
  EXPECT_EQ(limited.reported.size(), 1u);
  EXPECT_EQ(limited.malformed, 4);
}

// A progress line left open is ended by a newline, once; a finished one gets no second newline.
TEST(CriteoScan, ProgressLineEnds) {
  Inputs in;
  ConvertOptions o = in.options();
  o.progress = true;
  ConvertStats stats;
  stats.rows = 3;
  auto newlines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };

  testing::internal::CaptureStderr();
  {
    ScanProgress progress(o, 1);
    LineSource src(in.tsv);
    progress.report(src, stats, false);
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(newlines(err), 1) << err;
  EXPECT_TRUE(err.ends_with("\n")) << err;

  testing::internal::CaptureStderr();
  {
    ScanProgress progress(o, 1);
    LineSource src(in.tsv);
    progress.report(src, stats, false);
    progress.report(src, stats, true);
  }
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(newlines(err), 1) << err;
  EXPECT_TRUE(err.starts_with("\rconvert: 3 rows, ")) << err;
  EXPECT_TRUE(err.ends_with(" MB/s, ETA 0s   \n")) << err;

  o.progress = false;
  testing::internal::CaptureStderr();
  {
    ScanProgress progress(o, 1);
    LineSource src(in.tsv);
    progress.report(src, stats, false);
    progress.report(src, stats, true);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace recmix::data::detail
