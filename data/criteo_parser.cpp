#include "data/criteo_parser.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

namespace recmix::data::criteo {

namespace {

// log(x + 1) for small non-negative integers, the common case, from a table.
constexpr int kLogTableSize = 4096;
struct LogTable {
  float v[kLogTableSize];
  LogTable() {
    for (int i = 0; i < kLogTableSize; ++i) v[i] = std::log(static_cast<float>(i) + 1.0f);
  }
};
const LogTable& log_table() {
  static const LogTable table;
  return table;
}

// Parses a dense field: an integer, or a decimal number as written by the CSV variant ("260.0").
bool parse_dense(const char* b, const char* e, float& out) {
  std::int64_t x = 0;
  auto [p, ec] = std::from_chars(b, e, x);
  if (ec == std::errc() && p == e) {
    out = dense_transform(x);
    return true;
  }
  if (ec == std::errc::result_out_of_range) return false;
  double d = 0;
  auto [q, ec2] = std::from_chars(b, e, d);
  if (ec2 != std::errc() || q != e || !std::isfinite(d)) return false;
  out = d <= 0 ? 0.0f : std::log(static_cast<float>(d) + 1.0f);
  return true;
}

int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;  // lower case
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

float dense_transform(std::int64_t x) {
  if (x <= 0) return 0.0f;
  if (x < kLogTableSize) return log_table().v[x];
  return std::log(static_cast<float>(x) + 1.0f);
}

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
  for (int field = 0; field < kNumFields; ++field) {
    const char* stop = static_cast<const char*>(std::memchr(p, delimiter, static_cast<std::size_t>(end - p)));
    const bool last = field == kNumFields - 1;
    if (last) {
      if (stop) return {LineError::field_count, -1};  // more than 40 fields
      stop = end;
    } else if (!stop) {
      return {LineError::field_count, -1};  // fewer than 40 fields
    }
    if (field == 0) {
      if (stop - p == 1 && (*p == '0' || *p == '1')) {
        row.label = static_cast<float>(*p - '0');
      } else {
        double d = -1;
        auto [q, ec] = std::from_chars(p, stop, d);
        if (ec != std::errc() || q != stop || !(d == 0.0 || d == 1.0)) return {LineError::bad_label, 0};
        row.label = static_cast<float>(d);
      }
    } else if (field <= kNumDense) {
      float& out = row.dense[field - 1];
      if (p == stop) {
        out = 0.0f;
        row.dense_missing |= 1u << (field - 1);
      } else if (!parse_dense(p, stop, out)) {
        return {LineError::bad_integer, field};
      }
    } else {
      const int c = field - 1 - kNumDense;
      const auto len = stop - p;
      if (len == 0) {
        row.category[c] = 0;
        row.category_missing |= 1u << c;
      } else {
        if (len > 16) return {LineError::bad_category, field};
        std::uint64_t v = 0;
        for (const char* q = p; q < stop; ++q) {
          const int d = hex_digit(static_cast<unsigned char>(*q));
          if (d < 0) return {LineError::bad_category, field};
          v = (v << 4) | static_cast<std::uint64_t>(d);
        }
        row.category[c] = v;
      }
    }
    p = stop + 1;
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
