// Fuzz target for the Criteo line parser (data/criteo_parser.hpp). Built with libFuzzer when the
// compiler is clang (RECMIX_FUZZ=ON), and always as a replay of the corpus in fuzz/corpus/criteo_line.
// Input byte 0 picks the mode:
//   even: the rest is raw text, split at '\n' and parsed as TSV and as CSV lines; a line that
//         parses must give a label of 0 or 1, finite non-negative dense values and 0 for every
//         missing category;
//   odd:  the rest seeds the fields of a well-formed line, which must parse to exactly those values.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "data/criteo_parser.hpp"

namespace {

using namespace recmix::data::criteo;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "criteo line fuzz: %s\n", what);
    std::abort();
  }
}

void check_raw(std::string_view text, char delimiter) {
  Row row;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    LineResult r = parse_line(line, delimiter, row);
    require(r.field >= -1 && r.field < kNumFields, "field index out of range");
    if (r.error != LineError::none && r.error != LineError::carriage_return) continue;
    require(row.label == 0.0f || row.label == 1.0f, "label not 0 or 1");
    for (int d = 0; d < kNumDense; ++d) require(std::isfinite(row.dense[d]) && row.dense[d] >= 0, "bad dense value");
    for (int c = 0; c < kNumCategorical; ++c)
      if (row.category_missing >> c & 1u) require(row.category[c] == 0, "missing category not 0");
  }
}

// Builds a valid line from the bytes and checks the parse gives back exactly its values.
void check_structured(const std::uint8_t* data, std::size_t size) {
  std::size_t at = 0;
  auto byte = [&]() -> std::uint64_t { return at < size ? data[at++] : 0; };
  const char delimiter = byte() & 1 ? ',' : '\t';
  std::string line = byte() & 1 ? "1" : "0";
  std::int64_t dense[kNumDense];
  std::uint32_t dense_missing = 0;
  for (int d = 0; d < kNumDense; ++d) {
    const std::uint64_t b = byte();
    dense[d] = static_cast<std::int64_t>((byte() << 8 | byte()) << (b % 24)) - (b & 0x80 ? 1000 : 0);
    line += delimiter;
    if (b % 5 == 0) {
      dense_missing |= 1u << d;
    } else {
      line += std::to_string(dense[d]);
    }
  }
  std::uint64_t cat[kNumCategorical];
  std::uint32_t cat_missing = 0;
  for (int c = 0; c < kNumCategorical; ++c) {
    const std::uint64_t b = byte();
    cat[c] = byte() << 24 | byte() << 16 | byte() << 8 | byte();
    line += delimiter;
    if (b % 7 == 0) {
      cat_missing |= 1u << c;
    } else {
      char hex[17];
      std::snprintf(hex, sizeof hex, b & 1 ? "%08llx" : "%llX", static_cast<unsigned long long>(cat[c]));
      line += hex;
    }
  }
  Row row;
  LineResult r = parse_line(line, delimiter, row);
  require(r.error == LineError::none, "well-formed line rejected");
  require(row.label == (line[0] == '1' ? 1.0f : 0.0f), "label differs");
  require(row.dense_missing == dense_missing && row.category_missing == cat_missing, "missing flags differ");
  for (int d = 0; d < kNumDense; ++d) {
    const float want = dense_missing >> d & 1u ? 0.0f : dense_transform(dense[d]);
    require(row.dense[d] == want, "dense value differs");
  }
  for (int c = 0; c < kNumCategorical; ++c)
    require(row.category[c] == (cat_missing >> c & 1u ? 0 : cat[c]), "category differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    check_raw(text, '\t');
    check_raw(text, ',');
  } else {
    check_structured(data + 1, size - 1);
  }
  return 0;
}
