#pragma once
// Block checksums of a checkpoint's arrays that do not depend on how the rows were spread over
// ranks: an array of R rows x C floats is cut into blocks of kChecksumBlockRows rows, and a block's
// checksum is the sum (mod 2^64) over its rows r of XXH3-64 of row r's bytes seeded with r. Sums
// combine across ranks and pieces in any order, so every owner hashes the rows it writes and the
// ranks add their sums; a reader verifies the blocks its rows touch, reading the few rows of the
// edge blocks that it does not load. Stored as /checksums/<array path> (uint64 [blocks]).
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace recmix::runtime {

inline constexpr hsize_t kChecksumBlockRows = 4096;

// Whether x[0, n) holds only finite values: an exponent bit test over the whole range, which
// the compiler vectorises (a loop of isfinite with an early exit it does not), so a checkpoint's
// rows are checked at memory speed.
bool all_finite(const float* x, std::size_t n);

// The first value of rows [first, first + n) x cols at p that is not finite, as "<where> row <r>
// holds <v>"; "" when every value is finite.
std::string non_finite_in(const float* p, hsize_t first, hsize_t n, hsize_t cols, const std::string& where);

// The dataset holding the block checksums of the array at `array` ("embedding/3/weights").
std::string checksum_dataset(const std::string& array);

// Sums of the blocks that overlap rows [first, first + count) of an array.
class BlockChecksums {
 public:
  BlockChecksums(hsize_t first, hsize_t count);
  // Adds rows [first, first + n) of `cols` floats each (rows inside the covered blocks).
  void add(hsize_t first, hsize_t n, hsize_t cols, const float* rows);
  hsize_t first_block() const { return first_block_; }
  std::vector<std::uint64_t>& sums() { return sums_; }
  const std::vector<std::uint64_t>& sums() const { return sums_; }

 private:
  hsize_t first_block_;
  std::vector<std::uint64_t> sums_;
};

// Checks rows [first, first + count) of dataset `name` (cols floats a row, whose hashes `loaded`
// already holds) against the file's stored checksums: the rows of the edge blocks outside the
// range are read from the file. DataError naming the checkpoint, the dataset and the first block
// that differs.
void verify_checksums(hid_t file, const std::string& name, hsize_t first, hsize_t count, hsize_t cols,
                      BlockChecksums& loaded, const std::string& path);

}  // namespace recmix::runtime
