// The Criteo line parser against values worked out by hand, and every malformed-line case.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "data/criteo_parser.hpp"

namespace recmix::data::criteo {
namespace {

// Line 1 of kaggle_sample_a.tsv, copied verbatim.
const std::string kLine1 =
    "0\t\t0\t5\t4\t13275\t14\t35\t4\t41\t\t4\t0\t4\t05db9164\tf0cf0024\t6f67f7e5\t41274cd7\t25c83c98\tfbad5c96\t"
    "25c8362c\t0b153874\ta73ee510\t0e97bb27\tba0f9e8a\t623049e6\t4e4dd817\tb28479f6\te6c5b5cd\tc92f3b61\t3486227d\t"
    "b04e4670\t21ddcdc9\tb1252a9d\t60f6221e\t\t32c7478e\t43f13e8b\tea9a246c\t731c3655";

std::string replace_field(const std::string& line, int field, const std::string& value, char sep = '\t') {
  std::string out;
  int f = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == sep) {
      out += f == field ? value : line.substr(start, i - start);
      if (i < line.size()) out += sep;
      ++f;
      start = i + 1;
    }
  }
  return out;
}

TEST(CriteoParser, RealLineByHand) {
  Row row;
  LineResult r = parse_line(kLine1, '\t', row);
  ASSERT_EQ(r.error, LineError::none);
  EXPECT_EQ(row.label, 0.0f);
  // I1 missing -> 0; I2 = 0 -> log(1) = 0; I3 = 5 -> log(6) = 1.791759; I5 = 13275 -> log(13276) = 9.493713
  EXPECT_EQ(row.dense[0], 0.0f);
  EXPECT_EQ(row.dense_missing & 1u, 1u);
  EXPECT_EQ(row.dense[1], 0.0f);
  EXPECT_EQ(row.dense_missing >> 1 & 1u, 0u);
  EXPECT_NEAR(row.dense[2], 1.791759, 1e-5);
  EXPECT_NEAR(row.dense[3], 1.609438, 1e-5);
  EXPECT_NEAR(row.dense[4], 9.493713, 1e-5);
  EXPECT_NEAR(row.dense[8], 3.737670, 1e-5);  // I9 = 41 -> log(42)
  EXPECT_EQ(row.dense[9], 0.0f);              // I10 missing
  // C1 = 0x05db9164 = 98275684; C2 = 0xf0cf0024 = 4040097828; C22 missing; C26 = 0x731c3655 = 1931228757
  EXPECT_EQ(row.category[0], 98275684u);
  EXPECT_EQ(row.category[1], 4040097828u);
  EXPECT_EQ(row.category[21], 0u);
  EXPECT_EQ(row.category_missing, 1u << 21);
  EXPECT_EQ(row.category[25], 1931228757u);
}

TEST(CriteoParser, NegativeClampedAndCsvFloats) {
  Row row;
  std::string line = replace_field(kLine1, 2, "-1");
  ASSERT_EQ(parse_line(line, '\t', row).error, LineError::none);
  EXPECT_EQ(row.dense[1], 0.0f);  // negative -> 0
  // CSV variant writes dense values as floats: 260.0 -> log(261) = 5.564520
  std::string csv = replace_field(kLine1, 3, "260.0");
  for (char& c : csv)
    if (c == '\t') c = ',';
  ASSERT_EQ(parse_line(csv, ',', row).error, LineError::none);
  EXPECT_NEAR(row.dense[2], 5.564520, 1e-5);
  EXPECT_EQ(row.category[0], 98275684u);
  EXPECT_EQ(dense_transform(-5), 0.0f);
  EXPECT_EQ(dense_transform(0), 0.0f);
  EXPECT_NEAR(dense_transform(1), 0.693147, 1e-6);
  EXPECT_NEAR(dense_transform(100000), 11.512935, 1e-5);  // beyond the lookup table
}

TEST(CriteoParser, MalformedLines) {
  Row row;
  // 39 fields (last one dropped), and 41 fields
  std::string short_line = kLine1.substr(0, kLine1.rfind('\t'));
  EXPECT_EQ(parse_line(short_line, '\t', row).error, LineError::field_count);
  EXPECT_EQ(parse_line(kLine1 + "\tabc", '\t', row).error, LineError::field_count);
  EXPECT_EQ(parse_line("", '\t', row).error, LineError::field_count);
  // wrong separator: one field only
  EXPECT_EQ(parse_line(kLine1, ',', row).error, LineError::field_count);
  LineResult r = parse_line(replace_field(kLine1, 5, "12x"), '\t', row);
  EXPECT_EQ(r.error, LineError::bad_integer);
  EXPECT_EQ(r.field, 5);
  EXPECT_STREQ(field_name(r.field), "I5");
  EXPECT_EQ(parse_line(replace_field(kLine1, 5, "nan"), '\t', row).error, LineError::bad_integer);
  EXPECT_EQ(parse_line(replace_field(kLine1, 13, "359e51"), '\t', row).error, LineError::bad_integer);  // beyond float (found by the fuzzer)
  EXPECT_EQ(parse_line(replace_field(kLine1, 5, "99999999999999999999999"), '\t', row).error, LineError::bad_integer);
  r = parse_line(replace_field(kLine1, 15, "f0cf00zz"), '\t', row);
  EXPECT_EQ(r.error, LineError::bad_category);
  EXPECT_EQ(r.field, 15);
  EXPECT_STREQ(field_name(r.field), "C2");
  EXPECT_EQ(parse_line(replace_field(kLine1, 15, "00112233445566778"), '\t', row).error, LineError::bad_category);
  EXPECT_EQ(parse_line(replace_field(kLine1, 0, "2"), '\t', row).error, LineError::bad_label);
  EXPECT_EQ(parse_line(replace_field(kLine1, 0, ""), '\t', row).error, LineError::bad_label);
  // CRLF: flagged, but the row itself is parsed
  r = parse_line(kLine1 + "\r", '\t', row);
  EXPECT_EQ(r.error, LineError::carriage_return);
  EXPECT_EQ(row.category[25], 1931228757u);
}

// Integer features are 64-bit signed: every value from INT64_MIN to INT64_MAX is a number (the
// negative ones clamped to 0, as the reference preprocessing does), one past either end is
// bad_integer. Checked in the first and the last integer field, around the 18-digit fast path.
TEST(CriteoParser, IntegerFeatureRangeIsInt64) {
  Row row;
  for (int field : {1, 13}) {
    SCOPED_TRACE(testing::Message() << "field " << field_name(field));
    const int d = field - 1;
    // 18 digits (the longest the fast path reads): log(1e18 + 1) = 18 ln 10 = 41.446532
    ASSERT_EQ(parse_line(replace_field(kLine1, field, "999999999999999999"), '\t', row).error, LineError::none);
    EXPECT_NEAR(row.dense[d], 41.446532, 1e-4);
    // INT64_MAX = 2^63 - 1, 19 digits: accepted, log(2^63) = 63 ln 2 = 43.668272
    ASSERT_EQ(parse_line(replace_field(kLine1, field, "9223372036854775807"), '\t', row).error, LineError::none);
    EXPECT_NEAR(row.dense[d], 43.668272, 1e-4);
    EXPECT_EQ(row.dense_missing >> d & 1u, 0u);
    // INT64_MIN: a number, negative, so clamped to 0 (and not missing)
    ASSERT_EQ(parse_line(replace_field(kLine1, field, "-9223372036854775808"), '\t', row).error, LineError::none);
    EXPECT_EQ(row.dense[d], 0.0f);
    EXPECT_EQ(row.dense_missing >> d & 1u, 0u);
    // One past either end, and a 19-digit value that fits 64 bits unsigned but not signed
    for (const char* out_of_range : {"9223372036854775808", "-9223372036854775809", "9999999999999999999",
                                     "18446744073709551616"}) {
      SCOPED_TRACE(out_of_range);
      const LineResult r = parse_line(replace_field(kLine1, field, out_of_range), '\t', row);
      EXPECT_EQ(r.error, LineError::bad_integer);
      EXPECT_EQ(r.field, field);
    }
  }
}

// The label is 0 or 1 (written as an integer, or as a float in the CSV variant); nothing else.
TEST(CriteoParser, LabelIsZeroOrOne) {
  Row row;
  ASSERT_EQ(parse_line(replace_field(kLine1, 0, "1"), '\t', row).error, LineError::none);
  EXPECT_EQ(row.label, 1.0f);
  ASSERT_EQ(parse_line(replace_field(kLine1, 0, "0"), '\t', row).error, LineError::none);
  EXPECT_EQ(row.label, 0.0f);
  ASSERT_EQ(parse_line(replace_field(kLine1, 0, "1.0"), '\t', row).error, LineError::none);
  EXPECT_EQ(row.label, 1.0f);
  for (const char* bad : {"10", "11", "-1", "0.5", "1.5", "x"}) {
    SCOPED_TRACE(bad);
    const LineResult r = parse_line(replace_field(kLine1, 0, bad), '\t', row);
    EXPECT_EQ(r.error, LineError::bad_label);
    EXPECT_EQ(r.field, 0);
  }
}

// A categorical feature is 1 to 16 hexadecimal digits (any 64-bit value), or empty (missing).
// Checked in the first and the last field (the last one ends the line, not at a delimiter).
TEST(CriteoParser, CategoryIsOneToSixteenHexDigits) {
  Row row;
  for (int field : {14, 39}) {
    SCOPED_TRACE(testing::Message() << "field " << field_name(field));
    const int c = field - 1 - kNumDense;
    ASSERT_EQ(parse_line(replace_field(kLine1, field, "ffffffffffffffff"), '\t', row).error, LineError::none);
    EXPECT_EQ(row.category[c], 0xffffffffffffffffu);
    ASSERT_EQ(parse_line(replace_field(kLine1, field, "FEDCBA9876543210"), '\t', row).error, LineError::none);
    EXPECT_EQ(row.category[c], 0xfedcba9876543210u);
    // one digit, and zero: a value, not missing
    ASSERT_EQ(parse_line(replace_field(kLine1, field, "0"), '\t', row).error, LineError::none);
    EXPECT_EQ(row.category[c], 0u);
    EXPECT_EQ(row.category_missing >> c & 1u, 0u);
    ASSERT_EQ(parse_line(replace_field(kLine1, field, ""), '\t', row).error, LineError::none);
    EXPECT_EQ(row.category[c], 0u);
    EXPECT_EQ(row.category_missing >> c & 1u, 1u);
    // 17 digits, even when the value would fit 64 bits
    for (const char* too_long : {"10000000000000000", "0ffffffffffffffff", "00000000000000001"}) {
      SCOPED_TRACE(too_long);
      const LineResult r = parse_line(replace_field(kLine1, field, too_long), '\t', row);
      EXPECT_EQ(r.error, LineError::bad_category);
      EXPECT_EQ(r.field, field);
    }
  }
}

}  // namespace
}  // namespace recmix::data::criteo
