#pragma once
// One-hot -> multi-hot, as the MLPerf Training DLRM-DCNv2 benchmark makes its multi-hot Criteo
// data (docs/dataset-format.md, "Multi-hot expansion"): every one-hot index becomes a bag whose
// first index is the original one and whose other indices are drawn uniformly over the table as
// a pure function of (seed, table, original index), so equal indices always give equal bags.
// The expansion streams a block of rows at a time and writes through a temporary file.
#include <cstdint>
#include <string>
#include <vector>

#include "core/mlperf_dcnv2.hpp"
#include "core/random.hpp"

namespace recmix::data {

// The benchmark's bag sizes and table sizes (core/mlperf_dcnv2.hpp).
using recmix::mlperf_dcnv2_bag_sizes;
using recmix::mlperf_dcnv2_table_rows;

// The bag of one-hot index `index` of table `table` (of `rows` rows): `size` indices, the first
// `index` itself, the others uniform in [0, rows) (bag[k] depends on seed, table, index and k only).
inline void multi_hot_bag(std::uint64_t seed, int table, std::int64_t index, int size, std::int64_t rows,
                          std::vector<std::int64_t>& bag) {
  bag.resize(static_cast<std::size_t>(size));
  if (size == 0) return;
  bag[0] = index;
  random::CounterRng rng(random::hash(seed, 0x6D756C7469ull + static_cast<std::uint64_t>(table),
                                      static_cast<std::uint64_t>(index)));
  for (int k = 1; k < size; ++k) bag[k] = static_cast<std::int64_t>(rng.next_below(static_cast<std::uint64_t>(rows)));
}

struct MultiHotOptions {
  std::string input;                 // a one-hot dataset file
  std::string output;                // the multi-hot file
  std::vector<int> sizes;            // bag size per table of the input (each >= 1)
  std::uint64_t seed = 0;
  bool replace = false;              // an existing output file is replaced (CLI: --force)
  bool progress = true;              // progress line with ETA on stderr
  std::int64_t chunk_rows = 16384;   // rows read (and written) per block and per HDF5 chunk
  int gzip_level = 0;
  // /access_counts of the input are recounted over the bags when its tables hold at most this
  // many rows together, and dropped otherwise (MultiHotStats::access_counts says which)
  std::int64_t access_counts_limit = std::int64_t{1} << 25;
  std::int64_t fail_after_rows = -1; // tests: an IoError once this many rows are written (>= 0)
};

struct MultiHotStats {
  std::int64_t rows = 0;
  std::int64_t indices = 0;          // over every table
  std::string access_counts = "none";  // none (the input had none) | recounted | dropped
  std::int64_t table_rows_total = 0;
  double seconds = 0;
};

// ConfigError for bad sizes (their count, a size < 1); IoError for a missing input or a refused
// output (exists without replace, not a regular file, the input itself); DataError for an input
// that is not a one-hot recmix dataset or holds an index outside its table. Nothing is left at
// the output path on failure, and what was there before is kept.
MultiHotStats expand_to_multi_hot(const MultiHotOptions& options);

}  // namespace recmix::data
