#pragma once
// Where a dataset's rows lie in its file (chunk addresses, contiguous base) and plain reads of those
// bytes, for the reader's read-ahead and its pread fast path. Internal to recmix_data.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/h5.hpp"
#include "data/reader_runs.hpp"

namespace recmix::data::detail {

// Where the rows of a dataset lie in its file, for read-ahead hints to the kernel.
struct Extent {
  bool known = false;             // chunked or contiguous storage (compact data needs no hint)
  bool chunked = false, filtered = false;
  std::int64_t chunk_rows = 0, row_bytes = 0;
  haddr_t base = HADDR_UNDEF;     // contiguous storage
  // Stored as the memory type the reader asks for and unfiltered: rows can be read from the file
  // with pread at the addresses HDF5 gives.
  bool plain = false;
  std::vector<std::pair<haddr_t, hsize_t>> chunks;  // address and stored size of each chunk, once looked up
};

// `memory_type`: the type the reader reads the dataset as (plain storage only if they are equal).
Extent extent_of(hid_t dataset, hid_t memory_type);

// Reads `bytes` at `offset` of fd into dest; false when the file ends first or a read fails.
bool pread_all(int fd, void* dest, std::int64_t bytes, std::int64_t offset);

// File address and stored size of chunk c of a chunked dataset, asked of HDF5 once. False when
// the chunk is not allocated. Call under the HDF5 lock.
bool chunk_location(hid_t dataset, Extent& e, std::int64_t c, haddr_t* addr, hsize_t* bytes);

// Where rows `run` of an unfiltered dataset lie in the file: calls
// segment(file offset, rows, first row's index within the run) for each stretch of whole rows,
// in row order, while it returns true. False when a chunk is not allocated or a segment
// failed. Call under the HDF5 lock.
template <class F>
bool for_each_segment(hid_t dataset, Extent& e, const Run& run, const F& segment) {
  if (!e.chunked) return segment(static_cast<std::int64_t>(e.base) + run.start * e.row_bytes, run.len, 0);
  const std::int64_t end = run.start + run.len;
  for (std::int64_t c = run.start / e.chunk_rows; c * e.chunk_rows < end; ++c) {
    haddr_t addr = HADDR_UNDEF;
    hsize_t bytes = 0;
    if (!chunk_location(dataset, e, c, &addr, &bytes)) return false;
    const std::int64_t a = std::max(run.start, c * e.chunk_rows), z = std::min(end, (c + 1) * e.chunk_rows);
    if (!segment(static_cast<std::int64_t>(addr) + (a - c * e.chunk_rows) * e.row_bytes, z - a, a - run.start))
      return false;
  }
  return true;
}

// A plain read-only descriptor of a dataset file, beside HDF5's own: for the read-ahead and
// for the packed reads of plain datasets.
class FileFd {
 public:
  FileFd() = default;
  explicit FileFd(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  FileFd(FileFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileFd& operator=(FileFd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  FileFd(const FileFd&) = delete;
  FileFd& operator=(const FileFd&) = delete;
  ~FileFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace recmix::data::detail
