// bench_converter: Criteo TSV -> HDF5 throughput on one core (bench/RESULTS.md).
// Writes a TSV of Criteo-shaped rows (value distributions like the real rows: small integers,
// about 20% missing fields, 8-digit hex categories), then times the line parser alone over the
// file in memory and the whole converter (read, parse, hash, write HDF5). Medians of repeats.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/common/timing.hpp"
#include "core/random.hpp"
#include "data/converter.hpp"
#include "data/criteo_parser.hpp"

namespace {

using recmix::bench::median;
using recmix::bench::seconds_since;

std::string make_tsv(std::int64_t rows, std::uint64_t seed) {
  std::string out;
  out.reserve(static_cast<std::size_t>(rows) * 190);
  recmix::random::CounterRng rng(seed);
  char buf[32];
  for (std::int64_t r = 0; r < rows; ++r) {
    out += rng.next_below(4) == 0 ? '1' : '0';
    for (int d = 0; d < 13; ++d) {
      out += '\t';
      if (rng.next_below(5) == 0) continue;  // missing
      // mostly small counts, a long tail (as in the real rows: 0..13275 in sample a)
      const std::uint64_t magnitude = rng.next_below(5);
      std::int64_t v = static_cast<std::int64_t>(rng.next_below(std::uint64_t{10} << (3 * magnitude)));
      if (d == 1 && rng.next_below(20) == 0) v = -1;
      auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
      out.append(buf, p);
    }
    for (int c = 0; c < 26; ++c) {
      out += '\t';
      if (rng.next_below(6) == 0) continue;
      std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(rng.next_u64() & 0xffffffffu));
      out += buf;
    }
    out += '\n';
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Criteo converter throughput"};
  std::int64_t rows = 1'000'000;
  int repeats = 3;
  std::string dir = std::filesystem::temp_directory_path().string();
  app.add_option("--rows", rows, "rows of the generated TSV")->capture_default_str();
  app.add_option("--repeats", repeats, "timed repeats (median reported)")->capture_default_str();
  app.add_option("--dir", dir, "where the TSV and HDF5 files go")->capture_default_str();
  bool keep = false;
  app.add_flag("--keep", keep, "keep the generated TSV (bench_criteo.tsv) for other tools");
  CLI11_PARSE(app, argc, argv);

  const std::string tsv_path = dir + "/bench_criteo.tsv";
  const std::string h5_path = dir + "/bench_criteo.h5";
  const std::string text = make_tsv(rows, 1);
  std::ofstream(tsv_path, std::ios::binary) << text;
  const double mb = static_cast<double>(text.size()) / 1e6;
  fmt::print("input: {} rows, {:.1f} MB of TSV ({:.0f} bytes per row)\n", rows, mb, text.size() / double(rows));

  // 1. the line parser alone, over the text in memory
  std::vector<double> parse_s;
  for (int i = 0; i < repeats; ++i) {
    recmix::data::criteo::Row row;
    std::int64_t ok = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t nl = text.find('\n', at);
      ok += recmix::data::criteo::parse_line(std::string_view(text).substr(at, nl - at), '\t', row).error ==
            recmix::data::criteo::LineError::none;
      at = nl + 1;
    }
    parse_s.push_back(seconds_since(t0));
    if (ok != rows) fmt::print("parser rejected {} rows\n", rows - ok);
  }
  // 2. the whole converter, file to file (hash mapping, 26 tables of 10M rows, no access counts)
  std::vector<double> convert_s;
  for (int i = 0; i < repeats; ++i) {
    recmix::data::ConvertOptions o;
    o.inputs = {tsv_path};
    o.output = h5_path;
    o.progress = false;
    const auto t0 = std::chrono::steady_clock::now();
    recmix::data::ConvertStats s = recmix::data::convert_criteo(o);
    convert_s.push_back(seconds_since(t0));
    if (s.rows != rows) fmt::print("converter wrote {} rows\n", s.rows);
  }
  const double p = median(parse_s), c = median(convert_s);
  fmt::print("parser only:    {:7.1f} MB/s  {:6.2f} M rows/s  (median of {})\n", mb / p, rows / p / 1e6, repeats);
  fmt::print("full converter: {:7.1f} MB/s  {:6.2f} M rows/s  (median of {}; read + parse + hash + HDF5 write)\n",
             mb / c, rows / c / 1e6, repeats);
  fmt::print("output: {:.1f} MB of HDF5\n", std::filesystem::file_size(h5_path) / 1e6);
  if (!keep) std::filesystem::remove(tsv_path);
  std::filesystem::remove(h5_path);
  return 0;
}
