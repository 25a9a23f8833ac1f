#pragma once
// The inside of Reader, shared by its source files: reader.cpp (set-up, public calls, prefetch),
// reader_order.cpp (sample order, shuffled block reads), reader_batch.cpp (one batch, packed reads)
// and reader_units.cpp (file-order read units and read-ahead). Internal to recmix_data.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/file_layout.hpp"
#include "data/h5.hpp"
#include "data/reader.hpp"
#include "data/reader_runs.hpp"

namespace recmix::data {

namespace detail {

struct OpenFile {
  h5::File file;
  h5::Dataset dense, labels, sparse;
  bool sparse32 = false;  // /sparse stored as int32 (read without conversion)
  std::vector<h5::Dataset> offsets, indices;
  std::vector<std::int64_t> nnz;  // per table, multi-hot
  FileFd hint_fd;                 // file order with independent I/O: read-ahead hints
  FileFd read_fd;                 // packed reads of plain datasets (the kernel keeps read-ahead
                                  // state per descriptor: one per reading thread)
  Extent dense_extent, labels_extent, sparse_extent;
};

struct Item {
  ReaderPosition pos;
  Batch batch;
  std::exception_ptr error;
  bool check_values = false;  // read with its checks deferred to the consumer
};

}  // namespace detail

class Reader::Impl {
 public:
  DatasetInfo info;
  ReaderOptions opt;
  bool collective = false;
  std::vector<std::int64_t> file_start;  // first global row of each file, plus the total
  std::vector<detail::OpenFile> files;
  h5::PropList transfer;
  std::int64_t bpe = 0;
  std::int64_t block = 0, window = 0;
  bool sparse32 = true;                    // every file stores one-hot indices as int32
  std::vector<std::int32_t> max32;         // largest valid index of each table, clamped to int32
  std::vector<std::int64_t> max64;         // table rows - 1
  bool packed = false;                     // batches are packed (ReaderOptions::packed_one_hot applies)
  std::vector<std::uint32_t> max_rows;     // max32 for kLimitRows rows (indices_ok)

  // shuffle caches (guarded by shuffle_mutex)
  mutable std::mutex shuffle_mutex;
  mutable std::int64_t perm_epoch = -1;
  mutable std::vector<std::int64_t> block_perm;
  struct WindowPerm {
    std::int64_t epoch = -1, window = -1;
    std::vector<std::uint32_t> perm;
  };
  mutable WindowPerm window_cache[2];
  mutable int window_next = 0;

  // prefetch state (guarded by mutex)
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<detail::Item> queue;
  std::vector<Batch> spare;  // buffers handed back by next(), refilled by the producer
  ReaderPosition produce_pos, consume_pos;
  std::uint64_t generation = 0;
  bool stop = false, paused = false, busy = false, failed = false;
  std::thread worker;

  void open(const std::vector<std::string>& names, void* comm);

  hid_t xfer() const { return transfer.valid() ? transfer.get() : H5P_DEFAULT; }

  // --- sample order (reader_order.cpp) ---

  void ensure_block_perm(std::int64_t epoch) const;
  const std::vector<std::uint32_t>& window_perm(std::int64_t epoch, std::int64_t w) const;
  std::int64_t row_locked(std::int64_t epoch, std::int64_t p) const;
  std::int64_t sample_row(std::int64_t epoch, std::int64_t p) const;

  // --- reading one batch (reader_batch.cpp) ---

  int file_of(std::int64_t row) const {
    auto it = std::upper_bound(file_start.begin(), file_start.end(), row);
    return static_cast<int>(it - file_start.begin()) - 1;
  }

  [[noreturn]] void bad_value(int f, const std::string& dataset, std::int64_t local_row, const std::string& what) const {
    throw DataError(info.files[f] + ":/" + dataset + " row " + std::to_string(local_row) + ": " + what);
  }

  // This rank's rows [lo, lo + n) of positions [g_lo, g_hi) of global batch b.
  struct Slice {
    std::int64_t g_lo, g_hi, lo, n;
  };
  Slice slice(std::int64_t b) const {
    const std::int64_t G = opt.global_batch;
    const std::int64_t g_lo = b * G, g_hi = std::min(info.rows, g_lo + G);
    const std::int64_t g = g_hi - g_lo;
    const std::int64_t per = g / opt.world, extra = g % opt.world;
    return {g_lo, g_hi, g_lo + opt.rank * per + std::min<std::int64_t>(opt.rank, extra),
            per + (opt.rank < extra ? 1 : 0)};
  }

  bool read_batch(ReaderPosition pos, Batch& out, bool defer_checks = false);
  bool values_ok(const Batch& b) const;
  bool read_packed(std::int64_t b, Batch& out, bool check);
  void pack_one_hot(Batch& out) const;
  void read_rows(const std::vector<std::pair<std::int64_t, std::int64_t>>& rows, bool in_order,
                 const std::vector<char>& touched, Batch& out);
  // read_rows' parts, for one file: its rows are rows[k0, k0 + m) (a row and its slot in the
  // batch), in the runs given (that file's local rows).
  struct FileRows {
    int file;
    const std::vector<detail::Run>& runs;
    const std::vector<std::pair<std::int64_t, std::int64_t>>& rows;
    std::size_t k0;
    std::int64_t m;
    bool in_order;
  };
  // Multi-hot bags per table, gathered file by file: each slot's first index in gathered, and its length.
  struct MultiHotSlots {
    std::vector<std::vector<std::int64_t>> begin, len, gathered;
  };
  void read_dense_labels(const FileRows& part, Batch& out);
  void read_one_hot(const FileRows& part, Batch& out);
  void gather_multi_hot(const FileRows& part, MultiHotSlots& slots);
  void pack_multi_hot(const MultiHotSlots& slots, std::int64_t n, Batch& out) const;

  // --- shuffled reads (independent I/O): whole blocks of rows, cached while the window lasts
  // (reader_order.cpp) ---

  struct CachedBlock {
    std::int64_t id = -1;
    std::uint64_t used = 0;
    Batch rows;                          // the block's rows in order, already validated
    std::vector<std::int64_t> row_major;  // one-hot: [rows x tables], so a row's indices are adjacent
  };
  std::vector<CachedBlock> block_cache;
  std::uint64_t block_clock = 0;

  const Batch& load_block(std::int64_t id);
  void gather_from_blocks(const std::vector<std::pair<std::int64_t, std::int64_t>>& rows, Batch& out);

  CachedBlock* cached = nullptr;

  // --- file order, one-hot, independent I/O: read units of several batches (reader_units.cpp) ---
  //
  // One HDF5 read per dataset brings this rank's rows of several consecutive batches (about
  // kUnitBytes of file data) into a staging buffer; each batch is then copied out of it, with
  // its values checked on the way, when its turn comes. A value error therefore still surfaces on
  // the batch that holds it, and a unit that cannot be read whole (a damaged file) is read again
  // batch by batch, so that the batches before the damage are served as before.

  struct Stage {
    std::int64_t first = 0, end = 0;  // batches [first, end) of the epoch (file order: any epoch)
    bool direct = false;              // the unit read failed: read these batches one by one
    std::vector<std::int64_t> at;     // staging row of each batch's first row, then the total
    std::vector<float> dense, labels;
    std::vector<std::int32_t> sparse32;
    std::vector<std::int64_t> sparse64;
  } stage;

  bool staged() const { return !opt.shuffle && !collective && !info.multi_hot; }

  std::int64_t unit_batches() const;

  // This rank's rows of batches [first, end), split at file boundaries into file-local runs, each
  // with the staging row it goes to; runs that continue each other are merged. `at` receives the
  // staging row of each batch's first row, then the total.
  struct Piece {
    int file;
    detail::Run run;
    std::int64_t at;
  };
  std::vector<Piece> pieces_of(std::int64_t first, std::int64_t end, std::vector<std::int64_t>* at) const;

  // Read-ahead: a thread of its own reads the bytes the next units will need into the page
  // cache, so that storage works while this thread copies.
  std::int64_t hinted_to = -1;  // batches before this one (from the current unit on) were hinted

  void hint(std::int64_t first, std::int64_t end);

  // The ranges to read ahead, in file order, and the thread that reads them.
  struct Hint {
    int fd;
    std::int64_t offset, bytes;
  };
  std::mutex hint_mutex;
  std::condition_variable hint_cv;
  std::deque<Hint> hint_queue;
  std::unique_ptr<char[]> hint_sink;  // where read-ahead reads land (allocated on first use)
  bool hint_stop = false;
  std::thread hint_thread;

  void run_hints();
  void read_ahead(const Hint& h);
  static bool in_page_cache(const Hint& h);
  void stop_hints();

  ~Impl();

  void read_ahead_for(std::int64_t first, std::int64_t end, std::int64_t unit);
  void read_unit(std::int64_t b);
  void serve_staged(std::int64_t b, Batch& out);
  void report_staged(std::int64_t b, std::int64_t s, std::int64_t n) const;

  // --- one-hot offsets: 0, 1, ..., n for every batch of n rows (reader_batch.cpp) ---
  //
  // The batch buffers go round between the consumer and the reader, so an offsets array the
  // reader filled comes back holding what it held: it is rewritten only when its size changed or
  // it is not one the reader filled (a new batch, or one from elsewhere).
  std::unordered_map<const std::int64_t*, std::size_t> iota_known;

  bool holds_iota(const std::vector<std::int64_t>& o, std::size_t size) const;

  // Sizes a batch for n rows: dense values, labels, and one offsets and one indices array per
  // table (their lengths are the caller's to set).
  void shape_batch(Batch& out, std::int64_t n) const {
    out.size = n;
    out.packed = false;
    out.tables = info.num_tables();
    out.dense.resize(static_cast<std::size_t>(n * info.num_dense));
    out.labels.resize(static_cast<std::size_t>(n));
    out.offsets.resize(static_cast<std::size_t>(info.num_tables()));
    out.indices.resize(static_cast<std::size_t>(info.num_tables()));
  }

  void one_hot_offsets(Batch& out, std::int64_t n);

  std::vector<float> scratch_dense, scratch_labels;
  std::vector<std::int32_t> scratch_sparse32;
  std::vector<std::int64_t> scratch_sparse64;

  // --- prefetch (reader.cpp) ---

  ReaderPosition advance(ReaderPosition p) const {
    if (++p.batch >= bpe) return {p.epoch + 1, 0};
    return p;
  }

  void run_worker();
  void wait_idle(std::unique_lock<std::mutex>& lock);
};

}  // namespace recmix::data
