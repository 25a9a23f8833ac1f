#pragma once
// What a dataset file holds (rows, features, table sizes, attributes, label mean, access skew)
// and whether it is valid: the layout is checked, then every row is read and checked, and the
// first problem found is named (file, dataset, row).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/format.hpp"

namespace recmix::data {

struct TableSkew {
  std::int64_t rows = 0;
  std::int64_t accesses = 0;
  std::int64_t rows_touched = 0;
  double top1_share = 0;  // share of accesses that go to the most accessed 1% of rows (at least one row)
  bool from_stored_counts = false;  // /access_counts/<t> in the file, else counted while scanning
};

struct InspectReport {
  std::string file;
  DatasetInfo info;
  std::vector<std::pair<std::string, std::string>> attributes;  // name, value as text
  std::int64_t rows_checked = 0;
  double label_mean = 0;
  std::vector<TableSkew> tables;
  std::string problem;  // empty when the file is valid
};

// Never throws for a bad file: the first problem goes to report.problem. `scan` reads every row.
InspectReport inspect_file(const std::string& file, bool scan = true);
std::string format_report(const InspectReport& report);

// Share of the total held by the largest ceil(1% of counts) entries.
double top_share(std::vector<std::int64_t> counts, double fraction = 0.01);

}  // namespace recmix::data
