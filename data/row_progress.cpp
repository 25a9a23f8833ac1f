#include "data/row_progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>

namespace recmix::data {

RowProgress::RowProgress(std::string label, std::int64_t total_rows, bool enabled)
    : label_(std::move(label)), total_(total_rows), enabled_(enabled), start_(Clock::now()), last_report_(start_) {}

RowProgress::~RowProgress() {
  if (open_) std::fputc('\n', stderr);
}

void RowProgress::report(std::int64_t done, bool final) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (!final && now - last_report_ < std::chrono::seconds(1)) return;
  last_report_ = now;
  open_ = !final;
  const double t = std::chrono::duration<double>(now - start_).count();
  const double share = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const std::string eta = final ? std::string("0s")
                          : done > 0 ? fmt::format("{:.0f}s", std::max(0.0, t * (1.0 / share - 1.0)))
                                     : std::string("?");
  std::fprintf(stderr, "\r%s: %lld of %lld rows (%.0f%%), %.0f rows/s, ETA %s   %s", label_.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), 100.0 * share,
               static_cast<double>(done) / std::max(t, 1e-9), eta.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

double RowProgress::seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

}  // namespace recmix::data
