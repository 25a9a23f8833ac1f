#pragma once
// A small reader for the comma- (or tab-) separated trace files: a header line names the
// columns, fields are looked up by name, and every error names the file, line and column.
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace recmix::sched {

class CsvRow {
 public:
  const std::string& text(const std::string& column) const;
  double number(const std::string& column) const;  // DataError unless a finite number
  // Empty field -> fallback.
  double number_or(const std::string& column, double fallback) const;
  bool has(const std::string& column) const;
  std::size_t line() const { return line_; }

 private:
  friend class CsvReader;
  const std::unordered_map<std::string, std::size_t>* columns_ = nullptr;
  std::vector<std::string> fields_;
  std::string file_;
  std::size_t line_ = 0;
};

class CsvReader {
 public:
  // header = false: columns are named "0", "1", ... and every line is data.
  explicit CsvReader(std::string path, char separator = ',', bool header = true);
  bool next(CsvRow& row);  // false at the end; skips blank lines
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  char separator_;
  std::unordered_map<std::string, std::size_t> columns_;
  std::size_t line_ = 0;
};

}  // namespace recmix::sched
