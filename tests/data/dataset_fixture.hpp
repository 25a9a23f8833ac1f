#pragma once
// Small datasets whose every value is a known function of the row, so a test can check any
// batch without a second reader: dense[r][d] = r + d / 16, label = r % 2, one-hot index
// (r * 7 + t) % rows_t, multi-hot bag of r % 4 entries (r + k * 3 + t) % rows_t.
#include <cstdint>
#include <string>
#include <vector>

#include "data/writer.hpp"

namespace recmix::data::test {

inline float fixture_dense(std::int64_t row, int d) { return static_cast<float>(row) + d / 16.0f; }
inline float fixture_label(std::int64_t row) { return static_cast<float>(row % 2); }
inline std::int64_t fixture_index(std::int64_t row, int t, std::int64_t rows_t) { return (row * 7 + t) % rows_t; }
inline std::vector<std::int64_t> fixture_bag(std::int64_t row, int t, std::int64_t rows_t) {
  std::vector<std::int64_t> bag;
  for (std::int64_t k = 0; k < row % 4; ++k) bag.push_back((row + k * 3 + t) % rows_t);
  return bag;
}

// Writes rows [first, first + n) of the fixture into `path`.
inline void write_fixture(const std::string& path, std::int64_t first, std::int64_t n, int num_dense,
                          const std::vector<std::int64_t>& table_rows, bool multi_hot, WriterOptions wo = {}) {
  DatasetWriter w(path, num_dense, table_rows, multi_hot, wo);
  const int T = static_cast<int>(table_rows.size());
  std::vector<float> dense(static_cast<std::size_t>(num_dense));
  for (std::int64_t r = first; r < first + n; ++r) {
    for (int d = 0; d < num_dense; ++d) dense[d] = fixture_dense(r, d);
    float label = fixture_label(r);
    if (multi_hot) {
      std::vector<std::vector<std::int64_t>> bags;
      for (int t = 0; t < T; ++t) bags.push_back(fixture_bag(r, t, table_rows[t]));
      w.append_multi_hot(dense.data(), label, bags);
    } else {
      std::vector<std::int64_t> idx;
      for (int t = 0; t < T; ++t) idx.push_back(fixture_index(r, t, table_rows[t]));
      w.append(1, dense.data(), &label, idx.data());
    }
  }
  w.finish();
}

}  // namespace recmix::data::test
