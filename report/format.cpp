#include "report/format.hpp"

#include <fmt/format.h>

#include <cmath>

namespace recmix::report {

namespace {

// "12.50000" -> "12.5", "3.000" -> "3".
std::string strip_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::string figure(double v) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e6 || (a < 1e15 && v == std::round(v))) return fmt::format("{:.0f}", v);
  // Decimals for six significant digits: 5 after the point for 1.x, 2 for 1234.x, 10 for 0.00001x.
  const int magnitude = static_cast<int>(std::floor(std::log10(a)));
  const std::string s = strip_zeros(fmt::format("{:.{}f}", v, std::max(0, 5 - magnitude)));
  return s == "-0" ? "0" : s;
}

std::string bytes(double v) {
  if (!std::isfinite(v)) return "n/a";
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double x = v;
  int unit = 0;
  while (std::fabs(x) >= 1024 && unit < 5) {
    x /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", x);
  const double a = std::fabs(x);
  return fmt::format("{:.{}f} {}", x, a < 9.995 ? 2 : a < 99.95 ? 1 : 0, kUnits[unit]);
}

std::string integer(long long v) { return fmt::format("{}", v); }

}  // namespace recmix::report
