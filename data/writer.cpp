#include "data/writer.hpp"

#include <algorithm>
#include <limits>

#include "data/format.hpp"

namespace recmix::data {

DatasetWriter::DatasetWriter(std::string path, int num_dense, std::vector<std::int64_t> table_rows, bool multi_hot,
                             WriterOptions options)
    : out_(std::move(path)),
      num_dense_(num_dense),
      table_rows_(std::move(table_rows)),
      multi_hot_(multi_hot),
      options_(options) {
  RECMIX_REQUIRE(options_.chunk_rows > 0, ConfigError, "dataset writer: chunk_rows must be positive");
  RECMIX_REQUIRE(options_.gzip_level >= 0 && options_.gzip_level <= 9, ConfigError,
                 "dataset writer: gzip level must be in 0..9");
  std::int64_t max_rows = 0;
  for (std::size_t t = 0; t < table_rows_.size(); ++t) {
    RECMIX_REQUIRE(table_rows_[t] > 0, ConfigError,
                   "dataset writer: table " + std::to_string(t) + " must have at least one row");
    max_rows = std::max(max_rows, table_rows_[t]);
  }
  index64_ = options_.index_int64 || max_rows > std::numeric_limits<std::int32_t>::max();
  const hid_t index_type = index64_ ? H5T_STD_I64LE : H5T_STD_I32LE;
  const auto chunk = static_cast<hsize_t>(options_.chunk_rows);
  const auto tables = static_cast<hsize_t>(table_rows_.size());

  h5::Lock lock(h5::api_mutex());
  file_ = h5::create_file(out_.temp());
  h5::write_attribute(file_, "format", std::string(kFormatName));
  h5::write_attribute(file_, "format_version", kFormatVersion);
  h5::write_attribute(file_, "num_dense", static_cast<std::int64_t>(num_dense_));
  h5::write_attribute(file_, "num_tables", static_cast<std::int64_t>(tables));
  h5::write_attribute(file_, "table_rows", table_rows_);
  h5::write_attribute(file_, "multi_hot", static_cast<std::int64_t>(multi_hot_ ? 1 : 0));
  h5::write_attribute(file_, "rows", std::int64_t{0});

  h5::CreateOptions rows2d{{chunk, static_cast<hsize_t>(std::max(num_dense_, 1))}, options_.gzip_level, true};
  if (num_dense_ == 0) rows2d.chunk[1] = 1;
  dense_ds_ = h5::create_dataset(file_, "dense", H5T_IEEE_F32LE, {0, static_cast<hsize_t>(num_dense_)}, rows2d);
  labels_ds_ = h5::create_dataset(file_, "labels", H5T_IEEE_F32LE, {0}, {{chunk}, options_.gzip_level, true});
  if (!multi_hot_) {
    if (tables > 0)
      sparse_ds_ = h5::create_dataset(file_, "sparse", index_type, {0, tables},
                                      {{chunk, tables}, options_.gzip_level, true});
  } else {
    bag_indices_.resize(tables);
    bag_offsets_.assign(tables, std::vector<std::int64_t>{0});
    max_bag_.assign(tables, 0);
    nnz_.assign(tables, 0);
    for (hsize_t t = 0; t < tables; ++t) {
      std::string base = "sparse/" + std::to_string(t);
      offsets_ds_.push_back(
          h5::create_dataset(file_, base + "/offsets", H5T_STD_I64LE, {1}, {{chunk}, options_.gzip_level, true}));
      std::int64_t zero = 0;
      h5::write_rows(offsets_ds_.back(), 0, 1, &zero);
      indices_ds_.push_back(
          h5::create_dataset(file_, base + "/indices", index_type, {0}, {{chunk}, options_.gzip_level, true}));
    }
  }
}

DatasetWriter::~DatasetWriter() {
  if (!finished_) {
    h5::Lock lock(h5::api_mutex());
    dense_ds_.reset();
    labels_ds_.reset();
    sparse_ds_.reset();
    offsets_ds_.clear();
    indices_ds_.clear();
    file_.reset();
    out_.discard();
  }
}

void DatasetWriter::append(std::int64_t n, const float* dense, const float* labels, const std::int64_t* sparse) {
  RECMIX_REQUIRE(!multi_hot_, Error, "dataset writer: append() on a multi-hot dataset");
  const std::size_t tables = table_rows_.size();
  std::int64_t done = 0;
  while (done < n) {
    std::int64_t take = std::min(n - done, options_.chunk_rows - buffered_);
    dense_.insert(dense_.end(), dense + done * num_dense_, dense + (done + take) * num_dense_);
    labels_.insert(labels_.end(), labels + done, labels + done + take);
    sparse_.insert(sparse_.end(), sparse + done * static_cast<std::int64_t>(tables),
                   sparse + (done + take) * static_cast<std::int64_t>(tables));
    buffered_ += take;
    done += take;
    if (buffered_ == options_.chunk_rows) flush();
  }
}

void DatasetWriter::append_multi_hot(const float* dense, float label,
                                     const std::vector<std::vector<std::int64_t>>& bags) {
  RECMIX_REQUIRE(multi_hot_, Error, "dataset writer: append_multi_hot() on a one-hot dataset");
  RECMIX_REQUIRE(bags.size() == table_rows_.size(), Error, "dataset writer: one bag per table expected");
  dense_.insert(dense_.end(), dense, dense + num_dense_);
  labels_.push_back(label);
  for (std::size_t t = 0; t < bags.size(); ++t) {
    bag_indices_[t].insert(bag_indices_[t].end(), bags[t].begin(), bags[t].end());
    bag_offsets_[t].push_back(static_cast<std::int64_t>(bag_indices_[t].size()));
    max_bag_[t] = std::max(max_bag_[t], static_cast<std::int64_t>(bags[t].size()));
  }
  if (++buffered_ == options_.chunk_rows) flush();
}

template <class T>
static void append_rows(hid_t ds, hsize_t first, hsize_t count, const T* data) {
  h5::extend_rows(ds, first + count);
  h5::write_rows(ds, first, count, data);
}

void DatasetWriter::flush() {
  if (buffered_ == 0) return;
  h5::Lock lock(h5::api_mutex());
  const auto first = static_cast<hsize_t>(rows_);
  const auto count = static_cast<hsize_t>(buffered_);
  // Each dataset is flushed after its rows so that its chunk is allocated now: a chunk row
  // range is then stored as dense, labels, sparse together and in row order (without it, chunks
  // smaller than the chunk cache reach the file late, labels at its end), which file-order reads
  // need to stay sequential.
  append_rows(dense_ds_, first, count, dense_.data());
  RECMIX_H5_CHECK(H5Dflush(dense_ds_), IoError, out_.temp());
  append_rows(labels_ds_, first, count, labels_.data());
  RECMIX_H5_CHECK(H5Dflush(labels_ds_), IoError, out_.temp());
  if (!multi_hot_) {
    if (sparse_ds_.valid()) {
      if (index64_) {
        append_rows(sparse_ds_, first, count, sparse_.data());
      } else {
        std::vector<std::int32_t> narrow(sparse_.begin(), sparse_.end());
        append_rows(sparse_ds_, first, count, narrow.data());
      }
      RECMIX_H5_CHECK(H5Dflush(sparse_ds_), IoError, out_.temp());
    }
  } else {
    for (std::size_t t = 0; t < table_rows_.size(); ++t) {
      std::vector<std::int64_t> absolute(bag_offsets_[t].begin() + 1, bag_offsets_[t].end());
      for (auto& o : absolute) o += nnz_[t];
      append_rows(offsets_ds_[t], first + 1, count, absolute.data());
      const auto nnz = static_cast<hsize_t>(bag_indices_[t].size());
      if (nnz > 0) {
        if (index64_) {
          append_rows(indices_ds_[t], static_cast<hsize_t>(nnz_[t]), nnz, bag_indices_[t].data());
        } else {
          std::vector<std::int32_t> narrow(bag_indices_[t].begin(), bag_indices_[t].end());
          append_rows(indices_ds_[t], static_cast<hsize_t>(nnz_[t]), nnz, narrow.data());
        }
      }
      nnz_[t] += static_cast<std::int64_t>(nnz);
      bag_indices_[t].clear();
      bag_offsets_[t].assign(1, 0);
    }
  }
  rows_ += buffered_;
  buffered_ = 0;
  dense_.clear();
  labels_.clear();
  sparse_.clear();
}

void DatasetWriter::finish() {
  RECMIX_REQUIRE(!finished_, Error, "dataset writer: finish() called twice");
  h5::Lock lock(h5::api_mutex());
  flush();
  h5::write_attribute(file_, "rows", rows_);
  // The longest bag of each table: sizes the staging slots of tiered tables (format.hpp).
  if (multi_hot_) h5::write_attribute(file_, "max_bag", max_bag_);
  dense_ds_.reset();
  labels_ds_.reset();
  sparse_ds_.reset();
  offsets_ds_.clear();
  indices_ds_.clear();
  RECMIX_H5_CHECK(H5Fflush(file_, H5F_SCOPE_GLOBAL), IoError, out_.temp());
  file_.reset();
  out_.commit();
  finished_ = true;
}

}  // namespace recmix::data
