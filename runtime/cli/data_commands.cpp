// recmix data convert criteo | synth | multihot | inspect: the command-line side of data/.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <memory>

#include "core/error.hpp"
#include "data/converter.hpp"
#include "data/h5.hpp"
#include "data/inspect.hpp"
#include "data/multihot.hpp"
#include "data/synth.hpp"
#include "runtime/cli/commands.hpp"

namespace recmix::cli {

namespace {

// "10M" -> 10000000; plain integers, and k/M/G suffixes (powers of ten). A count that does not
// fit in 64 bits is an error, not a wrapped value.
std::int64_t parse_count(const std::string& text, const std::string& option) {
  if (text.empty()) throw ConfigError(option + ": empty value");
  std::int64_t scale = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'k': case 'K': scale = 1000; break;
    case 'm': case 'M': scale = 1000000; break;
    case 'g': case 'G': scale = 1000000000; break;
    default: break;
  }
  if (scale != 1) digits.pop_back();
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit))
    throw ConfigError(option + ": '" + text + "' is not a count (digits, optionally followed by k, M or G)");
  std::int64_t v = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (error == std::errc::result_out_of_range || v > std::numeric_limits<std::int64_t>::max() / scale)
    throw ConfigError(option + ": '" + text + "' is too large (at most " +
                      std::to_string(std::numeric_limits<std::int64_t>::max()) + ")");
  return v * scale;
}

// "100" (lines) or "1%" / "0.5%" (a share of the data lines) -> the converter's two fields.
void parse_malformed_limit(const std::string& text, data::ConvertOptions& o) {
  const std::string bad = "--max-malformed: '" + text + "' is not a count of lines (100) or a share (1%)";
  if (!text.empty() && text.back() == '%') {
    const std::string number = text.substr(0, text.size() - 1);
    const auto is_decimal = [](char c) { return (c >= '0' && c <= '9') || c == '.'; };
    double percent = -1;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), percent);
    if (number.empty() || !std::all_of(number.begin(), number.end(), is_decimal) || error != std::errc() ||
        end != number.data() + number.size() || !(percent >= 0 && percent <= 100))
      throw ConfigError(bad + " between 0% and 100%");
    o.max_malformed = -1;
    o.max_malformed_share = percent / 100;
  } else {
    if (text.find_first_not_of("0123456789kKmMgG") != std::string::npos) throw ConfigError(bad);
    o.max_malformed = parse_count(text, "--max-malformed");
  }
}

std::vector<std::int64_t> parse_counts(const std::vector<std::string>& texts, const std::string& option) {
  std::vector<std::int64_t> out;
  for (const std::string& t : texts) out.push_back(parse_count(t, option));
  return out;
}

void run_synth(const data::SynthOptions& o, bool force) {
  h5::check_output_path(o.output, force);
  h5::AtomicPath::remove_temporaries_on_signal();
  data::SynthStats s = data::synthesize(o);
  fmt::print("wrote {} rows to {} in {:.2f} s: label mean {:.4f}, Bayes AUC of the hidden model {:.4f}\n", s.rows,
             o.output, s.seconds, s.label_mean, s.bayes_auc);
}

// --preset: the options it sets may not be given as well.
void apply_preset(const CLI::App& synth, const std::string& preset, std::int64_t scale, data::SynthOptions& o) {
  if (preset.empty()) throw ConfigError("--scale: only with --preset (mlperf-dcnv2)");
  if (preset != "mlperf-dcnv2") throw ConfigError("--preset: '" + preset + "' is not a preset (mlperf-dcnv2)");
  for (const char* set : {"--tables", "--table-rows", "--dense", "--multi-hot", "--pooling"})
    if (synth.count(set) > 0)
      throw ConfigError(std::string("--preset mlperf-dcnv2 sets the tables, dense features and bags; drop ") + set);
  data::apply_mlperf_dcnv2_preset(o, scale);
}

void add_convert(CLI::App& data) {
  auto* convert = data.add_subcommand("convert", "Convert click logs to HDF5 (docs/dataset-format.md)");
  convert->require_subcommand(1);
  auto* criteo = convert->add_subcommand("criteo", "Criteo TSV (Kaggle / Terabyte) or CSV with header; plain or gzip");
  auto o = std::make_shared<data::ConvertOptions>();
  auto hash_rows = std::make_shared<std::string>("10M");
  auto table_rows = std::make_shared<std::vector<std::string>>();
  auto quiet = std::make_shared<bool>(false);
  auto max_malformed = std::make_shared<std::string>("1%");
  auto force = std::make_shared<bool>(false);
  criteo->add_option("inputs", o->inputs, "input files ('-' for stdin), one per day with --split day")->required();
  criteo->add_option("-o,--output", o->output, "output .h5 (with a split: <name>_train.h5, _val.h5, _test.h5)")
      ->required();
  criteo->add_option("--format", o->format, "auto | tsv | csv")->capture_default_str();
  criteo->add_option("--mapping", o->mapping, "hash (value mod rows) | vocabulary (frequency threshold, two passes)")
      ->capture_default_str();
  criteo->add_option("--hash-rows", *hash_rows, "hash: rows of every table (e.g. 10M)")->capture_default_str();
  criteo->add_option("--table-rows", *table_rows, "rows per table (26 values); vocabulary: upper bound")
      ->delimiter(',');
  criteo->add_option("--min-count", o->min_count, "vocabulary: values seen fewer times share the 'rare' row")
      ->capture_default_str();
  criteo->add_option("--split", o->split, "none | day (last file test, the one before val) | ratio")
      ->capture_default_str();
  criteo->add_option("--ratios", o->ratios, "train,val,test fractions for --split ratio")->delimiter(',');
  criteo->add_option("--seed", o->seed, "seed of the ratio split")->capture_default_str();
  criteo->add_flag("--strict", o->strict, "fail on the first malformed line");
  criteo->add_option("--max-malformed", *max_malformed,
                     "fail when more lines are malformed and skipped: a count (100) or a share of the lines (1%)")
      ->capture_default_str();
  criteo->add_flag("--force", *force, "replace existing output files (never a device, a directory or an input)");
  criteo->add_option("--gzip", o->gzip_level, "output compression level 0-9")->capture_default_str();
  criteo->add_option("--chunk-rows", o->chunk_rows, "rows per HDF5 chunk")->capture_default_str();
  criteo->add_flag("-q,--quiet", *quiet, "no progress line");
  criteo->callback([o, hash_rows, table_rows, quiet, max_malformed, force] {
    o->hash_rows = parse_count(*hash_rows, "--hash-rows");
    o->table_rows = parse_counts(*table_rows, "--table-rows");
    parse_malformed_limit(*max_malformed, *o);
    o->progress = !*quiet;
    o->replace = *force;
    h5::AtomicPath::remove_temporaries_on_signal();
    data::ConvertStats s = data::convert_criteo(*o);
    for (const data::HeaderLine& h : s.headers)
      std::fprintf(stderr, "header: %s:1: taken as a header (it starts with a letter), not converted: %s\n",
                   h.file.c_str(), h.text.c_str());
    for (const data::MalformedLine& m : s.reported)
      std::fprintf(stderr, "malformed: %s:%lld: %s\n", m.file.c_str(), static_cast<long long>(m.line),
                   m.reason.c_str());
    if (s.malformed > static_cast<std::int64_t>(s.reported.size()))
      std::fprintf(stderr, "malformed: ... and %lld more\n",
                   static_cast<long long>(s.malformed - static_cast<std::int64_t>(s.reported.size())));
    fmt::print("converted {} lines into {} rows ({} malformed) in {:.2f} s, {:.1f} MB/s\n", s.lines, s.rows,
               s.malformed, s.seconds, s.bytes / 1e6 / std::max(s.seconds, 1e-9));
    for (std::size_t i = 0; i < s.outputs.size(); ++i) fmt::print("  {}: {} rows\n", s.outputs[i], s.output_rows[i]);
  });
}

void add_synth(CLI::App& data) {
  auto* synth = data.add_subcommand("synth", "Generate a Zipf-skewed synthetic dataset with a planted signal");
  auto o = std::make_shared<data::SynthOptions>();
  auto rows = std::make_shared<std::string>("100k");
  auto tables = std::make_shared<int>(8);
  auto table_rows = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"1000"});
  auto pooling = std::make_shared<std::vector<int>>();
  auto force = std::make_shared<bool>(false);
  auto preset = std::make_shared<std::string>();
  auto scale = std::make_shared<std::string>(std::to_string(data::kMlperfDcnv2DefaultScale));
  synth->add_option("-o,--output", o->output, "output .h5")->required();
  synth->add_flag("--force", *force, "replace an existing output file (never a device or a directory)");
  synth->add_option("--rows", *rows, "rows to generate (k/M/G suffixes)")->capture_default_str();
  synth->add_option("--tables", *tables, "number of embedding tables")->capture_default_str();
  synth->add_option("--table-rows", *table_rows, "rows per table: one value for all, or one per table")
      ->delimiter(',')
      ->capture_default_str();
  synth->add_option("--dense", o->num_dense, "dense features")->capture_default_str();
  synth->add_option("--zipf", o->zipf, "Zipf exponent: one for all tables, or one per table")
      ->delimiter(',')
      ->capture_default_str();
  synth->add_flag("--multi-hot", o->multi_hot, "several indices per table and row (CSR)");
  synth->add_option("--pooling", *pooling, "multi-hot bag size range min,max (uniform)")->delimiter(',');
  synth->add_option("--seed", o->seed, "random seed")->capture_default_str();
  synth->add_option("--bias", o->bias, "hidden model: bias (sets the click rate)")->capture_default_str();
  synth->add_option("--dense-signal", o->dense_signal, "hidden model: norm of the dense weights")
      ->capture_default_str();
  synth->add_option("--sparse-signal", o->sparse_signal, "hidden model: std of the summed per-row weights")
      ->capture_default_str();
  synth->add_option("--gzip", o->gzip_level, "output compression level 0-9")->capture_default_str();
  synth->add_option("--chunk-rows", o->chunk_rows, "rows per HDF5 chunk")->capture_default_str();
  synth->add_option("--preset", *preset,
                    "mlperf-dcnv2: the MLPerf DLRM-DCNv2 benchmark's 26 tables (Criteo 1TB, capped at 40M rows) "
                    "divided by --scale, 13 dense features, its bag sizes (214 indices a row); sets --tables, "
                    "--table-rows, --dense, --multi-hot and --pooling");
  synth->add_option("--scale", *scale, "--preset: divide the table rows by this (rounded up, at least 1 row)")
      ->capture_default_str();
  synth->callback([synth, o, rows, tables, table_rows, pooling, force, preset, scale] {
    o->rows = parse_count(*rows, "--rows");
    if (!preset->empty() || synth->count("--scale") > 0) {
      apply_preset(*synth, *preset, parse_count(*scale, "--scale"), *o);
      run_synth(*o, *force);
      return;
    }
    std::vector<std::int64_t> sizes = parse_counts(*table_rows, "--table-rows");
    if (sizes.size() == 1) sizes.assign(static_cast<std::size_t>(std::max(*tables, 0)), sizes[0]);
    if (static_cast<int>(sizes.size()) != *tables)
      throw ConfigError("--table-rows: give one value or one per table (" + std::to_string(*tables) + ")");
    o->table_rows = sizes;
    if (!pooling->empty()) {
      if (pooling->size() != 2) throw ConfigError("--pooling: give min,max");
      o->pooling_min = (*pooling)[0];
      o->pooling_max = (*pooling)[1];
    } else if (o->multi_hot) {
      o->pooling_min = 1;
      o->pooling_max = 8;
    }
    run_synth(*o, *force);
  });
}

// Bag sizes: "mlperf" (the benchmark's 26) or one integer per table, "3,2,1"; their count and
// values are checked against the input's tables by expand_to_multi_hot.
std::vector<int> parse_bag_sizes(const std::string& text) {
  if (text == "mlperf") return data::mlperf_dcnv2_bag_sizes();
  std::vector<int> sizes;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    int v = 0;
    const auto [stop, error] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || error != std::errc() || stop != item.data() + item.size())
      throw ConfigError("--sizes: '" + item + "' in '" + text +
                        "' is not a bag size; give 'mlperf' or one integer per table (3,2,1,...)");
    sizes.push_back(v);
    if (end == text.size()) return sizes;
    begin = end + 1;
  }
}

void add_multihot(CLI::App& data) {
  auto* mh = data.add_subcommand(
      "multihot",
      "Expand a one-hot dataset into multi-hot bags as the MLPerf DLRM-DCNv2 benchmark does: each bag is the "
      "original index followed by indices drawn uniformly over its table, a function of (seed, table, index) "
      "(docs/dataset-format.md, 'Multi-hot expansion')");
  auto o = std::make_shared<data::MultiHotOptions>();
  auto sizes = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  mh->add_option("input", o->input, "one-hot dataset file (.h5), read a block of rows at a time")->required();
  mh->add_option("-o,--output", o->output, "multi-hot output .h5 (written as <name>.tmp.<pid>, renamed when complete)")
      ->required();
  mh->add_option("--sizes", *sizes,
                 "bag size per table: 'mlperf' (the benchmark's 3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,"
                 "3,1,1 for 26 tables) or one integer >= 1 per table of the input")
      ->required();
  mh->add_option("--seed", o->seed, "seed of the extra indices")->capture_default_str();
  mh->add_flag("--force", o->replace, "replace an existing output file (never a device, a directory or the input)");
  mh->add_option("--gzip", o->gzip_level, "output compression level 0-9")->capture_default_str();
  mh->add_option("--chunk-rows", o->chunk_rows, "rows read per block and per HDF5 chunk")->capture_default_str();
  mh->add_flag("-q,--quiet", *quiet, "no progress line");
  mh->callback([o, sizes, quiet] {
    o->sizes = parse_bag_sizes(*sizes);
    o->progress = !*quiet;
    h5::AtomicPath::remove_temporaries_on_signal();
    const data::MultiHotStats s = data::expand_to_multi_hot(*o);
    if (s.access_counts == "dropped")
      std::fprintf(stderr, "multihot: /access_counts not written: the tables hold %lld rows, more than are counted in "
                   "memory (%lld)\n", static_cast<long long>(s.table_rows_total),
                   static_cast<long long>(o->access_counts_limit));
    fmt::print("expanded {} rows into {} indices ({:.1f} a row) in {:.2f} s: {}{}\n", s.rows, s.indices,
               s.rows > 0 ? static_cast<double>(s.indices) / static_cast<double>(s.rows) : 0.0, s.seconds, o->output,
               s.access_counts == "recounted" ? " (access counts recounted over the bags)" : "");
  });
}

void add_inspect(CLI::App& data) {
  auto* inspect = data.add_subcommand("inspect", "Describe and validate dataset files");
  auto files = std::make_shared<std::vector<std::string>>();
  auto quick = std::make_shared<bool>(false);
  inspect->add_option("files", *files, "dataset files")->required();
  inspect->add_flag("--quick", *quick, "check the layout only, do not read every row");
  inspect->callback([files, quick] {
    // each problem is printed once, in its file's report; the error only names the files
    std::vector<std::string> invalid;
    for (const std::string& f : *files) {
      data::InspectReport r = data::inspect_file(f, !*quick);
      fmt::print("{}", data::format_report(r));
      if (!r.problem.empty()) invalid.push_back(f);
    }
    std::fflush(stdout);
    if (invalid.size() == 1) throw DataError(invalid[0] + ": not a valid dataset (its report says why)");
    if (!invalid.empty())
      throw DataError(fmt::format("{} and {} more files are not valid datasets (their reports say why)", invalid[0],
                                  invalid.size() - 1));
  });
}

}  // namespace

void add_data_commands(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Convert, generate, expand to multi-hot and inspect HDF5 datasets");
  data->require_subcommand(1);
  add_convert(*data);
  add_synth(*data);
  add_multihot(*data);
  add_inspect(*data);
}

}  // namespace recmix::cli
