#include "data/multihot.hpp"

#include <filesystem>
#include <numeric>

#include "core/error.hpp"
#include "data/format.hpp"
#include "data/h5.hpp"
#include "data/row_progress.hpp"
#include "data/writer.hpp"

namespace recmix::data {

namespace {

// The input, checked: a one-hot recmix dataset whose tables match the sizes given.
DatasetInfo check_input(const MultiHotOptions& o) {
  RECMIX_REQUIRE(!o.output.empty(), ConfigError, "multihot: no output file (-o)");
  RECMIX_REQUIRE(o.chunk_rows > 0, ConfigError, "multihot: --chunk-rows must be positive");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.input, ec))
    throw IoError(o.input + ": " + (std::filesystem::exists(o.input, ec) ? "not a regular file" : "no such file"));
  DatasetInfo info = open_file_info(o.input);
  if (info.multi_hot)
    throw DataError(o.input + ": already multi-hot (attribute multi_hot = 1); multihot expands a one-hot dataset");
  const int T = info.num_tables();
  if (T == 0) throw DataError(o.input + ": has no embedding tables to expand");
  if (static_cast<int>(o.sizes.size()) != T)
    throw ConfigError("--sizes: " + std::to_string(o.sizes.size()) + " values for the " + std::to_string(T) +
                      " tables of " + o.input + "; give one bag size per table");
  for (int t = 0; t < T; ++t)
    if (o.sizes[t] < 1)
      throw ConfigError("--sizes: table " + std::to_string(t) + " has bag size " + std::to_string(o.sizes[t]) +
                        "; every bag holds at least the original index (size >= 1)");
  h5::check_output_path(o.output, o.replace);
  if (std::filesystem::equivalent(o.input, o.output, ec))
    throw IoError(o.output + ": is the input of the expansion; write the multi-hot dataset elsewhere");
  return info;
}

// Per table and row, how many times the bags use it (when the input had counts and they fit).
class AccessCounts {
 public:
  AccessCounts(const MultiHotOptions& o, const DatasetInfo& info, MultiHotStats& stats) : table_rows_(info.table_rows) {
    stats.table_rows_total = std::accumulate(table_rows_.begin(), table_rows_.end(), std::int64_t{0});
    h5::Lock lock(h5::api_mutex());
    h5::File in = h5::open_file(o.input);
    if (!h5::exists(in, "access_counts")) return;
    stats.access_counts = stats.table_rows_total <= o.access_counts_limit ? "recounted" : "dropped";
    if (stats.access_counts == "dropped") return;
    counts_.resize(table_rows_.size());
    for (std::size_t t = 0; t < table_rows_.size(); ++t) counts_[t].assign(static_cast<std::size_t>(table_rows_[t]), 0);
  }
  void add(std::size_t t, const std::vector<std::int64_t>& bag) {
    if (counts_.empty()) return;
    for (std::int64_t i : bag) ++counts_[t][static_cast<std::size_t>(i)];
  }
  void write(hid_t file) const {
    for (std::size_t t = 0; t < counts_.size(); ++t)
      h5::write_array(file, "access_counts/" + std::to_string(t), counts_[t].data(),
                      {static_cast<hsize_t>(table_rows_[t])});
  }

 private:
  std::vector<std::int64_t> table_rows_;
  std::vector<std::vector<std::int64_t>> counts_;
};

void write_attributes(hid_t out, const MultiHotOptions& o) {
  h5::Lock lock(h5::api_mutex());
  h5::File in = h5::open_file(o.input);
  h5::write_attribute(out, "producer", std::string("recmix data multihot"));
  h5::write_attribute(out, "source_file", o.input);
  if (h5::has_attribute(in, "producer"))
    h5::write_attribute(out, "source_producer", h5::read_string_attribute(in, "producer"));
  h5::write_attribute(out, "multi_hot_sizes", std::vector<std::int64_t>(o.sizes.begin(), o.sizes.end()));
  h5::write_attribute(out, "multi_hot_seed", static_cast<std::int64_t>(o.seed));
  h5::write_attribute(out, "multi_hot_recipe",
                      std::string("MLPerf DLRM-DCNv2: bag[0] = the one-hot index; bag[k >= 1] uniform over the "
                                  "table, a function of (seed, table, index, k)"));
}

// The rows of the input, a block at a time, expanded into the writer.
void expand_rows(const MultiHotOptions& o, const DatasetInfo& info, DatasetWriter& writer, AccessCounts& counts,
                 MultiHotStats& stats) {
  const int T = info.num_tables();
  const int D = info.num_dense;
  h5::File in;
  h5::Dataset dense_ds, labels_ds, sparse_ds;
  {
    h5::Lock lock(h5::api_mutex());
    in = h5::open_file(o.input);
    dense_ds = h5::open_dataset(in, "dense");
    labels_ds = h5::open_dataset(in, "labels");
    sparse_ds = h5::open_dataset(in, "sparse");
  }
  RowProgress progress("multihot", info.rows, o.progress);
  std::vector<float> dense, labels;
  std::vector<std::int64_t> sparse;
  std::vector<std::vector<std::int64_t>> bags(static_cast<std::size_t>(T));
  for (std::int64_t first = 0; first < info.rows; first += o.chunk_rows) {
    const std::int64_t n = std::min(o.chunk_rows, info.rows - first);
    dense.resize(static_cast<std::size_t>(n * D));
    labels.resize(static_cast<std::size_t>(n));
    sparse.resize(static_cast<std::size_t>(n * T));
    const auto f = static_cast<hsize_t>(first), c = static_cast<hsize_t>(n);
    if (D > 0) h5::read_rows(dense_ds, f, c, dense.data());
    h5::read_rows(labels_ds, f, c, labels.data());
    h5::read_rows(sparse_ds, f, c, sparse.data());
    for (std::int64_t i = 0; i < n; ++i) {
      for (int t = 0; t < T; ++t) {
        const std::int64_t index = sparse[static_cast<std::size_t>(i * T + t)];
        if (index < 0 || index >= info.table_rows[t])
          throw DataError(o.input + ":/sparse row " + std::to_string(first + i) + ": column " + std::to_string(t) +
                          ": index " + std::to_string(index) + " outside table rows [0, " +
                          std::to_string(info.table_rows[t]) + ")");
        multi_hot_bag(o.seed, t, index, o.sizes[t], info.table_rows[t], bags[t]);
        counts.add(static_cast<std::size_t>(t), bags[t]);
        stats.indices += o.sizes[t];
      }
      writer.append_multi_hot(dense.data() + i * D, labels[static_cast<std::size_t>(i)], bags);
    }
    stats.rows += n;
    if (o.fail_after_rows >= 0 && stats.rows >= o.fail_after_rows)
      throw IoError(o.output + ": injected failure after " + std::to_string(stats.rows) + " rows");
    progress.report(stats.rows);
  }
  progress.report(stats.rows, true);
}

}  // namespace

MultiHotStats expand_to_multi_hot(const MultiHotOptions& o) {
  RowProgress clock("multihot", 0, false);
  const DatasetInfo info = check_input(o);
  MultiHotStats stats;
  AccessCounts counts(o, info, stats);
  WriterOptions wopt;
  wopt.chunk_rows = o.chunk_rows;
  wopt.gzip_level = o.gzip_level;
  DatasetWriter writer(o.output, info.num_dense, info.table_rows, true, wopt);
  expand_rows(o, info, writer, counts, stats);
  write_attributes(writer.file(), o);
  {
    h5::Lock lock(h5::api_mutex());
    counts.write(writer.file());
  }
  // the output is checked again before the rename (another process may have made the file since)
  h5::check_output_path(o.output, o.replace);
  writer.finish();
  stats.seconds = clock.seconds();
  return stats;
}

}  // namespace recmix::data
