#include "data/criteo_scan.hpp"

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"

namespace recmix::data::detail {

namespace {

std::string describe(const criteo::LineResult& r) {
  std::string s = criteo::error_text(r.error);
  if (r.field >= 0) s += std::string(" (field ") + criteo::field_name(r.field) + ")";
  return s;
}

}  // namespace

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

// --- ScanProgress ---

ScanProgress::ScanProgress(const ConvertOptions& options, int passes)
    : enabled_(options.progress), passes_(passes), start_(Clock::now()), last_report_(start_) {
  for (const std::string& in : options.inputs) {
    struct stat st {};
    if (in != "-" && ::stat(in.c_str(), &st) == 0) total_size_ += static_cast<std::int64_t>(st.st_size);
  }
}

ScanProgress::~ScanProgress() {
  if (open_) std::fputc('\n', stderr);
}

void ScanProgress::start_pass(int pass) { done_size_ = total_size_ * pass; }

void ScanProgress::input_done(const LineSource& src) { done_size_ += std::max<std::int64_t>(src.size(), 0); }

void ScanProgress::report(const LineSource& src, const ConvertStats& stats, bool final) {
  if (!enabled_) return;
  open_ = !final;
  const auto now = Clock::now();
  if (!final && now - last_report_ < std::chrono::seconds(1)) return;
  last_report_ = now;
  const double t = std::chrono::duration<double>(now - start_).count();
  const std::int64_t pos = done_size_ + src.position();
  const double all = static_cast<double>(total_size_) * passes_;
  const std::string eta = final ? std::string("0s")
                          : total_size_ > 0 && pos > 0
                              ? fmt::format("{:.0f}s", std::max(0.0, t * (all / static_cast<double>(pos) - 1.0)))
                              : std::string("?");
  std::fprintf(stderr, "\rconvert: %lld rows, %.0f rows/s, %.1f MB/s, ETA %s   %s",
               static_cast<long long>(stats.rows), stats.rows / std::max(t, 1e-9),
               (stats.bytes + (final ? 0 : src.bytes())) / 1e6 / std::max(t, 1e-9), eta.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

double ScanProgress::seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

// --- CriteoScan ---

CriteoScan::CriteoScan(const ConvertOptions& options, ConvertStats& stats)
    : options_(options),
      stats_(stats),
      tally_(options.inputs.size()),
      progress_(options, options.mapping == "vocabulary" ? 2 : 1) {}

CriteoScan::Line CriteoScan::read_line(Input& in, std::string_view line, bool terminated, bool counting,
                                       criteo::Row& row) {
  ++in.number;
  if (counting) {
    ++stats_.lines;
    ++tally_[in.index].lines;
  }
  if (in.number == 1) {
    in.delimiter = detect_delimiter(line, options_.format, in.label);
    if (is_header(line)) {
      tally_[in.index].header = true;
      tally_[in.index].header_line = std::string(line.substr(0, 80));
      return Line::passed_over;
    }
  }
  if (line.empty() && terminated) {
    if (counting) malformed(in, "empty line", false);
    return Line::passed_over;
  }
  const criteo::LineResult r = criteo::parse_line(line, in.delimiter, row);
  const bool keep = r.error == criteo::LineError::none || r.error == criteo::LineError::carriage_return;
  if (counting) {
    // a complete last line without '\n' is fine; an incomplete one is a truncated file
    if (!terminated && !keep)
      malformed(in, "truncated last line: " + describe(r), false);
    else if (r.error == criteo::LineError::carriage_return)
      malformed(in, "CRLF line ending (row kept)", true);
    else if (!keep)
      malformed(in, describe(r), false);
    if (keep) ++tally_[in.index].rows;
  }
  return keep ? Line::row : Line::dropped;
}

// Counts a malformed line, remembers the first few, and fails under strict or past --max-malformed.
void CriteoScan::malformed(const Input& in, const std::string& reason, bool kept) {
  ++stats_.malformed;
  if (options_.strict) throw DataError(in.label + ":" + std::to_string(in.number) + ": " + reason + " (--strict)");
  if (static_cast<int>(stats_.reported.size()) < options_.max_reported)
    stats_.reported.push_back({in.label, in.number, reason});
  if (kept) return;
  if (stats_.skipped++ == 0) first_skipped_ = {in.label, in.number, reason};
  InputTally& tally = tally_[in.index];
  if (tally.skipped++ == 0) tally.first_skipped = {in.label, in.number, reason};
  if (options_.max_malformed >= 0 && stats_.skipped > options_.max_malformed)
    throw DataError(fmt::format("{} malformed lines skipped, more than --max-malformed {} allows; "
                                "the first: {}:{}: {}",
                                stats_.skipped, options_.max_malformed, first_skipped_.file, first_skipped_.line,
                                first_skipped_.reason));
}

void CriteoScan::end_input(const LineSource& src, const Input& in, bool counting) {
  if (counting) stats_.bytes += src.bytes();
  progress_.input_done(src);
  if (in.index + 1 == options_.inputs.size() && counting) progress_.report(src, stats_, true);
}

}  // namespace recmix::data::detail
