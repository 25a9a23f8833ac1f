#pragma once
// The MLPerf Training DLRM-DCNv2 benchmark's data shape, one owner for the data tools
// (recmix data multihot, synth --preset mlperf-dcnv2) and the scheduler's dlrm-dcnv2 job type.
// Source: the benchmark's reference (mlcommons/training recommendation_v2/torchrec_dlrm, after
// facebookresearch/dlrm torchrec_dlrm), docs/dataset-format.md.
#include <cstdint>
#include <vector>

namespace recmix {

// The bag size per table: 26 tables, 214 indices a sample.
inline const std::vector<int>& mlperf_dcnv2_bag_sizes() {
  static const std::vector<int> sizes = {3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};
  return sizes;
}

// The table sizes: the Criteo 1TB cardinalities capped at 40M rows.
inline const std::vector<std::int64_t>& mlperf_dcnv2_table_rows() {
  static const std::vector<std::int64_t> rows = {40000000, 39060,    17295,    7424,   20265, 3,        7122,
                                                  1543,     63,       40000000, 3067956, 405282, 10,      2209,
                                                  11938,    155,      4,        976,    14,    40000000, 40000000,
                                                  40000000, 590152,   12973,    108,    36};
  return rows;
}

}  // namespace recmix
