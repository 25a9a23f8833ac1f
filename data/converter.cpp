#include "data/converter.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data/criteo_parser.hpp"
#include "data/h5.hpp"
#include "data/line_source.hpp"
#include "data/writer.hpp"

namespace recmix::data {

namespace {

using Clock = std::chrono::steady_clock;
using detail::LineSource;
constexpr int kTables = criteo::kNumCategorical;

// Open-addressing map from a 64-bit category value to a count or an id.
class ValueMap {
 public:
  ValueMap() { rehash(1 << 12); }
  std::int64_t& operator[](std::uint64_t key) {
    if (key == kEmpty) return max_key_value_;
    if ((size_ + 1) * 4 > keys_.size() * 3) rehash(keys_.size() * 2);
    std::size_t i = slot(key);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      values_[i] = 0;
      ++size_;
    }
    return values_[i];
  }
  const std::int64_t* find(std::uint64_t key) const {
    if (key == kEmpty) return max_key_value_ ? &max_key_value_ : nullptr;
    std::size_t i = slot(key);
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return &values_[i];
      i = (i + 1) & mask_;
    }
    return nullptr;
  }
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty) f(keys_[i], values_[i]);
    if (max_key_value_) f(kEmpty, max_key_value_);
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  std::size_t slot(std::uint64_t key) const { return static_cast<std::size_t>(random::mix64(key)) & mask_; }
  void rehash(std::size_t capacity) {
    std::vector<std::uint64_t> old_keys = std::move(keys_);
    std::vector<std::int64_t> old_values = std::move(values_);
    keys_.assign(capacity, kEmpty);
    values_.assign(capacity, 0);
    mask_ = capacity - 1;
    size_ = 0;
    for (std::size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kEmpty) {
        std::size_t j = slot(old_keys[i]);
        while (keys_[j] != kEmpty) j = (j + 1) & mask_;
        keys_[j] = old_keys[i];
        values_[j] = old_values[i];
        ++size_;
      }
  }
  std::vector<std::uint64_t> keys_;
  std::vector<std::int64_t> values_;
  std::size_t mask_ = 0, size_ = 0;
  std::int64_t max_key_value_ = 0;  // the all-ones key, which marks empty slots
};

char detect_delimiter(std::string_view first_line, const std::string& format, const std::string& file) {
  if (format == "tsv") return '\t';
  if (format == "csv") return ',';
  if (first_line.find('\t') != std::string_view::npos) return '\t';
  if (first_line.find(',') != std::string_view::npos) return ',';
  throw DataError(file + ": line 1 has neither TAB nor ',' separators (not a Criteo file?)");
}

bool is_header(std::string_view line) {
  return !line.empty() && ((line[0] >= 'a' && line[0] <= 'z') || (line[0] >= 'A' && line[0] <= 'Z'));
}

std::string output_name(const std::string& output, const std::string& part) {
  std::string stem = output;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".h5") == 0) stem.resize(stem.size() - 3);
  return stem + "_" + part + ".h5";
}

// Whether input `in` ("-": standard input) and output `out` are the same file.
bool same_file(const std::string& in, const std::string& out) {
  if (in != "-") {
    std::error_code ec;
    return std::filesystem::equivalent(in, out, ec);
  }
  struct stat a {}, b {};
  return ::fstat(0, &a) == 0 && ::stat(out.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// What one input gave (the last pass).
struct InputTally {
  std::int64_t lines = 0, rows = 0, skipped = 0;
  bool header = false;
  MalformedLine first_skipped;
};

// Ends a progress line left without its newline when the conversion fails, so that the error
// printed next starts a line of its own.
struct ProgressLine {
  bool open = false;
  ~ProgressLine() {
    if (open) std::fputc('\n', stderr);
  }
};

// Rows of one output file, collected a block at a time before going to the writer.
struct Sink {
  std::unique_ptr<DatasetWriter> writer;
  std::vector<float> dense, labels;
  std::vector<std::int64_t> sparse;
  std::vector<std::int64_t> access_counts;  // concatenated over tables; empty when not recorded
  std::int64_t pending = 0;
  void flush() {
    if (pending == 0) return;
    writer->append(pending, dense.data(), labels.data(), sparse.data());
    dense.clear();
    labels.clear();
    sparse.clear();
    pending = 0;
  }
};

}  // namespace

ConvertStats convert_criteo(const ConvertOptions& o) {
  RECMIX_REQUIRE(!o.inputs.empty(), ConfigError, "convert: no input files");
  RECMIX_REQUIRE(!o.output.empty(), ConfigError, "convert: no output file (-o)");
  RECMIX_REQUIRE(o.format == "auto" || o.format == "tsv" || o.format == "csv", ConfigError,
                 "convert: --format must be auto, tsv or csv");
  RECMIX_REQUIRE(o.mapping == "hash" || o.mapping == "vocabulary", ConfigError,
                 "convert: --mapping must be hash or vocabulary");
  RECMIX_REQUIRE(o.split == "none" || o.split == "day" || o.split == "ratio", ConfigError,
                 "convert: --split must be none, day or ratio");
  RECMIX_REQUIRE(o.table_rows.empty() || o.table_rows.size() == kTables, ConfigError,
                 "convert: --table-rows needs 26 values (one per categorical feature)");
  for (std::int64_t r : o.table_rows) RECMIX_REQUIRE(r > 0, ConfigError, "convert: --table-rows must be positive");
  RECMIX_REQUIRE(o.hash_rows > 0, ConfigError, "convert: --hash-rows must be positive");
  RECMIX_REQUIRE(o.min_count >= 1, ConfigError, "convert: --min-count must be at least 1");
  if (o.split == "ratio") {
    RECMIX_REQUIRE(o.ratios.size() == 3, ConfigError, "convert: --ratios needs three values (train, val, test)");
    double sum = 0;
    for (double r : o.ratios) {
      RECMIX_REQUIRE(r >= 0, ConfigError, "convert: --ratios must be non-negative");
      sum += r;
    }
    RECMIX_REQUIRE(sum > 0.999 && sum < 1.001, ConfigError, "convert: --ratios must sum to 1");
  }
  if (o.split == "day")
    RECMIX_REQUIRE(o.inputs.size() >= 2, ConfigError,
                   "convert: --split day needs at least two input files (one per day)");
  const bool vocabulary = o.mapping == "vocabulary";
  if (vocabulary)
    for (const std::string& in : o.inputs)
      RECMIX_REQUIRE(in != "-", ConfigError, "convert: --mapping vocabulary reads the input twice; stdin cannot be used");
  RECMIX_REQUIRE(o.max_malformed >= 0 || (o.max_malformed_share >= 0 && o.max_malformed_share <= 1),
                 ConfigError, "convert: --max-malformed must be a count or a share between 0% and 100%");

  // --- outputs: named, and checked before any work ---
  ConvertStats stats;
  std::vector<std::string> parts;
  if (o.split == "none") {
    stats.outputs = {o.output};
    parts = {"all"};
  } else if (o.split == "ratio" || o.inputs.size() >= 3) {
    parts = {"train", "val", "test"};
  } else {
    parts = {"train", "test"};
  }
  if (o.split != "none")
    for (const std::string& p : parts) stats.outputs.push_back(output_name(o.output, p));
  for (const std::string& out : stats.outputs) {
    for (const std::string& in : o.inputs)
      if (same_file(in, out)) throw IoError(out + ": is also an input of the conversion; write the dataset elsewhere");
    h5::check_output_path(out, o.replace);
  }

  const auto start = Clock::now();
  auto last_report = start;
  std::int64_t total_size = 0;
  for (const std::string& in : o.inputs) {
    struct stat st {};
    if (in != "-" && ::stat(in.c_str(), &st) == 0) total_size += static_cast<std::int64_t>(st.st_size);
  }
  const int passes = vocabulary ? 2 : 1;
  std::int64_t done_size = 0;  // compressed bytes of finished inputs, over both passes
  ProgressLine progress_line;
  auto report_progress = [&](const LineSource& src, std::int64_t rows, bool final) {
    if (!o.progress) return;
    progress_line.open = !final;
    auto now = Clock::now();
    if (!final && now - last_report < std::chrono::seconds(1)) return;
    last_report = now;
    const double t = std::chrono::duration<double>(now - start).count();
    const std::int64_t pos = done_size + src.position();
    const double all = static_cast<double>(total_size) * passes;
    std::string eta = "?";
    if (final)
      eta = "0s";
    else if (total_size > 0 && pos > 0)
      eta = fmt::format("{:.0f}s", std::max(0.0, t * (all / static_cast<double>(pos) - 1.0)));
    std::fprintf(stderr, "\rconvert: %lld rows, %.0f rows/s, %.1f MB/s, ETA %s   %s",
                 static_cast<long long>(rows), rows / std::max(t, 1e-9),
                 (stats.bytes + (final ? 0 : src.bytes())) / 1e6 / std::max(t, 1e-9), eta.c_str(), final ? "\n" : "");
    std::fflush(stderr);
  };

  // Malformed lines: count, remember the first few, fail under strict or past --max-malformed.
  std::vector<InputTally> tally(o.inputs.size());
  MalformedLine first_skipped;
  auto malformed = [&](std::size_t f, const std::string& file, std::int64_t line, const std::string& reason,
                       bool kept) {
    ++stats.malformed;
    if (o.strict) throw DataError(file + ":" + std::to_string(line) + ": " + reason + " (--strict)");
    if (static_cast<int>(stats.reported.size()) < o.max_reported) stats.reported.push_back({file, line, reason});
    if (kept) return;
    if (stats.skipped++ == 0) first_skipped = {file, line, reason};
    if (tally[f].skipped++ == 0) tally[f].first_skipped = {file, line, reason};
    if (o.max_malformed >= 0 && stats.skipped > o.max_malformed)
      throw DataError(fmt::format("{} malformed lines skipped, more than --max-malformed {} allows; "
                                  "the first: {}:{}: {}",
                                  stats.skipped, o.max_malformed, first_skipped.file, first_skipped.line,
                                  first_skipped.reason));
  };
  auto describe = [](const criteo::LineResult& r) {
    std::string s = criteo::error_text(r.error);
    if (r.field >= 0) s += std::string(" (field ") + criteo::field_name(r.field) + ")";
    return s;
  };

  // Runs over every parsed row of every input; calls on_row(row, input index, line number).
  auto scan = [&](auto&& on_row, bool count_malformed) {
    criteo::Row row;
    for (std::size_t f = 0; f < o.inputs.size(); ++f) {
      const std::string& file = o.inputs[f];
      const std::string label = file == "-" ? "<stdin>" : file;
      LineSource src(file);
      std::string_view line;
      bool terminated = true;
      std::int64_t number = 0;
      char delimiter = 0;
      while (src.next(line, terminated)) {
        ++number;
        if (count_malformed) {
          ++stats.lines;
          ++tally[f].lines;
        }
        if (number == 1) {
          delimiter = detect_delimiter(line, o.format, label);
          if (is_header(line)) {
            tally[f].header = true;
            continue;
          }
        }
        if (line.empty() && terminated) {
          if (count_malformed) malformed(f, label, number, "empty line", false);
          continue;
        }
        criteo::LineResult r = criteo::parse_line(line, delimiter, row);
        bool keep = r.error == criteo::LineError::none || r.error == criteo::LineError::carriage_return;
        if (count_malformed) {
          // a complete last line without '\n' is fine; an incomplete one is a truncated file
          if (!terminated && !keep)
            malformed(f, label, number, "truncated last line: " + describe(r), false);
          else if (r.error == criteo::LineError::carriage_return)
            malformed(f, label, number, "CRLF line ending (row kept)", true);
          else if (!keep)
            malformed(f, label, number, describe(r), false);
          if (keep) ++tally[f].rows;
        }
        if (keep) on_row(row, f, number);
        if ((number & 0xFFFF) == 0) report_progress(src, stats.rows, false);
      }
      if (count_malformed) stats.bytes += src.bytes();
      done_size += std::max<std::int64_t>(src.size(), 0);
      if (f + 1 == o.inputs.size() && count_malformed) report_progress(src, stats.rows, true);
    }
  };

  // --- pass 1 (vocabulary): count every value of every table ---
  std::vector<std::int64_t> table_rows(kTables, o.hash_rows);
  if (!o.table_rows.empty() && !vocabulary) table_rows = o.table_rows;
  std::vector<ValueMap> vocab(vocabulary ? kTables : 0);
  if (vocabulary) {
    scan(
        [&](const criteo::Row& row, std::size_t, std::int64_t) {
          for (int t = 0; t < kTables; ++t)
            if (!(row.category_missing >> t & 1u)) ++vocab[t][row.category[t]];
        },
        false);
    // ids 0 (missing) and 1 (rare) are reserved; frequent values get 2.. by falling count
    for (int t = 0; t < kTables; ++t) {
      std::vector<std::pair<std::int64_t, std::uint64_t>> kept;
      vocab[t].for_each([&](std::uint64_t v, std::int64_t c) {
        if (c >= o.min_count) kept.push_back({-c, v});
      });
      std::sort(kept.begin(), kept.end());
      if (!o.table_rows.empty()) {
        RECMIX_REQUIRE(o.table_rows[t] >= 2, ConfigError, "convert: vocabulary tables need at least 2 rows");
        if (static_cast<std::int64_t>(kept.size()) > o.table_rows[t] - 2) kept.resize(o.table_rows[t] - 2);
      }
      ValueMap ids;
      for (std::size_t i = 0; i < kept.size(); ++i) ids[kept[i].second] = static_cast<std::int64_t>(i) + 2;
      vocab[t] = std::move(ids);
      table_rows[t] = static_cast<std::int64_t>(kept.size()) + 2;
    }
  }
  stats.table_rows = table_rows;

  // --- outputs ---
  std::int64_t total_table_rows = 0;
  for (std::int64_t r : table_rows) total_table_rows += r;
  const bool record_counts = total_table_rows <= o.access_counts_limit;
  std::vector<std::int64_t> table_base(kTables, 0);
  for (int t = 1; t < kTables; ++t) table_base[t] = table_base[t - 1] + table_rows[t - 1];

  std::vector<Sink> sinks(stats.outputs.size());
  WriterOptions wopt;
  wopt.chunk_rows = o.chunk_rows;
  wopt.gzip_level = o.gzip_level;
  for (std::size_t s = 0; s < sinks.size(); ++s) {
    sinks[s].writer = std::make_unique<DatasetWriter>(stats.outputs[s], criteo::kNumDense, table_rows, false, wopt);
    if (record_counts) sinks[s].access_counts.assign(static_cast<std::size_t>(total_table_rows), 0);
  }

  // --- pass 2 (or the only pass): map, split, write ---
  constexpr std::int64_t kFlushRows = 4096;
  std::array<std::int64_t, kTables> ids{};
  done_size = vocabulary ? total_size : 0;
  scan(
      [&](const criteo::Row& row, std::size_t f, std::int64_t line) {
        std::size_t s = 0;
        if (o.split == "ratio") {
          const float u = random::uniform01(o.seed, f, static_cast<std::uint64_t>(line));
          s = u < o.ratios[0] ? 0 : (u < o.ratios[0] + o.ratios[1] ? 1 : 2);
        } else if (o.split == "day") {
          const std::size_t from_end = o.inputs.size() - 1 - f;
          s = from_end == 0 ? parts.size() - 1 : (from_end == 1 && parts.size() == 3 ? 1 : 0);
        }
        Sink& sink = sinks[s];
        for (int t = 0; t < kTables; ++t) {
          const bool missing = row.category_missing >> t & 1u;
          if (vocabulary) {
            const std::int64_t* id = missing ? nullptr : vocab[t].find(row.category[t]);
            ids[t] = missing ? 0 : (id ? *id : 1);
          } else {
            ids[t] = static_cast<std::int64_t>(row.category[t] % static_cast<std::uint64_t>(table_rows[t]));
          }
          if (record_counts) ++sink.access_counts[static_cast<std::size_t>(table_base[t] + ids[t])];
        }
        sink.dense.insert(sink.dense.end(), row.dense.begin(), row.dense.end());
        sink.labels.push_back(row.label);
        sink.sparse.insert(sink.sparse.end(), ids.begin(), ids.end());
        ++stats.rows;
        if (++sink.pending == kFlushRows) sink.flush();
      },
      true);

  // --- nothing to convert, or too much skipped: fail before anything is renamed into place ---
  std::string no_rows;
  for (std::size_t f = 0; f < o.inputs.size(); ++f) {
    const InputTally& t = tally[f];
    if (t.rows > 0) continue;
    const std::string label = o.inputs[f] == "-" ? "<stdin>" : o.inputs[f];
    std::string why = "the input is empty";
    if (t.lines == 1 && t.header)
      why = "the input holds a header line and nothing else";
    else if (t.lines > 0)
      why = fmt::format("all {} lines are malformed (the first, line {}: {})", t.lines - (t.header ? 1 : 0),
                        t.first_skipped.line, t.first_skipped.reason);
    no_rows += fmt::format("{}{}: no rows to convert: {}", no_rows.empty() ? "" : "; ", label, why);
  }
  if (!no_rows.empty()) throw DataError(no_rows);
  const auto data_lines = static_cast<double>(stats.rows + stats.skipped);
  const auto skipped = static_cast<double>(stats.skipped);
  if (o.max_malformed < 0 && skipped > o.max_malformed_share * data_lines)
    throw DataError(fmt::format("{} of {} lines malformed and skipped ({:.2g}%), more than --max-malformed {:g}% "
                                "allows; the first: {}:{}: {}",
                                stats.skipped, stats.rows + stats.skipped, 100.0 * skipped / data_lines,
                                100.0 * o.max_malformed_share, first_skipped.file, first_skipped.line,
                                first_skipped.reason));

  // --- attributes, then rename into place ---
  std::string sources;
  for (const std::string& in : o.inputs) sources += (sources.empty() ? "" : "\n") + (in == "-" ? "<stdin>" : in);
  for (std::size_t s = 0; s < sinks.size(); ++s) {
    Sink& sink = sinks[s];
    sink.flush();
    hid_t file = sink.writer->file();
    h5::write_attribute(file, "producer", std::string("recmix data convert criteo"));
    h5::write_attribute(file, "source_files", sources);
    h5::write_attribute(file, "dense_transform", std::string("log(x + 1); negative values clamped to 0; missing 0"));
    h5::write_attribute(file, "categorical_mapping", o.mapping);
    if (vocabulary) {
      h5::write_attribute(file, "vocabulary_min_count", o.min_count);
      h5::write_attribute(file, "vocabulary_reserved_rows", std::string("0: missing, 1: rare (seen fewer than min_count times)"));
      h5::write_attribute(file, "vocabulary_order", std::string("rows 2.. by falling count, ties by value"));
    } else {
      h5::write_attribute(file, "hash_rule", std::string("row = (hexadecimal value) mod table_rows[t]; missing = value 0"));
    }
    h5::write_attribute(file, "split", o.split);
    h5::write_attribute(file, "split_part", parts[s]);
    if (o.split == "ratio") {
      h5::write_attribute(file, "split_ratios", o.ratios);
      h5::write_attribute(file, "split_seed", static_cast<std::int64_t>(o.seed));
    }
    h5::write_attribute(file, "malformed_lines", stats.malformed);
    if (record_counts) {
      for (int t = 0; t < kTables; ++t)
        h5::write_array(file, "access_counts/" + std::to_string(t),
                        sink.access_counts.data() + table_base[t], {static_cast<hsize_t>(table_rows[t])});
    }
    stats.output_rows.push_back(sink.writer->rows());
  }
  if (!o.replace)  // a file that appeared at an output path during the conversion is kept too
    for (const std::string& out : stats.outputs) h5::check_output_path(out, false);
  for (Sink& sink : sinks) sink.writer->finish();
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace recmix::data
