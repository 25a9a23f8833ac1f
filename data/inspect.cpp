#include "data/inspect.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.hpp"
#include "data/h5.hpp"
#include "data/reader.hpp"

namespace recmix::data {

namespace {

constexpr std::int64_t kMaxCountedRows = std::int64_t{1} << 26;

std::string attribute_text_or_throw(hid_t obj, const std::string& name) {
  h5::Lock lock(h5::api_mutex());
  h5::Attribute a(RECMIX_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), IoError, name));
  h5::Datatype type(RECMIX_H5_CHECK(H5Aget_type(a), IoError, name));
  const H5T_class_t c = H5Tget_class(type);
  if (c == H5T_STRING) return h5::read_string_attribute(obj, name);
  if (c == H5T_INTEGER) {
    auto v = h5::read_int_vector_attribute(obj, name);
    if (v.size() == 1) return std::to_string(v[0]);
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }
  if (c == H5T_FLOAT) {
    auto v = h5::read_double_vector_attribute(obj, name);
    if (v.size() == 1) return fmt::format("{:.6g}", v[0]);
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.6g}", i ? ", " : "", v[i]);
    return s + "]";
  }
  return "(unsupported type)";
}

// An attribute's value as text; one the format does not use may hold anything (a list of
// strings, an unsigned value beyond int64), which is shown as such rather than failing the file.
std::string attribute_text(hid_t obj, const std::string& name) {
  try {
    return attribute_text_or_throw(obj, name);
  } catch (const DataError& e) {
    return std::string("(not shown: ") + e.what() + ")";
  }
}

}  // namespace

double top_share(std::vector<std::int64_t> counts, double fraction) {
  if (counts.empty()) return 0;
  const auto k = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(fraction * counts.size())));
  std::nth_element(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(k - 1), counts.end(),
                   std::greater<>());
  std::int64_t top = 0, all = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    all += counts[i];
    if (i < k) top += counts[i];
  }
  return all > 0 ? static_cast<double>(top) / static_cast<double>(all) : 0.0;
}

InspectReport inspect_file(const std::string& file, bool scan) {
  InspectReport report;
  report.file = file;
  try {
    report.info = open_file_info(file);
    const int T = report.info.num_tables();
    report.tables.resize(T);
    std::vector<std::vector<std::int64_t>> counts(T);
    bool need_counting = false;
    {
      h5::File f = h5::open_file(file);
      for (const std::string& name : h5::attribute_names(f)) report.attributes.push_back({name, attribute_text(f, name)});
      std::int64_t total = 0;
      for (int t = 0; t < T; ++t) {
        report.tables[t].rows = report.info.table_rows[t];
        const std::string name = "access_counts/" + std::to_string(t);
        const bool stored = h5::exists(f, name);
        if (stored && report.info.table_rows[t] > kMaxCountedRows)
          check_access_counts_shape(file, report.info, t);  // not summarised; the shape is still checked
        if (stored && report.info.table_rows[t] <= kMaxCountedRows) {
          counts[t] = read_access_counts(file, report.info, t);
          report.tables[t].from_stored_counts = true;
        } else {
          // Capped: the sum of any number of tables' rows stays far from overflowing.
          total += std::min(report.info.table_rows[t], kMaxCountedRows + 1);
          need_counting = true;
        }
      }
      if (total > kMaxCountedRows) need_counting = false;
    }
    if (need_counting && scan)
      for (int t = 0; t < T; ++t)
        if (!report.tables[t].from_stored_counts) counts[t].assign(static_cast<std::size_t>(report.info.table_rows[t]), 0);

    if (scan && report.info.rows > 0) {
      ReaderOptions ro;
      ro.global_batch = 65536;
      ro.drop_last = false;
      ro.prefetch = 1;
      Reader reader({file}, ro);
      Batch batch;
      double label_sum = 0;
      while (reader.next(batch)) {
        for (float y : batch.labels) label_sum += y;
        for (int t = 0; t < T; ++t)
          if (!report.tables[t].from_stored_counts && !counts[t].empty())
            for (std::int64_t v : batch.indices[t]) ++counts[t][static_cast<std::size_t>(v)];
        report.rows_checked += batch.size;
      }
      report.label_mean = label_sum / static_cast<double>(report.info.rows);
    }
    for (int t = 0; t < T; ++t) {
      if (counts[t].empty()) continue;
      TableSkew& s = report.tables[t];
      for (std::int64_t c : counts[t]) {
        s.accesses += c;
        s.rows_touched += c > 0;
      }
      s.top1_share = top_share(counts[t]);
    }
  } catch (const Error& e) {
    report.problem = e.what();
  }
  return report;
}

std::string format_report(const InspectReport& r) {
  std::string s = fmt::format("file: {}\n", r.file);
  s += fmt::format("rows: {}\ndense features: {}\ncategorical features (tables): {} ({})\n", r.info.rows,
                   r.info.num_dense, r.info.num_tables(), r.info.multi_hot ? "multi-hot CSR" : "one-hot");
  if (!r.attributes.empty()) {
    s += "attributes:\n";
    for (const auto& [name, value] : r.attributes) {
      std::string v = value;
      std::replace(v.begin(), v.end(), '\n', ' ');
      s += fmt::format("  {} = {}\n", name, v);
    }
  }
  if (r.rows_checked > 0) s += fmt::format("label mean: {:.6f}\n", r.label_mean);
  if (!r.tables.empty()) {
    s += "tables:      rows   accesses  rows touched  top-1% share\n";
    for (std::size_t t = 0; t < r.tables.size(); ++t) {
      const TableSkew& x = r.tables[t];
      if (x.accesses > 0)
        s += fmt::format("  {:>3} {:>10} {:>10} {:>13} {:>12.1f}%{}\n", t, x.rows, x.accesses, x.rows_touched,
                         100.0 * x.top1_share, x.from_stored_counts ? " (stored counts)" : "");
      else
        s += fmt::format("  {:>3} {:>10}          -             -            -\n", t, x.rows);
    }
  }
  if (r.problem.empty())
    s += fmt::format("valid: yes ({} rows checked)\n", r.rows_checked);
  else
    s += fmt::format("valid: NO: {}\n", r.problem);
  return s;
}

}  // namespace recmix::data
