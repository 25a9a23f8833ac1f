// File order, one-hot, independent I/O: read units of several batches staged and served batch by
// batch with their checks, and the read-ahead thread that brings the next units into the page cache.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "data/file_layout.hpp"
#include "data/h5.hpp"
#include "data/reader_checks.hpp"
#include "data/reader_impl.hpp"
#include "data/reader_runs.hpp"

namespace recmix::data {

using namespace detail;

namespace {

// File order with independent I/O: file bytes per read unit (one HDF5 read per dataset), units
// read ahead of the one being decoded (into the page cache), and the largest range per read.
constexpr std::int64_t kUnitBytes = 4 << 20;
constexpr std::int64_t kUnitsAhead = 4;
constexpr std::int64_t kHintBytes = 8 << 20;
constexpr std::int64_t kReadAheadMinBytes = 1 << 20;  // smaller ranges are only announced
constexpr std::int64_t kHintGapBytes = 1 << 20;       // read-ahead reads through gaps this small

}  // namespace

std::int64_t Reader::Impl::unit_batches() const {
  const std::int64_t row_bytes = 4 * (info.num_dense + 1) + (sparse32 ? 4 : 8) * info.num_tables();
  const std::int64_t rows = std::max<std::int64_t>(1, opt.global_batch / opt.world);
  return std::max<std::int64_t>(1, kUnitBytes / (row_bytes * rows));
}

std::vector<Reader::Impl::Piece> Reader::Impl::pieces_of(std::int64_t first, std::int64_t end,
                                                         std::vector<std::int64_t>* at) const {
  std::vector<Piece> pieces;
  std::int64_t count = 0;
  if (at) at->assign(1, 0);
  for (std::int64_t k = first; k < end; ++k) {
    const Slice s = slice(k);
    for (std::int64_t r = s.lo; r < s.lo + s.n;) {
      const int f = file_of(r);
      const std::int64_t len = std::min(s.lo + s.n, file_start[f + 1]) - r;
      const std::int64_t local = r - file_start[f];
      if (!pieces.empty() && pieces.back().file == f && pieces.back().run.start + pieces.back().run.len == local)
        pieces.back().run.len += len;
      else
        pieces.push_back({f, {local, len}, count + (r - s.lo)});
      r += len;
    }
    count += s.n;
    if (at) at->push_back(count);
  }
  return pieces;
}

void Reader::Impl::hint(std::int64_t first, std::int64_t end) {
  std::vector<std::pair<int, std::pair<std::int64_t, std::int64_t>>> ranges;  // (file, (offset, bytes))
  {
    h5::Lock lock(h5::api_mutex());
    for (const Piece& p : pieces_of(first, end, nullptr)) {
      OpenFile& file = files[p.file];
      if (file.hint_fd.get() < 0) continue;
      auto add = [&](hid_t dataset, Extent& e) {
        if (!e.known) return;
        if (!e.filtered) {  // the rows' bytes
          for_each_segment(dataset, e, p.run, [&](std::int64_t at, std::int64_t rows, std::int64_t) {
            ranges.push_back({p.file, {at, rows * e.row_bytes}});
            return true;
          });
          return;
        }
        // compressed chunks are read whole
        for (std::int64_t c = p.run.start / e.chunk_rows; c * e.chunk_rows < p.run.start + p.run.len; ++c) {
          haddr_t addr = HADDR_UNDEF;
          hsize_t bytes = 0;
          if (chunk_location(dataset, e, c, &addr, &bytes))
            ranges.push_back({p.file, {static_cast<std::int64_t>(addr), static_cast<std::int64_t>(bytes)}});
        }
      };
      add(file.dense, file.dense_extent);
      add(file.labels, file.labels_extent);
      if (file.sparse.valid()) add(file.sparse, file.sparse_extent);
    }
    H5Eclear2(H5E_DEFAULT);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<Hint> merged;
  // Ranges of a file closer than kHintGapBytes go as one, gaps included: a rank's slices of
  // consecutive batches (other ranks' rows between them) are then read in one stream, which
  // storage serves far faster than the slices one by one, and ranks on one node share the
  // page cache.
  for (std::size_t i = 0; i < ranges.size();) {
    const int f = ranges[i].first;
    std::int64_t lo = ranges[i].second.first, hi = lo + ranges[i].second.second;
    for (++i; i < ranges.size() && ranges[i].first == f && ranges[i].second.first <= hi + kHintGapBytes; ++i)
      hi = std::max(hi, ranges[i].second.first + ranges[i].second.second);
    // pieces of kHintBytes, so that a seek or a new epoch drops little queued work
    for (std::int64_t at = lo; at < hi; at += kHintBytes)
      merged.push_back({files[f].hint_fd.get(), at, std::min(kHintBytes, hi - at)});
  }
  // Ranges are read ahead all or none: skipping the ones found cached (the kernel's own
  // read-ahead of the previous range may have brought them in, or be bringing them) breaks the
  // sequential stream the kernel sees, and storage then gets requests of half the size.
  if (merged.empty() || std::all_of(merged.begin(), merged.end(), in_page_cache)) return;
  std::lock_guard<std::mutex> lock(hint_mutex);
  hint_queue.insert(hint_queue.end(), merged.begin(), merged.end());
  if (!hint_thread.joinable()) hint_thread = std::thread([this] { run_hints(); });
  hint_cv.notify_one();
}

void Reader::Impl::run_hints() {
  std::unique_lock<std::mutex> lock(hint_mutex);
  while (true) {
    hint_cv.wait(lock, [&] { return hint_stop || !hint_queue.empty(); });
    if (hint_stop) return;
    const Hint h = hint_queue.front();
    hint_queue.pop_front();
    lock.unlock();
    read_ahead(h);
    lock.lock();
  }
}

void Reader::Impl::read_ahead(const Hint& h) {
  if (h.bytes < kReadAheadMinBytes) {
    // Small ranges (a rank's slices of each batch): announced, so that the kernel queues many
    // reads at once; reading them one after the other would wait on each.
    ::posix_fadvise(h.fd, h.offset, h.bytes, POSIX_FADV_WILLNEED);
    return;
  }
  // Large ranges are read, not announced: a read of the whole range goes to storage in large
  // requests (about 1.3 MB against 0.8-0.9 MB for posix_fadvise WILLNEED, whose reads stop at
  // the read-ahead window) and leaves the bytes in the page cache for the HDF5 reads.
  // A short file or an I/O error is left for the read proper to report.
  if (!hint_sink) hint_sink.reset(new char[static_cast<std::size_t>(kHintBytes)]);
  pread_all(h.fd, hint_sink.get(), h.bytes, h.offset);  // ranges are at most kHintBytes
}

// Whether a range is in the page cache already (reading cached pages ahead would still copy
// them all), judged by its first and last pages. Asked with mincore() on a mapping that is never
// touched: a probing read (even RWF_NOWAIT) that misses starts a read of its own there, which
// split the read-ahead's stream into small requests (0.8 MB against 2 MB); and asking for every
// page walked the page cache page by page, which cost as much CPU as a third of the reading.
bool Reader::Impl::in_page_cache(const Hint& h) {
  static const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  for (std::int64_t at : {h.offset, h.offset + h.bytes - 1}) {
    const std::int64_t lo = at / page * page;
    void* p = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ, MAP_SHARED, h.fd, lo);
    if (p == MAP_FAILED) return false;
    unsigned char resident = 0;
    const bool cached = ::mincore(p, static_cast<std::size_t>(page), &resident) == 0 && (resident & 1) != 0;
    ::munmap(p, static_cast<std::size_t>(page));
    if (!cached) return false;
  }
  return true;
}

void Reader::Impl::stop_hints() {
  {
    std::lock_guard<std::mutex> lock(hint_mutex);
    hint_stop = true;
  }
  hint_cv.notify_all();
  if (hint_thread.joinable()) hint_thread.join();
}

Reader::Impl::~Impl() { stop_hints(); }

// Read-ahead for batches [first, end), read `unit` batches at a time: these, unless announced
// already, and up to 2 * kUnitsAhead units after them, announced kUnitsAhead units at a time so
// that the ranges of consecutive units join into long reads. After a seek or at a new epoch the
// announcements start again from `first`.
void Reader::Impl::read_ahead_for(std::int64_t first, std::int64_t end, std::int64_t unit) {
  if (hinted_to < first || hinted_to > end + 2 * kUnitsAhead * unit) {
    hinted_to = first;
    std::lock_guard<std::mutex> lock(hint_mutex);
    hint_queue.clear();
  }
  const std::int64_t hint_end = std::min(bpe, end + 2 * kUnitsAhead * unit);
  if (hinted_to < std::min(bpe, end + kUnitsAhead * unit)) {
    hint(hinted_to, hint_end);
    hinted_to = hint_end;
  }
}

void Reader::Impl::read_unit(std::int64_t b) {
  const int D = info.num_dense, T = info.num_tables();
  const std::int64_t unit = unit_batches();
  stage.first = b;
  stage.end = std::min(bpe, b + unit);
  stage.direct = false;
  const std::vector<Piece> pieces = pieces_of(stage.first, stage.end, &stage.at);
  read_ahead_for(stage.first, stage.end, unit);
  const std::int64_t total = stage.at.back();
  try {
    stage.dense.resize(static_cast<std::size_t>(total * D));
    stage.labels.resize(static_cast<std::size_t>(total));
    if (sparse32)
      stage.sparse32.resize(static_cast<std::size_t>(total * T));
    else
      stage.sparse64.resize(static_cast<std::size_t>(total * T));
    // one read per run and dataset: a single row range is HDF5's fast path (a union of ranges
    // is mapped to chunks element by element)
    for (const Piece& p : pieces) {
      OpenFile& file = files[p.file];
      const std::vector<Run> run{p.run};
      if (D > 0) read_runs_into(file.dense, run, static_cast<hsize_t>(D), stage.dense.data() + p.at * D, xfer());
      read_runs_into(file.labels, run, 0, stage.labels.data() + p.at, xfer());
      if (T == 0) continue;
      if (sparse32)
        read_runs_into(file.sparse, run, static_cast<hsize_t>(T), stage.sparse32.data() + p.at * T, xfer());
      else
        read_runs_into(file.sparse, run, static_cast<hsize_t>(T), stage.sparse64.data() + p.at * T, xfer());
    }
  } catch (...) {
    stage.direct = true;
  }
}

// Batch b from the staging buffer: copies that check the values on the way.
void Reader::Impl::serve_staged(std::int64_t b, Batch& out) {
  const int D = info.num_dense, T = info.num_tables();
  const auto i = static_cast<std::size_t>(b - stage.first);
  const std::int64_t s = stage.at[i], n = stage.at[i + 1] - s;
  shape_batch(out, n);
  bool bad = copy_dense(stage.dense.data() + s * D, out.dense.data(), static_cast<std::size_t>(n * D));
  bad |= copy_labels(stage.labels.data() + s, out.labels.data(), static_cast<std::size_t>(n));
  for (int t = 0; t < T; ++t) out.indices[t].resize(static_cast<std::size_t>(n));
  TableColumns columns(out.indices);
  std::int64_t** out_t = columns.data();
  if (T > 0)
    bad |= sparse32 ? transpose_widen(stage.sparse32.data() + s * T, T, n, out_t, max32.data())
                    : transpose_widen(stage.sparse64.data() + s * T, T, n, out_t, max64.data());
  one_hot_offsets(out, n);
  if (bad && opt.validate) report_staged(b, s, n);
}

// Throws the first value error of staged batch b (rows from staging row s), in the order a
// direct read reports them: file by file, dense, then labels, then indices.
void Reader::Impl::report_staged(std::int64_t b, std::int64_t s, std::int64_t n) const {
  const int D = info.num_dense, T = info.num_tables();
  const std::int64_t lo = slice(b).lo;
  for (std::int64_t r = lo; r < lo + n;) {
    const int f = file_of(r);
    const std::int64_t m = std::min(lo + n, file_start[f + 1]) - r, j0 = s + (r - lo);
    auto local_row = [&](std::int64_t j) { return r + j - file_start[f]; };
    const float* dense = stage.dense.data() + j0 * D;
    const std::size_t bad = first_non_finite(dense, static_cast<std::size_t>(m * D));
    if (bad < static_cast<std::size_t>(m * D))
      bad_value(f, "dense", local_row(static_cast<std::int64_t>(bad) / D),
                "column " + std::to_string(bad % D) + " is not finite");
    const float* labels = stage.labels.data() + j0;
    for (std::int64_t j = 0; j < m; ++j)
      if (!(labels[j] >= 0.0f && labels[j] <= 1.0f))
        bad_value(f, "labels", local_row(j), "label " + std::to_string(labels[j]) + " outside [0, 1]");
    for (std::int64_t j = 0; j < m; ++j)
      for (int t = 0; t < T; ++t) {
        const std::int64_t v = sparse32 ? stage.sparse32[(j0 + j) * T + t] : stage.sparse64[(j0 + j) * T + t];
        if (v < 0 || v >= info.table_rows[t])
          bad_value(f, "sparse", local_row(j),
                    "column " + std::to_string(t) + ": index " + std::to_string(v) + " outside table rows [0, " +
                        std::to_string(info.table_rows[t]) + ")");
      }
    r += m;
  }
}

}  // namespace recmix::data
