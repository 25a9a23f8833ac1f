#pragma once
// Parser of one Criteo click-log line (label, 13 integer features, 26 hexadecimal categories,
// separated by TAB in the raw release or ',' in the CSV variant; an empty field is missing).
// Hand-written on std::from_chars with no allocation: the converter's speed is this loop's speed.
// It also applies the dense transform of the reference DLRM preprocessing: log(x + 1), negative
// values clamped to 0, missing values 0.
#include <array>
#include <cstdint>
#include <string_view>

namespace recmix::data::criteo {

inline constexpr int kNumDense = 13;
inline constexpr int kNumCategorical = 26;
inline constexpr int kNumFields = 1 + kNumDense + kNumCategorical;

enum class LineError {
  none,
  field_count,      // not exactly 40 fields
  bad_label,        // label is not 0 or 1
  bad_integer,      // a dense field is not a number
  bad_category,     // a categorical field is not 1..16 hex digits
  carriage_return,  // the line ends in '\r' (CRLF file); the rest of the line parsed fine
};

struct Row {
  float label = 0;
  std::array<float, kNumDense> dense{};              // transformed: log(max(x, 0) + 1), missing 0
  std::array<std::uint64_t, kNumCategorical> category{};  // hex value; 0 when missing
  std::uint32_t dense_missing = 0;                   // bit i: dense feature i was empty
  std::uint32_t category_missing = 0;                // bit i: category i was empty
};

struct LineResult {
  LineError error = LineError::none;
  int field = -1;  // 0-based field at fault (label = 0, I1 = 1, C1 = 14), -1 for whole-line errors
};

// Parses `line` (without its '\n'). On error `row` holds garbage except when the error is
// carriage_return, where it holds the parsed row of the line without its '\r'.
LineResult parse_line(std::string_view line, char delimiter, Row& row);

// The dense transform alone (float arithmetic, as the reference: log(float(x) + 1)).
float dense_transform(std::int64_t x);

// Human-readable text of an error ("field 15 (C2) is not hexadecimal").
const char* error_text(LineError e);
// Name of field i: "label", "I1".."I13", "C1".."C26".
const char* field_name(int i);

}  // namespace recmix::data::criteo
