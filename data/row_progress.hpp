#pragma once
// A progress line on stderr for a pass over a known number of rows: rows done, rows/s and the
// ETA, printed about once a second. A line left open when the work fails is ended when this is
// destroyed, so that the error printed next starts a line of its own.
#include <chrono>
#include <cstdint>
#include <string>

namespace recmix::data {

class RowProgress {
 public:
  RowProgress(std::string label, std::int64_t total_rows, bool enabled);
  ~RowProgress();
  RowProgress(const RowProgress&) = delete;
  RowProgress& operator=(const RowProgress&) = delete;

  // `done` rows of the total are finished; `final` prints the line in any case and ends it.
  void report(std::int64_t done, bool final = false);
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  std::int64_t total_;
  bool enabled_;
  Clock::time_point start_, last_report_;
  bool open_ = false;
};

}  // namespace recmix::data
