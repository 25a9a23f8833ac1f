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

}  // namespace
}  // namespace recmix::data::criteo
