#pragma once
// Moving checkpoint rows between device memory and a file in pieces through a host buffer.
#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace recmix::runtime {

// Model arrays are device memory. Where the host can address it (the CPU backend) HDF5 reads
// and writes it in place; elsewhere (CUDA, cpu-strict) rows move between the file and the device
// through a host buffer of at most this many bytes, one backend copy and synchronisation per piece.
inline constexpr std::size_t kStagingBytes = std::size_t(64) << 20;

// Calls piece(r, n, host) for rows [r, r + n) of `count` rows of `cols` floats, in pieces of at
// most kStagingBytes, host being a buffer of n x cols floats.
template <class F>
void for_each_piece(hsize_t count, hsize_t cols, const F& piece) {
  const hsize_t rows = std::max<hsize_t>(1, kStagingBytes / (sizeof(float) * std::max<hsize_t>(cols, 1)));
  std::vector<float> host;
  for (hsize_t r = 0; r < count; r += rows) {
    const hsize_t n = std::min(rows, count - r);
    host.resize(n * cols);
    piece(r, n, host);
  }
}

}  // namespace recmix::runtime
