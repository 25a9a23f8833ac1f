#include "data/criteo_parser.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

namespace recmix::data::criteo {

namespace {

// log(x + 1) for small non-negative integers, the common case, from a table built at start-up.
constexpr int kLogTableSize = 4096;
struct LogTable {
  float v[kLogTableSize];
  LogTable() {
    for (int i = 0; i < kLogTableSize; ++i) v[i] = std::log(static_cast<float>(i) + 1.0f);
  }
};
const LogTable log_table;

// Hexadecimal digit values; 0xFF for every other byte.
struct HexTable {
  std::uint8_t v[256];
  HexTable() {
    for (int i = 0; i < 256; ++i) v[i] = 0xFF;
    for (int i = 0; i < 10; ++i) v['0' + i] = static_cast<std::uint8_t>(i);
    for (int i = 0; i < 6; ++i) v['a' + i] = v['A' + i] = static_cast<std::uint8_t>(10 + i);
  }
};
const HexTable hex_table;

inline float transform(std::int64_t x) {
  if (x <= 0) return 0.0f;
  if (x < kLogTableSize) return log_table.v[x];
  return std::log(static_cast<float>(x) + 1.0f);
}

// A dense field that is not a plain integer: a decimal number as the CSV variant writes them
// ("260.0"), or an error.
bool parse_dense_slow(const char* b, const char* e, float& out) {
  std::int64_t x = 0;
  auto [p, ec] = std::from_chars(b, e, x);
  if (ec == std::errc() && p == e) {
    out = transform(x);
    return true;
  }
  if (ec == std::errc::result_out_of_range) return false;
  double d = 0;
  auto [q, ec2] = std::from_chars(b, e, d);
  // a value beyond float range ("359e51") is as wrong as a non-number
  if (ec2 != std::errc() || q != e || !std::isfinite(d) || std::abs(d) > 3.0e38) return false;
  out = d <= 0 ? 0.0f : std::log(static_cast<float>(d) + 1.0f);
  return true;
}

}  // namespace

float dense_transform(std::int64_t x) { return transform(x); }

// One pass over the line: each field is parsed while it is scanned; only unusual fields (a
// decimal point, a very long number, an error) go through the slower general path.
LineResult parse_line(std::string_view line, char delimiter, Row& row) {
  bool carriage_return = false;
  if (!line.empty() && line.back() == '\r') {
    carriage_return = true;
    line.remove_suffix(1);
  }
  const char* p = line.data();
  const char* const end = p + line.size();
  row.dense_missing = 0;
  row.category_missing = 0;

  // label
  if (end - p >= 2 && (p[0] == '0' || p[0] == '1') && p[1] == delimiter) {
    row.label = static_cast<float>(p[0] - '0');
    p += 2;
  } else {
    const char* stop = static_cast<const char*>(std::memchr(p, delimiter, static_cast<std::size_t>(end - p)));
    if (!stop) return {LineError::field_count, -1};
    double d = -1;
    auto [q, ec] = std::from_chars(p, stop, d);
    if (ec != std::errc() || q != stop || !(d == 0.0 || d == 1.0)) return {LineError::bad_label, 0};
    row.label = static_cast<float>(d);
    p = stop + 1;
  }

  // I1..I13: never the last field, so each ends at a delimiter
  for (int d = 0; d < kNumDense; ++d) {
    if (p >= end) return {LineError::field_count, -1};
    if (*p == delimiter) {
      row.dense[d] = 0.0f;
      row.dense_missing |= 1u << d;
      ++p;
      continue;
    }
    const char* start = p;
    const bool negative = *p == '-';
    if (negative) ++p;
    const char* digits = p;
    std::uint64_t v = 0;
    while (p < end && static_cast<unsigned>(*p - '0') < 10u) v = v * 10 + static_cast<unsigned>(*p++ - '0');
    if (p < end && *p == delimiter && p > digits && p - digits <= 18) {
      row.dense[d] = negative ? 0.0f : transform(static_cast<std::int64_t>(v));
      ++p;
      continue;
    }
    const char* stop = static_cast<const char*>(std::memchr(start, delimiter, static_cast<std::size_t>(end - start)));
    if (!stop) return {LineError::field_count, -1};
    if (!parse_dense_slow(start, stop, row.dense[d])) return {LineError::bad_integer, 1 + d};
    p = stop + 1;
  }

  // C1..C26: 1 to 16 hexadecimal digits, or empty
  for (int c = 0; c < kNumCategorical; ++c) {
    const bool last = c == kNumCategorical - 1;
    if (p > end || (p == end && !last)) return {LineError::field_count, -1};
    const char* start = p;
    std::uint64_t v = 0;
    std::uint8_t h;
    while (p < end && (h = hex_table.v[static_cast<unsigned char>(*p)]) < 16u) {
      v = (v << 4) | h;
      ++p;
    }
    const int field = 1 + kNumDense + c;
    if (p < end && *p != delimiter) return {LineError::bad_category, field};
    if (last && p < end) return {LineError::field_count, -1};  // more than 40 fields
    if (!last && p == end) return {LineError::field_count, -1};
    const auto len = p - start;
    if (len > 16) return {LineError::bad_category, field};
    if (len == 0) {
      row.category[c] = 0;
      row.category_missing |= 1u << c;
    } else {
      row.category[c] = v;
    }
    ++p;
  }
  if (carriage_return) return {LineError::carriage_return, -1};
  return {};
}

const char* error_text(LineError e) {
  switch (e) {
    case LineError::none: return "ok";
    case LineError::field_count: return "wrong number of fields (expected 40)";
    case LineError::bad_label: return "label is not 0 or 1";
    case LineError::bad_integer: return "integer feature is not a number";
    case LineError::bad_category: return "categorical feature is not hexadecimal";
    case LineError::carriage_return: return "CRLF line ending";
  }
  return "?";
}

const char* field_name(int i) {
  static const char* const names[kNumFields] = {
      "label", "I1",  "I2",  "I3",  "I4",  "I5",  "I6",  "I7",  "I8",  "I9",  "I10", "I11", "I12", "I13",
      "C1",    "C2",  "C3",  "C4",  "C5",  "C6",  "C7",  "C8",  "C9",  "C10", "C11", "C12", "C13", "C14",
      "C15",   "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23", "C24", "C25", "C26"};
  return i >= 0 && i < kNumFields ? names[i] : "?";
}

}  // namespace recmix::data::criteo
