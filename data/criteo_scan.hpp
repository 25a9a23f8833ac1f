#pragma once
// The converter's scan over its inputs (internal to recmix_data): every line of every input is
// read, its delimiter and header found, parsed, and handed on as a row. The counting pass also
// tallies lines and malformed lines under --strict and --max-malformed; a progress line with its
// ETA over every pass goes to stderr.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/converter.hpp"
#include "data/criteo_parser.hpp"
#include "data/line_source.hpp"

namespace recmix::data::detail {

// The separator of an input: TAB or ',' as --format says, else the first found on line 1.
char detect_delimiter(std::string_view first_line, const std::string& format, const std::string& file);

// Whether line 1 is a header (starts with a letter) rather than a row.
bool is_header(std::string_view line);

// What one input gave (in the counting pass; `header` in any pass).
struct InputTally {
  std::int64_t lines = 0, rows = 0, skipped = 0;
  bool header = false;
  std::string header_line;  // line 1 when taken as a header (its first 80 characters)
  MalformedLine first_skipped;
};

// The progress line (with --progress): rows, rows/s, MB/s and the ETA over every pass, printed
// about once a second. A line left without its newline when the conversion fails is ended when
// this is destroyed, so that the error printed next starts a line of its own.
class ScanProgress {
 public:
  ScanProgress(const ConvertOptions& options, int passes);
  ~ScanProgress();
  ScanProgress(const ScanProgress&) = delete;
  ScanProgress& operator=(const ScanProgress&) = delete;

  // A pass over every input begins; `pass` passes came before it.
  void start_pass(int pass);
  void input_done(const LineSource& src);
  // The line for `src`, the input being read; `final` prints it in any case and ends it.
  void report(const LineSource& src, const ConvertStats& stats, bool final);
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  int passes_;
  Clock::time_point start_, last_report_;
  std::int64_t total_size_ = 0;  // compressed bytes of the inputs whose size is known
  std::int64_t done_size_ = 0;   // compressed bytes of finished inputs, over every pass
  bool open_ = false;            // a line was started and not ended
};

// One pass over every input calls back with each row; the last pass (the counting one) also fills
// the stats' lines, malformed lines, reports and bytes, and the tallies of each input.
class CriteoScan {
 public:
  CriteoScan(const ConvertOptions& options, ConvertStats& stats);

  // Calls on_row(row, input index, line number) for every row of every input, in order.
  template <class OnRow>
  void for_each_row(bool counting, OnRow&& on_row);

  const std::vector<InputTally>& tally() const { return tally_; }
  const MalformedLine& first_skipped() const { return first_skipped_; }  // over all inputs
  double seconds() const { return progress_.seconds(); }                  // since construction

 private:
  struct Input {
    std::size_t index;
    std::string label;  // the name in messages ("<stdin>" for "-")
    std::int64_t number = 0;  // of the line last read, 1-based
    char delimiter = 0;
  };
  // What a line was: one that is passed over unseen (a header, an empty line), one dropped as
  // malformed, or a row.
  enum class Line { passed_over, dropped, row };

  Line read_line(Input& in, std::string_view line, bool terminated, bool counting, criteo::Row& row);
  void malformed(const Input& in, const std::string& reason, bool kept);
  void end_input(const LineSource& src, const Input& in, bool counting);

  const ConvertOptions& options_;
  ConvertStats& stats_;
  std::vector<InputTally> tally_;
  MalformedLine first_skipped_;
  ScanProgress progress_;
  int passes_done_ = 0;
};

template <class OnRow>
void CriteoScan::for_each_row(bool counting, OnRow&& on_row) {
  progress_.start_pass(passes_done_++);
  criteo::Row row;
  for (std::size_t f = 0; f < options_.inputs.size(); ++f) {
    const std::string& file = options_.inputs[f];
    Input in{f, file == "-" ? "<stdin>" : file};
    LineSource src(file);
    std::string_view line;
    bool terminated = true;
    while (src.next(line, terminated)) {
      const Line kind = read_line(in, line, terminated, counting, row);
      if (kind == Line::row) on_row(std::as_const(row), f, in.number);
      if (kind != Line::passed_over && (in.number & 0xFFFF) == 0) progress_.report(src, stats_, false);
    }
    end_input(src, in, counting);
  }
}

}  // namespace recmix::data::detail
