#include "runtime/checkpoint/checkpoint_checksum.hpp"

#include <cstring>

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/target_clones.hpp"
#include "data/h5.hpp"

namespace recmix::runtime {

RECMIX_CLONES_AVX2 bool all_finite(const float* x, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    any |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return any == 0;
}

std::string non_finite_in(const float* p, hsize_t first, hsize_t n, hsize_t cols, const std::string& where) {
  if (all_finite(p, n * cols)) return {};
  for (hsize_t i = 0; i < n * cols; ++i)
    if (!std::isfinite(p[i]))
      return fmt::format("{} row {} holds {}", where, first + i / cols, p[i]);
  return {};
}

std::string checksum_dataset(const std::string& array) { return "checksums/" + array; }

BlockChecksums::BlockChecksums(hsize_t first, hsize_t count) : first_block_(first / kChecksumBlockRows) {
  const hsize_t end_block = count == 0 ? first_block_ : (first + count - 1) / kChecksumBlockRows + 1;
  sums_.assign(end_block - first_block_, 0);
}

void BlockChecksums::add(hsize_t first, hsize_t n, hsize_t cols, const float* rows) {
  const std::size_t bytes = cols * sizeof(float);
  for (hsize_t i = 0; i < n; ++i) {
    const hsize_t row = first + i;
    sums_.at(row / kChecksumBlockRows - first_block_) += XXH3_64bits_withSeed(rows + i * cols, bytes, row);
  }
}

void verify_checksums(hid_t file, const std::string& name, hsize_t first, hsize_t count, hsize_t cols,
                      BlockChecksums& loaded, const std::string& path) {
  if (count == 0) return;
  const std::string stored_name = checksum_dataset(name);
  if (!h5::exists(file, stored_name))
    throw DataError(fmt::format("{}: /{} has no checksums (/{}): the checkpoint is damaged", path, name, stored_name));
  auto data = h5::open_dataset(file, name);
  const hsize_t total = h5::shape(data).at(0);
  auto stored_set = h5::open_dataset(file, stored_name);
  const hsize_t blocks = loaded.sums().size();
  const auto stored_dims = h5::shape(stored_set);
  if (stored_dims.size() != 1 || stored_dims[0] != (total + kChecksumBlockRows - 1) / kChecksumBlockRows)
    throw DataError(fmt::format("{}: /{} does not hold one checksum per {} rows of /{}: the checkpoint is damaged",
                                path, stored_name, kChecksumBlockRows, name));
  std::vector<std::uint64_t> stored(blocks);
  h5::read_rows(stored_set, loaded.first_block(), blocks, stored.data());
  // The rows of the edge blocks that this reader did not load.
  std::vector<float> rows;
  auto add_from_file = [&](hsize_t from, hsize_t to) {
    if (to <= from) return;
    rows.resize((to - from) * cols);
    h5::read_rows(data, from, to - from, rows.data());
    loaded.add(from, to - from, cols, rows.data());
  };
  add_from_file(loaded.first_block() * kChecksumBlockRows, first);
  add_from_file(first + count, std::min(total, (loaded.first_block() + blocks) * kChecksumBlockRows));
  for (hsize_t b = 0; b < blocks; ++b)
    if (loaded.sums()[b] != stored[b]) {
      const hsize_t from = (loaded.first_block() + b) * kChecksumBlockRows;
      throw DataError(fmt::format("{}: /{} rows {}..{} do not match their checksum: the checkpoint is damaged", path,
                                  name, from, std::min(total, from + kChecksumBlockRows) - 1));
    }
}

}  // namespace recmix::runtime
