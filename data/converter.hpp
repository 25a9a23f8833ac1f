#pragma once
// Streaming Criteo click-log -> HDF5 converter (raw TSV, or the CSV-with-header variant; plain or
// gzip; files or stdin). Memory stays at one input block and one output chunk per split, plus
// the vocabulary when categories are mapped through one.
#include <cstdint>
#include <string>
#include <vector>

namespace recmix::data {

struct ConvertOptions {
  std::vector<std::string> inputs;  // "-" reads stdin
  std::string output;               // out.h5; with a split: out_train.h5, out_val.h5, out_test.h5
  std::string format = "auto";      // auto | tsv | csv

  // Categories -> table rows.
  std::string mapping = "hash";             // hash | vocabulary
  std::int64_t hash_rows = 10'000'000;      // hash: rows of every table (value mod rows) ...
  std::vector<std::int64_t> table_rows;     // ... or per table (26 values); vocabulary: optional cap
  std::int64_t min_count = 1;               // vocabulary: values seen fewer times map to the rare row

  // Splits.
  std::string split = "none";               // none | day | ratio
  std::vector<double> ratios = {0.8, 0.1, 0.1};  // ratio: train, val, test
  std::uint64_t seed = 0;                   // ratio: rows are assigned by hash(seed, row)

  bool strict = false;                      // the first malformed line is an error
  // Skipped lines beyond which the conversion fails (CRLF lines are kept and do not count): at
  // most max_malformed lines, or, when it is negative, at most this share of the data lines.
  std::int64_t max_malformed = -1;
  double max_malformed_share = 0.01;
  bool replace = true;                      // an existing output file is replaced (CLI: only with --force)
  bool progress = true;                     // progress line on stderr, about once a second
  int gzip_level = 0;                       // output compression
  std::int64_t chunk_rows = 16384;
  std::int64_t access_counts_limit = 1 << 22;  // write /access_counts when the tables hold at most this many rows
  int max_reported = 20;                    // malformed lines listed on stderr
};

struct MalformedLine {
  std::string file;
  std::int64_t line = 0;  // 1-based
  std::string reason;
};

// An input whose line 1 starts with a letter: taken as a header and not converted.
struct HeaderLine {
  std::string file;
  std::string text;  // its first 80 characters
};

struct ConvertStats {
  std::int64_t lines = 0;        // lines read (header included)
  std::int64_t rows = 0;         // rows written over all outputs
  std::int64_t malformed = 0;    // malformed lines (skipped; CRLF lines are kept, their '\r' dropped)
  std::int64_t skipped = 0;      // malformed lines skipped (all but the CRLF ones)
  std::int64_t bytes = 0;        // uncompressed input bytes
  double seconds = 0;
  std::vector<MalformedLine> reported;  // the first max_reported malformed lines
  std::vector<HeaderLine> headers;      // the inputs whose line 1 was taken as a header
  std::vector<std::string> outputs;
  std::vector<std::int64_t> output_rows;
  std::vector<std::int64_t> table_rows;
};

// Throws ConfigError for bad options; IoError for unreadable input, unwritable output, an output
// that is not a regular file, is one of the inputs, or exists (unless `replace`); DataError for
// the first malformed line under strict, for more skipped lines than allowed, for an input that
// gives no row (empty, a header alone, nothing but malformed lines) and for data after the end of
// a gzip stream. Nothing is left at the output paths on failure; existing files there are kept.
ConvertStats convert_criteo(const ConvertOptions& options);

}  // namespace recmix::data
