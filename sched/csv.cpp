#include "sched/csv.hpp"

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace recmix::sched {

namespace {
std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string field;
  for (char c : line) {
    if (c == sep) {
      out.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}
}  // namespace

bool CsvRow::has(const std::string& column) const { return columns_->count(column) > 0; }

const std::string& CsvRow::text(const std::string& column) const {
  const auto it = columns_->find(column);
  RECMIX_REQUIRE(it != columns_->end(), DataError, file_ + ": no column '" + column + "' in the header");
  RECMIX_REQUIRE(it->second < fields_.size(), DataError,
                 file_ + ":" + std::to_string(line_) + ": missing field '" + column + "'");
  return fields_[it->second];
}

double CsvRow::number(const std::string& column) const {
  const std::string& t = text(column);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  RECMIX_REQUIRE(!t.empty() && end == t.c_str() + t.size() && std::isfinite(v), DataError,
                 file_ + ":" + std::to_string(line_) + ": column '" + column + "': '" + t + "' is not a number");
  return v;
}

double CsvRow::number_or(const std::string& column, double fallback) const {
  return text(column).empty() ? fallback : number(column);
}

CsvReader::CsvReader(std::string path, char separator, bool header)
    : path_(std::move(path)), in_(path_), separator_(separator) {
  RECMIX_REQUIRE(in_, IoError, "cannot open " + path_);
  if (!header) return;
  std::string line;
  RECMIX_REQUIRE(static_cast<bool>(std::getline(in_, line)), DataError, path_ + ": empty file (no header line)");
  line_ = 1;
  const auto names = split(line, separator_);
  for (std::size_t i = 0; i < names.size(); ++i) columns_[names[i]] = i;
}

bool CsvReader::next(CsvRow& row) {
  std::string line;
  while (std::getline(in_, line)) {
    ++line_;
    if (line.empty() || line == "\r") continue;
    row.fields_ = split(line, separator_);
    if (columns_.empty()) {
      for (std::size_t i = 0; i < row.fields_.size(); ++i) columns_[std::to_string(i)] = i;
    }
    row.columns_ = &columns_;
    row.file_ = path_;
    row.line_ = line_;
    return true;
  }
  return false;
}

}  // namespace recmix::sched
