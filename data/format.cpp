#include "data/format.hpp"

#include <algorithm>

#include <string>

#include "core/error.hpp"
#include "data/h5.hpp"

namespace recmix::data {

namespace {

void require_shape(hid_t dataset, const std::vector<hsize_t>& expected, bool want_float) {
  std::vector<hsize_t> s = h5::shape(dataset);
  auto text = [](const std::vector<hsize_t>& v) {
    std::string t = "[";
    for (std::size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
    return t + "]";
  };
  if (s != expected)
    throw DataError(h5::describe(dataset) + ": shape " + text(s) + ", expected " + text(expected));
  std::size_t size = 0;
  H5T_class_t c = h5::type_class(dataset, &size);
  if (want_float && !(c == H5T_FLOAT && size == 4))
    throw DataError(h5::describe(dataset) + ": element type must be float32");
  if (!want_float && !(c == H5T_INTEGER && (size == 4 || size == 8)))
    throw DataError(h5::describe(dataset) + ": element type must be int32 or int64");
}

}  // namespace

DatasetInfo open_file_info(const std::string& file) {
  h5::Lock lock(h5::api_mutex());
  h5::File f = h5::open_file(file);
  if (!h5::has_attribute(f, "format") || h5::read_string_attribute(f, "format") != kFormatName)
    throw DataError(file + ": not a recmix dataset (root attribute format != \"" + kFormatName + "\")");
  std::int64_t version = h5::read_int_attribute(f, "format_version");
  if (version < 1 || version > kFormatVersion)
    throw DataError(file + ": format_version " + std::to_string(version) + " is not supported (this build reads 1.." +
                    std::to_string(kFormatVersion) + ")");
  DatasetInfo info;
  info.files = {file};
  std::int64_t num_dense = h5::read_int_attribute(f, "num_dense");
  info.table_rows = h5::read_int_vector_attribute(f, "table_rows");
  const std::int64_t multi_hot = h5::read_int_attribute(f, "multi_hot");
  if (multi_hot != 0 && multi_hot != 1)
    throw DataError(file + ": attribute multi_hot is " + std::to_string(multi_hot) + " (0: one-hot, 1: multi-hot)");
  info.multi_hot = multi_hot == 1;
  if (num_dense < 0 || num_dense > 1 << 20) throw DataError(file + ": attribute num_dense out of range");
  info.num_dense = static_cast<int>(num_dense);
  for (std::size_t t = 0; t < info.table_rows.size(); ++t)
    if (info.table_rows[t] <= 0)
      throw DataError(file + ": attribute table_rows[" + std::to_string(t) + "] must be positive");

  h5::Dataset labels = h5::open_dataset(f, "labels");
  std::vector<hsize_t> ls = h5::shape(labels);
  if (ls.size() != 1) throw DataError(h5::describe(labels) + ": must be 1-D");
  const hsize_t n = ls[0];
  require_shape(labels, {n}, true);
  h5::Dataset dense = h5::open_dataset(f, "dense");
  // A /labels of another length than /dense and the rows attribute is the one named.
  if (const std::vector<hsize_t> ds = h5::shape(dense); !ds.empty() && ds[0] != n && h5::has_attribute(f, "rows") &&
                                                       h5::read_int_attribute(f, "rows") == static_cast<std::int64_t>(ds[0]))
    throw DataError(h5::describe(labels) + ": " + std::to_string(n) + " rows, but /dense and the attribute rows have " +
                    std::to_string(ds[0]));
  require_shape(dense, {n, static_cast<hsize_t>(info.num_dense)}, true);
  const auto tables = static_cast<hsize_t>(info.table_rows.size());
  if (!info.multi_hot) {
    if (tables > 0) {
      h5::Dataset sparse = h5::open_dataset(f, "sparse");
      require_shape(sparse, {n, tables}, false);
    }
  } else {
    for (hsize_t t = 0; t < tables; ++t) {
      std::string base = "sparse/" + std::to_string(t);
      h5::Dataset offsets = h5::open_dataset(f, base + "/offsets");
      require_shape(offsets, {n + 1}, false);
      h5::Dataset indices = h5::open_dataset(f, base + "/indices");
      std::vector<hsize_t> is = h5::shape(indices);
      if (is.size() != 1) throw DataError(h5::describe(indices) + ": must be 1-D");
      require_shape(indices, is, false);
      std::int64_t ends[2];
      h5::read_rows(offsets, 0, 1, &ends[0]);
      h5::read_rows(offsets, n, 1, &ends[1]);
      if (ends[0] != 0 || ends[1] != static_cast<std::int64_t>(is[0]))
        throw DataError(h5::describe(offsets) + ": must start at 0 and end at the length of indices (" +
                        std::to_string(is[0]) + "), found " + std::to_string(ends[0]) + " .. " +
                        std::to_string(ends[1]));
    }
  }
  if (!info.multi_hot) {
    info.max_bag.assign(tables, 1);
  } else if (h5::has_attribute(f, "max_bag")) {
    info.max_bag = h5::read_int_vector_attribute(f, "max_bag");
    if (info.max_bag.size() != tables)
      throw DataError(file + ": attribute max_bag has " + std::to_string(info.max_bag.size()) + " entries for " +
                      std::to_string(tables) + " tables");
    for (auto m : info.max_bag)
      if (m < 0) throw DataError(file + ": attribute max_bag holds a negative size");
  }
  if (h5::has_attribute(f, "embedding_init_rows")) {
    info.init_rows = h5::read_int_vector_attribute(f, "embedding_init_rows");
    if (info.init_rows.size() != tables)
      throw DataError(file + ": attribute embedding_init_rows has " + std::to_string(info.init_rows.size()) +
                      " entries for " + std::to_string(tables) + " tables");
    for (auto r : info.init_rows)
      if (r < 1) throw DataError(file + ": attribute embedding_init_rows holds " + std::to_string(r) + ", below 1");
  }
  // Required attributes, as documented: present and agreeing with the data.
  for (const char* name : {"num_tables", "rows"})
    if (!h5::has_attribute(f, name)) throw DataError(file + ": required attribute " + name + " is missing");
  if (h5::read_int_attribute(f, "num_tables") != static_cast<std::int64_t>(tables))
    throw DataError(file + ": attribute num_tables (" + std::to_string(h5::read_int_attribute(f, "num_tables")) +
                    ") disagrees with table_rows (" + std::to_string(tables) + " tables)");
  if (h5::read_int_attribute(f, "rows") != static_cast<std::int64_t>(n))
    throw DataError(file + ": attribute rows disagrees with the length of /labels");
  info.rows = static_cast<std::int64_t>(n);
  info.file_rows = {info.rows};
  return info;
}

DatasetInfo open_dataset_info(const std::vector<std::string>& files) {
  if (files.empty()) throw ConfigError("dataset: no files given");
  DatasetInfo all;
  for (const std::string& file : files) {
    DatasetInfo one = open_file_info(file);
    if (all.files.empty()) {
      all = one;
      continue;
    }
    if (one.num_dense != all.num_dense || one.table_rows != all.table_rows || one.multi_hot != all.multi_hot ||
        one.init_rows != all.init_rows)
      throw DataError(file + ": num_dense, table_rows, embedding_init_rows or layout differ from " + all.files[0] +
                      " (all files of a dataset must agree)");
    all.files.push_back(file);
    if (one.max_bag.empty() || all.max_bag.empty())
      all.max_bag.clear();
    else
      for (std::size_t t = 0; t < all.max_bag.size(); ++t) all.max_bag[t] = std::max(all.max_bag[t], one.max_bag[t]);
    all.file_rows.push_back(one.rows);
    all.rows += one.rows;
  }
  return all;
}

std::int64_t DatasetInfo::max_bag_rows() const {
  std::int64_t m = 0;
  for (auto b : max_bag) m = std::max(m, b);
  return m;
}

namespace {

void check_counts_shape(const h5::File& f, const std::string& file, const DatasetInfo& info, int table) {
  const std::string name = "access_counts/" + std::to_string(table);
  const std::int64_t table_rows = info.table_rows.at(static_cast<std::size_t>(table));
  const std::vector<hsize_t> dims = h5::shape(h5::open_dataset(f, name));
  if (dims.size() != 1 || dims[0] != static_cast<hsize_t>(table_rows))
    throw DataError(file + ":/" + name + ": length differs from table_rows[" + std::to_string(table) + "] = " +
                    std::to_string(table_rows));
}

}  // namespace

void check_access_counts_shape(const std::string& file, const DatasetInfo& info, int table) {
  check_counts_shape(h5::open_file(file), file, info, table);
}

std::vector<std::int64_t> read_access_counts(const std::string& file, const DatasetInfo& info, int table) {
  const std::string name = "access_counts/" + std::to_string(table);
  const std::string where = file + ":/" + name;
  h5::File f = h5::open_file(file);
  // The shape first: a damaged file may claim any length, which is not to be allocated.
  check_counts_shape(f, file, info, table);
  std::int64_t indices = info.rows;
  if (info.multi_hot) {
    const std::vector<hsize_t> n = h5::shape(h5::open_dataset(f, "sparse/" + std::to_string(table) + "/indices"));
    indices = n.size() == 1 ? static_cast<std::int64_t>(n[0]) : 0;
  }
  std::vector<std::int64_t> counts = h5::read_array<std::int64_t>(f, name);
  std::int64_t sum = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0)
      throw DataError(where + ": row " + std::to_string(r) + " has a negative count (" + std::to_string(counts[r]) + ")");
    if (counts[r] > indices - sum)  // sum + counts[r] > indices, without overflowing
      throw DataError(where + ": the counts sum to more than the " + std::to_string(indices) + " indices of table " +
                      std::to_string(table) + " in the file");
    sum += counts[r];
  }
  return counts;
}

}  // namespace recmix::data
