#pragma once
// The recmix HDF5 dataset format (docs/dataset-format.md): names, version, and the metadata of a
// dataset made of one or more files. open_dataset_info checks every file's layout before any
// training starts, so a wrong file fails at once with its name and the dataset at fault.
#include <cstdint>
#include <string>
#include <vector>

namespace recmix::data {

inline constexpr const char* kFormatName = "recmix-dataset";
inline constexpr std::int64_t kFormatVersion = 1;

// Metadata of a dataset (a list of files read as one logical sequence of rows).
struct DatasetInfo {
  std::int64_t rows = 0;                  // over all files
  int num_dense = 0;
  std::vector<std::int64_t> table_rows;   // rows per embedding table (= number of categorical features)
  bool multi_hot = false;                 // per-table CSR (/sparse/<t>/offsets, indices) instead of /sparse [N, T]
  // Per table, the most indices one row holds: 1 for one-hot data; for multi-hot the file
  // attribute max_bag (the largest over the files); empty when a multi-hot file lacks it.
  std::vector<std::int64_t> max_bag;
  std::int64_t max_bag_rows() const;      // the largest of max_bag; 0 when unknown
  // Per table, the rows whose bound its initial values take (the attribute embedding_init_rows,
  // written by recmix data synth --preset for tables scaled down from the benchmark's); empty
  // when the file has none (each table's own rows).
  std::vector<std::int64_t> init_rows;
  std::vector<std::string> files;
  std::vector<std::int64_t> file_rows;
  int num_tables() const { return static_cast<int>(table_rows.size()); }
};

// Reads and checks the metadata of every file: format name and version, the datasets and their
// types and shapes, and that all files agree on dense count, table sizes and layout.
// Throws DataError / IoError naming the file and dataset.
DatasetInfo open_dataset_info(const std::vector<std::string>& files);

// The metadata of one file (same checks).
DatasetInfo open_file_info(const std::string& file);

// /access_counts/<table> of a file whose metadata is `info` (open_file_info of that file): one count per
// table row, none negative, summing to at most the table's indices in the file (its rows when
// one-hot, the length of /sparse/<table>/indices when multi-hot), so sums over tables and files
// stay in range. DataError naming the file and dataset otherwise.
std::vector<std::int64_t> read_access_counts(const std::string& file, const DatasetInfo& info, int table);

// The shape check alone (one count per table row), for a table too large to read its counts.
void check_access_counts_shape(const std::string& file, const DatasetInfo& info, int table);

}  // namespace recmix::data
