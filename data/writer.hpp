#pragma once
// Streams rows into one dataset file (docs/dataset-format.md). Rows are buffered one chunk at a
// time and appended to extendible chunked datasets, so memory stays at one chunk whatever the
// size; the file is written under a temporary name and renamed only by finish().
#include <cstdint>
#include <string>
#include <vector>

#include "data/h5.hpp"

namespace recmix::data {

struct WriterOptions {
  std::int64_t chunk_rows = 16384;  // rows per HDF5 chunk (and per flush)
  int gzip_level = 0;               // 0: uncompressed; 1..9: shuffle + deflate
  bool index_int64 = false;         // indices as int64 even when every table fits int32
};

class DatasetWriter {
 public:
  DatasetWriter(std::string path, int num_dense, std::vector<std::int64_t> table_rows, bool multi_hot,
                WriterOptions options = {});
  ~DatasetWriter();  // an unfinished file is removed
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // One-hot rows: dense [n x num_dense], labels [n], sparse [n x num_tables].
  void append(std::int64_t n, const float* dense, const float* labels, const std::int64_t* sparse);
  // One row of multi-hot data: for each table, a list of indices (may be empty).
  void append_multi_hot(const float* dense, float label, const std::vector<std::vector<std::int64_t>>& bags);

  // The open file (root group), for extra attributes and datasets (e.g. /access_counts/<t>).
  hid_t file() const { return file_.get(); }
  std::int64_t rows() const { return rows_ + buffered_; }
  const std::string& path() const { return out_.path(); }
  // Flushes, writes the row count, closes and renames onto the final path.
  void finish();

 private:
  void flush();

  h5::AtomicPath out_;
  int num_dense_;
  std::vector<std::int64_t> table_rows_;
  bool multi_hot_;
  WriterOptions options_;
  bool index64_;
  h5::File file_;
  h5::Dataset dense_ds_, labels_ds_, sparse_ds_;
  std::vector<h5::Dataset> offsets_ds_, indices_ds_;
  std::int64_t rows_ = 0, buffered_ = 0;
  std::vector<float> dense_, labels_;
  std::vector<std::int64_t> sparse_;                     // one-hot buffer
  std::vector<std::vector<std::int64_t>> bag_indices_;   // multi-hot buffer per table
  std::vector<std::vector<std::int64_t>> bag_offsets_;   // multi-hot buffer per table (relative, n+1)
  std::vector<std::int64_t> nnz_;                         // indices written per table
  std::vector<std::int64_t> max_bag_;                     // multi-hot: the longest bag per table
  bool finished_ = false;
};

}  // namespace recmix::data
