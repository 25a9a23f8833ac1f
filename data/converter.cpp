#include "data/converter.hpp"

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/random.hpp"
#include "data/criteo_parser.hpp"
#include "data/criteo_scan.hpp"
#include "data/h5.hpp"
#include "data/writer.hpp"

namespace recmix::data {

namespace {

using detail::CriteoScan;
using detail::InputTally;
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

std::string input_label(const std::string& in) { return in == "-" ? "<stdin>" : in; }

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

// Every check of the options, before any work; the message names the option at fault.
void check_options(const ConvertOptions& o) {
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
  if (o.mapping == "vocabulary")
    for (const std::string& in : o.inputs)
      RECMIX_REQUIRE(in != "-", ConfigError, "convert: --mapping vocabulary reads the input twice; stdin cannot be used");
  RECMIX_REQUIRE(o.max_malformed >= 0 || (o.max_malformed_share >= 0 && o.max_malformed_share <= 1),
                 ConfigError, "convert: --max-malformed must be a count or a share between 0% and 100%");
}

// The parts of the split ("all" without one) and their files, into stats.outputs; checked before
// any work: none may be an input, nor exist unless `replace`.
std::vector<std::string> name_outputs(const ConvertOptions& o, ConvertStats& stats) {
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
  return parts;
}

// How categories become table rows: the hexadecimal value mod the table's rows, or its row in the
// table's vocabulary (0: missing, 1: rare).
struct CategoryMapping {
  std::vector<std::int64_t> table_rows;
  std::vector<ValueMap> vocabulary;  // per table, value -> row; empty under hash

  std::int64_t row_of(const criteo::Row& row, int t) const {
    if (vocabulary.empty())
      return static_cast<std::int64_t>(row.category[t] % static_cast<std::uint64_t>(table_rows[t]));
    if (row.category_missing >> t & 1u) return 0;
    const std::int64_t* id = vocabulary[t].find(row.category[t]);
    return id ? *id : 1;
  }
};

CategoryMapping hash_mapping(const ConvertOptions& o) {
  CategoryMapping m;
  m.table_rows.assign(kTables, o.hash_rows);
  if (!o.table_rows.empty()) m.table_rows = o.table_rows;
  return m;
}

// Turns table t's counts into its rows: the values seen at least min_count times get rows 2.. by
// falling count (ties by value), as many as --table-rows allows. Returns the table's row count.
std::int64_t assign_rows(ValueMap& values, const ConvertOptions& o, int t) {
  std::vector<std::pair<std::int64_t, std::uint64_t>> kept;
  values.for_each([&](std::uint64_t v, std::int64_t c) {
    if (c >= o.min_count) kept.push_back({-c, v});
  });
  std::sort(kept.begin(), kept.end());
  if (!o.table_rows.empty()) {
    RECMIX_REQUIRE(o.table_rows[t] >= 2, ConfigError, "convert: vocabulary tables need at least 2 rows");
    if (static_cast<std::int64_t>(kept.size()) > o.table_rows[t] - 2) kept.resize(o.table_rows[t] - 2);
  }
  ValueMap ids;
  for (std::size_t i = 0; i < kept.size(); ++i) ids[kept[i].second] = static_cast<std::int64_t>(i) + 2;
  values = std::move(ids);
  return static_cast<std::int64_t>(kept.size()) + 2;
}

// Pass 1 of --mapping vocabulary: counts every value of every table, then gives them their rows.
CategoryMapping vocabulary_mapping(const ConvertOptions& o, CriteoScan& scan) {
  CategoryMapping m;
  m.vocabulary.resize(kTables);
  scan.for_each_row(false, [&](const criteo::Row& row, std::size_t, std::int64_t) {
    for (int t = 0; t < kTables; ++t)
      if (!(row.category_missing >> t & 1u)) ++m.vocabulary[t][row.category[t]];
  });
  m.table_rows.assign(kTables, 0);
  for (int t = 0; t < kTables; ++t) m.table_rows[t] = assign_rows(m.vocabulary[t], o, t);
  return m;
}

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

// The output files of the conversion (pass 2, or the only pass): each row goes to its part of the
// split with its categories mapped to table rows, and the tables' accesses are counted when they
// are small enough. finish() writes the attributes and renames the files into place.
class SplitWriter {
 public:
  SplitWriter(const ConvertOptions& o, const CategoryMapping& mapping, std::vector<std::string> parts,
              ConvertStats& stats);
  void add(const criteo::Row& row, std::size_t input, std::int64_t line);
  void finish();

 private:
  std::size_t part_of(std::size_t input, std::int64_t line) const;
  void write_attributes(const Sink& sink, const std::string& part, const std::string& sources) const;

  static constexpr std::int64_t kFlushRows = 4096;
  const ConvertOptions& options_;
  const CategoryMapping& mapping_;
  std::vector<std::string> parts_;
  ConvertStats& stats_;
  bool record_counts_;
  std::vector<std::int64_t> table_base_;  // of each table in Sink::access_counts
  std::vector<Sink> sinks_;               // one per part
  std::array<std::int64_t, kTables> ids_{};
};

SplitWriter::SplitWriter(const ConvertOptions& o, const CategoryMapping& mapping, std::vector<std::string> parts,
                         ConvertStats& stats)
    : options_(o), mapping_(mapping), parts_(std::move(parts)), stats_(stats), table_base_(kTables, 0) {
  const std::vector<std::int64_t>& table_rows = mapping.table_rows;
  std::int64_t total_table_rows = 0;
  for (std::int64_t r : table_rows) total_table_rows += r;
  record_counts_ = total_table_rows <= o.access_counts_limit;
  for (int t = 1; t < kTables; ++t) table_base_[t] = table_base_[t - 1] + table_rows[t - 1];

  sinks_.resize(stats.outputs.size());
  WriterOptions wopt;
  wopt.chunk_rows = o.chunk_rows;
  wopt.gzip_level = o.gzip_level;
  for (std::size_t s = 0; s < sinks_.size(); ++s) {
    sinks_[s].writer = std::make_unique<DatasetWriter>(stats.outputs[s], criteo::kNumDense, table_rows, false, wopt);
    if (record_counts_) sinks_[s].access_counts.assign(static_cast<std::size_t>(total_table_rows), 0);
  }
}

// ratio: by a hash of (seed, input, line); day: the last input is test, the one before it val
// (with three parts), the others train.
std::size_t SplitWriter::part_of(std::size_t input, std::int64_t line) const {
  if (options_.split == "ratio") {
    const float u = random::uniform01(options_.seed, input, static_cast<std::uint64_t>(line));
    return u < options_.ratios[0] ? 0 : (u < options_.ratios[0] + options_.ratios[1] ? 1 : 2);
  }
  if (options_.split == "day") {
    const std::size_t from_end = options_.inputs.size() - 1 - input;
    return from_end == 0 ? parts_.size() - 1 : (from_end == 1 && parts_.size() == 3 ? 1 : 0);
  }
  return 0;
}

void SplitWriter::add(const criteo::Row& row, std::size_t input, std::int64_t line) {
  Sink& sink = sinks_[part_of(input, line)];
  for (int t = 0; t < kTables; ++t) {
    ids_[t] = mapping_.row_of(row, t);
    if (record_counts_) ++sink.access_counts[static_cast<std::size_t>(table_base_[t] + ids_[t])];
  }
  sink.dense.insert(sink.dense.end(), row.dense.begin(), row.dense.end());
  sink.labels.push_back(row.label);
  sink.sparse.insert(sink.sparse.end(), ids_.begin(), ids_.end());
  ++stats_.rows;
  if (++sink.pending == kFlushRows) sink.flush();
}

void SplitWriter::write_attributes(const Sink& sink, const std::string& part, const std::string& sources) const {
  hid_t file = sink.writer->file();
  h5::write_attribute(file, "producer", std::string("recmix data convert criteo"));
  h5::write_attribute(file, "source_files", sources);
  h5::write_attribute(file, "dense_transform", std::string("log(x + 1); negative values clamped to 0; missing 0"));
  h5::write_attribute(file, "categorical_mapping", options_.mapping);
  if (options_.mapping == "vocabulary") {
    h5::write_attribute(file, "vocabulary_min_count", options_.min_count);
    h5::write_attribute(file, "vocabulary_reserved_rows", std::string("0: missing, 1: rare (seen fewer than min_count times)"));
    h5::write_attribute(file, "vocabulary_order", std::string("rows 2.. by falling count, ties by value"));
  } else {
    h5::write_attribute(file, "hash_rule", std::string("row = (hexadecimal value) mod table_rows[t]; missing = value 0"));
  }
  h5::write_attribute(file, "split", options_.split);
  h5::write_attribute(file, "split_part", part);
  if (options_.split == "ratio") {
    h5::write_attribute(file, "split_ratios", options_.ratios);
    h5::write_attribute(file, "split_seed", static_cast<std::int64_t>(options_.seed));
  }
  h5::write_attribute(file, "malformed_lines", stats_.malformed);
  if (record_counts_) {
    for (int t = 0; t < kTables; ++t)
      h5::write_array(file, "access_counts/" + std::to_string(t), sink.access_counts.data() + table_base_[t],
                      {static_cast<hsize_t>(mapping_.table_rows[t])});
  }
}

void SplitWriter::finish() {
  std::string sources;
  for (const std::string& in : options_.inputs) {
    if (!sources.empty()) sources += '\n';
    sources += input_label(in);
  }
  for (std::size_t s = 0; s < sinks_.size(); ++s) {
    sinks_[s].flush();
    write_attributes(sinks_[s], parts_[s], sources);
    stats_.output_rows.push_back(sinks_[s].writer->rows());
  }
  if (!options_.replace)  // a file that appeared at an output path during the conversion is kept too
    for (const std::string& out : stats_.outputs) h5::check_output_path(out, false);
  for (Sink& sink : sinks_) sink.writer->finish();
}

// Why each input that gave no row gave none ("" when every input gave rows).
std::string inputs_without_rows(const ConvertOptions& o, const std::vector<InputTally>& tally) {
  std::string no_rows;
  for (std::size_t f = 0; f < o.inputs.size(); ++f) {
    const InputTally& t = tally[f];
    if (t.rows > 0) continue;
    std::string why = "the input is empty";
    if (t.lines == 1 && t.header)
      why = "the input holds a header line and nothing else";
    else if (t.lines > 0)
      why = fmt::format("all {} lines are malformed (the first, line {}: {})", t.lines - (t.header ? 1 : 0),
                        t.first_skipped.line, t.first_skipped.reason);
    no_rows += fmt::format("{}{}: no rows to convert: {}", no_rows.empty() ? "" : "; ", input_label(o.inputs[f]), why);
  }
  return no_rows;
}

// Nothing to convert, or more skipped than the share --max-malformed allows: fails before anything
// is renamed into place.
void check_rows(const ConvertOptions& o, const ConvertStats& stats, const CriteoScan& scan) {
  const std::string no_rows = inputs_without_rows(o, scan.tally());
  if (!no_rows.empty()) throw DataError(no_rows);
  const auto data_lines = static_cast<double>(stats.rows + stats.skipped);
  const auto skipped = static_cast<double>(stats.skipped);
  const MalformedLine& first = scan.first_skipped();
  if (o.max_malformed < 0 && skipped > o.max_malformed_share * data_lines)
    throw DataError(fmt::format("{} of {} lines malformed and skipped ({:.2g}%), more than --max-malformed {:g}% "
                                "allows; the first: {}:{}: {}",
                                stats.skipped, stats.rows + stats.skipped, 100.0 * skipped / data_lines,
                                100.0 * o.max_malformed_share, first.file, first.line, first.reason));
}

}  // namespace

ConvertStats convert_criteo(const ConvertOptions& o) {
  check_options(o);
  ConvertStats stats;
  std::vector<std::string> parts = name_outputs(o, stats);
  CriteoScan scan(o, stats);
  const CategoryMapping mapping = o.mapping == "vocabulary" ? vocabulary_mapping(o, scan) : hash_mapping(o);
  stats.table_rows = mapping.table_rows;
  SplitWriter out(o, mapping, std::move(parts), stats);
  scan.for_each_row(true, [&](const criteo::Row& row, std::size_t input, std::int64_t line) {
    out.add(row, input, line);
  });
  check_rows(o, stats, scan);
  for (std::size_t f = 0; f < o.inputs.size(); ++f)
    if (scan.tally()[f].header) stats.headers.push_back({input_label(o.inputs[f]), scan.tally()[f].header_line});
  out.finish();
  stats.seconds = scan.seconds();
  return stats;
}

}  // namespace recmix::data
