#include "data/reader.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <unordered_map>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.hpp"
#include "core/random.hpp"
#include "data/h5.hpp"

namespace recmix::data {

namespace {

// The per-table index arrays of a batch as one array of pointers (on the stack for up to 256
// tables), for the row-major -> per-table transposes.
class TableColumns {
 public:
  explicit TableColumns(std::vector<std::vector<std::int64_t>>& indices) {
    const std::size_t tables = indices.size();
    if (tables > fixed_.size()) many_.resize(tables);
    std::int64_t** p = data();
    for (std::size_t t = 0; t < tables; ++t) p[t] = indices[t].data();
  }
  std::int64_t** data() { return many_.empty() ? fixed_.data() : many_.data(); }

 private:
  std::array<std::int64_t*, 256> fixed_{};
  std::vector<std::int64_t*> many_;
};

constexpr std::int64_t kDefaultShuffleBlock = 4096;
constexpr std::size_t kChunkCacheBytes = 32u << 20;
// File order with independent I/O: file bytes per read unit (one HDF5 read per dataset), units
// read ahead of the one being decoded (into the page cache), and the largest range per read.
constexpr std::int64_t kUnitBytes = 4 << 20;
constexpr std::int64_t kUnitsAhead = 4;
constexpr std::int64_t kHintBytes = 8 << 20;
constexpr std::int64_t kReadAheadMinBytes = 1 << 20;  // smaller ranges are only announced
constexpr std::int64_t kHintGapBytes = 1 << 20;       // read-ahead reads through gaps this small

// Row runs [start, start+len) in file-local coordinates, and the matching hyperslab union.
struct Run {
  std::int64_t start, len;
};

// Selects the union of `runs` (rows, all `cols` columns) in `file_space`; an empty list selects none.
void select_runs(hid_t file_space, const std::vector<Run>& runs, hsize_t cols, int ndims, const std::string& where) {
  if (runs.empty()) {
    RECMIX_H5_CHECK(H5Sselect_none(file_space), IoError, where);
    return;
  }
  bool first = true;
  for (const Run& r : runs) {
    if (r.len == 0) continue;
    hsize_t start[2] = {static_cast<hsize_t>(r.start), 0};
    hsize_t count[2] = {static_cast<hsize_t>(r.len), cols};
    RECMIX_H5_CHECK(H5Sselect_hyperslab(file_space, first ? H5S_SELECT_SET : H5S_SELECT_OR, start, nullptr,
                                        count, nullptr),
                    IoError, where);
    (void)ndims;
    first = false;
  }
  if (first) RECMIX_H5_CHECK(H5Sselect_none(file_space), IoError, where);
}

// Reads the union of `runs` of a 1-D (cols == 0) or 2-D dataset into `dest` (rows in file order;
// room for all of them), converting to T.
template <class T>
void read_runs_into(hid_t dataset, const std::vector<Run>& runs, hsize_t cols, T* dest, hid_t transfer) {
  const int ndims = cols == 0 ? 1 : 2;
  const hsize_t width = cols == 0 ? 1 : cols;
  std::int64_t total = 0;
  for (const Run& r : runs) total += r.len;
  h5::Dataspace file_space(RECMIX_H5_CHECK(H5Dget_space(dataset), IoError, h5::describe(dataset)));
  select_runs(file_space, runs, width, ndims, h5::describe(dataset));
  hsize_t mem_dims[2] = {static_cast<hsize_t>(std::max<std::int64_t>(total, 1)), width};
  h5::Dataspace mem_space(RECMIX_H5_CHECK(H5Screate_simple(ndims, mem_dims, nullptr), IoError, h5::describe(dataset)));
  if (total == 0) RECMIX_H5_CHECK(H5Sselect_none(mem_space), IoError, h5::describe(dataset));
  T dummy{};
  RECMIX_H5_CHECK(H5Dread(dataset, h5::native_type<T>(), mem_space, file_space, transfer,
                          total ? static_cast<void*>(dest) : static_cast<void*>(&dummy)),
                  IoError, h5::describe(dataset));
}

template <class T>
void read_runs(hid_t dataset, const std::vector<Run>& runs, hsize_t cols, std::vector<T>& out, hid_t transfer) {
  std::int64_t total = 0;
  for (const Run& r : runs) total += r.len;
  out.resize(static_cast<std::size_t>(total) * (cols == 0 ? 1 : cols));
  read_runs_into(dataset, runs, cols, out.data(), transfer);
}


// --- checks in place (packed one-hot batches) ---
// Plain loops over flat memory, with an AVX2 clone chosen at run time.

// Whether every label of x[0..n) is within [0, 1] (NaN is not).
__attribute__((target_clones("avx2", "default"))) bool labels_ok(const float* x, std::size_t n) {
  int ok = 1;
  for (std::size_t i = 0; i < n; ++i) ok &= static_cast<int>(x[i] >= 0.0f) & static_cast<int>(x[i] <= 1.0f);
  return ok != 0;
}

// Whether every value of x[0..n) is finite.
__attribute__((target_clones("avx2", "default"))) bool all_finite(const float* x, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    any |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return any == 0;
}

// Index of the first non-finite value of x[0..n), or n.
std::size_t first_non_finite(const float* x, std::size_t n) {
  if (all_finite(x, n)) return n;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return n;
}

// Whether every index of the row-major [m x T] block x is within its table: x[j * T + t] <= max[t]
// as unsigned (so negative indices fail too). `max` holds the T limits repeated for kLimitRows
// rows, so that the loop runs over whole vectors of flat memory.
constexpr int kLimitRows = 8;
__attribute__((target_clones("avx2", "default"))) bool indices_ok(const std::int32_t* x, std::int64_t m, int T,
                                                                  const std::uint32_t* max) {
  const std::int64_t total = m * T, block = std::int64_t{kLimitRows} * T;
  std::uint32_t bad = 0;
  std::int64_t i = 0;
  for (; i + block <= total; i += block)
    for (std::int64_t k = 0; k < block; ++k) bad |= static_cast<std::uint32_t>(x[i + k]) > max[k];
  for (std::int64_t k = 0; i + k < total; ++k) bad |= static_cast<std::uint32_t>(x[i + k]) > max[k];
  return bad == 0;
}

// --- copies fused with validation ---

// Copies n floats; true when some value is not finite (an all-ones exponent).
__attribute__((target_clones("avx2", "default"))) bool copy_dense(const float* src, float* dst, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, src + i, 4);
    std::memcpy(dst + i, &bits, 4);
    any |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return any != 0;
}

// Copies n labels; true when some label is outside [0, 1] (or NaN).
__attribute__((target_clones("avx2", "default"))) bool copy_labels(const float* src, float* dst, std::size_t n) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float y = src[i];
    dst[i] = y;
    bad |= static_cast<std::uint32_t>(!(y >= 0.0f && y <= 1.0f));
  }
  return bad != 0;
}

// Row-major [m x T] indices -> T arrays out[t][0..m), widened to int64. Returns true when some
// value v of column t is outside [0, max[t]] (max[t] = table rows - 1, clamped to the source type).
template <class S>
bool transpose_scalar(const S* src, int T, std::int64_t m, std::int64_t* const* out, const S* max) {
  bool bad = false;
  for (std::int64_t j = 0; j < m; ++j) {
    const S* row = src + j * T;
    for (int t = 0; t < T; ++t) {
      const S v = row[t];
      out[t][j] = static_cast<std::int64_t>(v);
      bad |= (v < 0) | (v > max[t]);
    }
  }
  return bad;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RECMIX_READER_AVX2 1
// The int32 case with AVX2: 8 rows x 8 columns at a time are transposed in registers, widened and
// stored as one 64-byte line per column; the columns left over (T mod 8) go one by one.
__attribute__((target("avx2"))) bool transpose32_avx2(const std::int32_t* src, int T, std::int64_t m,
                                                        std::int64_t* const* out, const std::int32_t* max) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i bad = zero;
  std::uint32_t bad_tail = 0;
  std::int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    const std::int32_t* s = src + j * T;
    int t = 0;
    for (; t + 8 <= T; t += 8) {
      __m256i r[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k * T + t));
      const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
      const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
      const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
      const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
      const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
      const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
      const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
      __m256i c[8];  // c[k]: column t + k of the 8 rows
      c[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
      c[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
      c[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
      c[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
      c[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
      c[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
      c[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
      c[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
      for (int k = 0; k < 8; ++k) {
        const __m256i limit = _mm256_set1_epi32(max[t + k]);
        bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(zero, c[k]), _mm256_cmpgt_epi32(c[k], limit)));
        std::int64_t* d = out[t + k] + j;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(c[k])));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(c[k], 1)));
      }
    }
    for (; t < T; ++t) {
      std::int64_t* d = out[t] + j;
      for (int k = 0; k < 8; ++k) {
        const std::int32_t v = s[k * T + t];
        d[k] = v;
        bad_tail |= static_cast<std::uint32_t>((v < 0) | (v > max[t]));
      }
    }
  }
  bool any = !_mm256_testz_si256(bad, bad) || bad_tail != 0;
  if (j < m) {
    std::int64_t* rest[256];
    std::vector<std::int64_t*> many;
    std::int64_t** r = rest;
    if (T > 256) {
      many.resize(static_cast<std::size_t>(T));
      r = many.data();
    }
    for (int t = 0; t < T; ++t) r[t] = out[t] + j;
    any |= transpose_scalar(src + j * T, T, m - j, r, max);
  }
  return any;
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

template <class S>
bool transpose_widen(const S* src, int T, std::int64_t m, std::int64_t* const* out, const S* max) {
#ifdef RECMIX_READER_AVX2
  if constexpr (sizeof(S) == 4)
    if (T >= 8 && have_avx2()) return transpose32_avx2(src, T, m, out, max);
#endif
  return transpose_scalar(src, T, m, out, max);
}

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
Extent extent_of(hid_t dataset, hid_t memory_type) {
  Extent e;
  const std::string where = h5::describe(dataset);
  h5::PropList dcpl(RECMIX_H5_CHECK(H5Dget_create_plist(dataset), IoError, where));
  h5::Datatype type(RECMIX_H5_CHECK(H5Dget_type(dataset), IoError, where));
  const std::vector<hsize_t> dims = h5::shape(dataset);
  const hsize_t cols = dims.size() == 2 ? dims[1] : 1;
  e.row_bytes = static_cast<std::int64_t>(H5Tget_size(type) * cols);
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_CHUNKED) {
    hsize_t chunk[2] = {0, 0};
    if (H5Pget_chunk(dcpl, 2, chunk) < 1 || chunk[0] == 0) return e;
    e.chunked = true;
    e.chunk_rows = static_cast<std::int64_t>(chunk[0]);
    e.filtered = H5Pget_nfilters(dcpl) > 0;
    e.known = true;
  } else if (layout == H5D_CONTIGUOUS) {
    e.base = H5Dget_offset(dataset);
    e.known = e.base != HADDR_UNDEF;
  }
  e.plain = e.known && !e.filtered && H5Tequal(type, memory_type) > 0;
  return e;
}

// Reads `bytes` at `offset` of fd into dest; false when the file ends first or a read fails.
bool pread_all(int fd, void* dest, std::int64_t bytes, std::int64_t offset) {
  char* out = static_cast<char*>(dest);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, out, static_cast<std::size_t>(bytes), offset);
    if (n <= 0) return false;
    out += n;
    offset += n;
    bytes -= n;
  }
  return true;
}

// File address and stored size of chunk c of a chunked dataset, asked of HDF5 once. False when
// the chunk is not allocated. Call under the HDF5 lock.
bool chunk_location(hid_t dataset, Extent& e, std::int64_t c, haddr_t* addr, hsize_t* bytes) {
  if (static_cast<std::int64_t>(e.chunks.size()) <= c) e.chunks.resize(c + 1, {HADDR_UNDEF, 0});
  auto& [a, z] = e.chunks[c];
  if (a == HADDR_UNDEF) {
    hsize_t offset[2] = {static_cast<hsize_t>(c * e.chunk_rows), 0};
    unsigned mask = 0;
    if (H5Dget_chunk_info_by_coord(dataset, offset, &mask, &a, &z) < 0 || a == HADDR_UNDEF) {
      H5Eclear2(H5E_DEFAULT);
      a = HADDR_UNDEF;
      return false;
    }
  }
  *addr = a;
  *bytes = z;
  return true;
}

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

// Opens a dataset with a chunk cache only where one helps: compressed chunks must be decoded
// whole, so they are kept; uncompressed ones are read straight into the caller's buffer.
h5::Dataset open_cached(hid_t file, const std::string& name) {
  if (!h5::exists(file, name)) throw DataError(h5::describe(file) + ": missing dataset /" + name);
  h5::Dataset plain(RECMIX_H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT), IoError,
                                    h5::describe(file) + ":/" + name));
  h5::PropList dcpl(RECMIX_H5_CHECK(H5Dget_create_plist(plain), IoError, name));
  if (H5Pget_nfilters(dcpl) <= 0) {
    h5::PropList dapl(RECMIX_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS), IoError, name));
    RECMIX_H5_CHECK(H5Pset_chunk_cache(dapl, 0, 0, 1.0), IoError, name);
    plain.reset();
    return h5::Dataset(RECMIX_H5_CHECK(H5Dopen2(file, name.c_str(), dapl), IoError, h5::describe(file) + ":/" + name));
  }
  plain.reset();
  h5::PropList dapl(RECMIX_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS), IoError, name));
  RECMIX_H5_CHECK(H5Pset_chunk_cache(dapl, 4099, kChunkCacheBytes, 1.0), IoError, name);
  return h5::Dataset(RECMIX_H5_CHECK(H5Dopen2(file, name.c_str(), dapl), IoError, h5::describe(file) + ":/" + name));
}

struct Item {
  ReaderPosition pos;
  Batch batch;
  std::exception_ptr error;
  bool check_values = false;  // read with its checks deferred to the consumer
};

}  // namespace

class Reader::Impl {
 public:
  DatasetInfo info;
  ReaderOptions opt;
  bool collective = false;
  std::vector<std::int64_t> file_start;  // first global row of each file, plus the total
  std::vector<OpenFile> files;
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
  std::deque<Item> queue;
  std::vector<Batch> spare;  // buffers handed back by next(), refilled by the producer
  ReaderPosition produce_pos, consume_pos;
  std::uint64_t generation = 0;
  bool stop = false, paused = false, busy = false, failed = false;
  std::thread worker;

  void open(const std::vector<std::string>& names, void* comm) {
    info = open_dataset_info(names);
    RECMIX_REQUIRE(opt.global_batch > 0, ConfigError, "reader: global_batch must be positive");
    RECMIX_REQUIRE(opt.world >= 1 && opt.rank >= 0 && opt.rank < opt.world, ConfigError,
                   "reader: rank must be in [0, world)");
    RECMIX_REQUIRE(opt.prefetch >= 0, ConfigError, "reader: prefetch must be >= 0");
    file_start.assign(1, 0);
    for (std::int64_t r : info.file_rows) file_start.push_back(file_start.back() + r);
    bpe = opt.drop_last ? info.rows / opt.global_batch : (info.rows + opt.global_batch - 1) / opt.global_batch;
    block = opt.shuffle_block > 0 ? opt.shuffle_block : kDefaultShuffleBlock;
    window = opt.shuffle_window > 0 ? opt.shuffle_window : std::max<std::int64_t>(16 * block, opt.global_batch);
    window = (window + block - 1) / block * block;  // whole blocks
    RECMIX_REQUIRE(window < (std::int64_t{1} << 32), ConfigError, "reader: shuffle_window too large");

    h5::Lock lock(h5::api_mutex());
    transfer = collective ? h5::transfer_mpio(true) : h5::PropList();
    for (const std::string& name : info.files) {
      OpenFile f;
      f.file = collective ? h5::open_file_mpio(name, comm) : h5::open_file(name);
      f.dense = open_cached(f.file, "dense");
      f.labels = open_cached(f.file, "labels");
      if (!info.multi_hot) {
        if (info.num_tables() > 0) {
          f.sparse = open_cached(f.file, "sparse");
          std::size_t bytes = 0;
          h5::type_class(f.sparse, &bytes);
          f.sparse32 = bytes == 4;
        }
      } else {
        for (int t = 0; t < info.num_tables(); ++t) {
          std::string base = "sparse/" + std::to_string(t);
          f.offsets.push_back(open_cached(f.file, base + "/offsets"));
          f.indices.push_back(open_cached(f.file, base + "/indices"));
          f.nnz.push_back(static_cast<std::int64_t>(h5::shape(f.indices.back())[0]));
        }
      }
      sparse32 = sparse32 && f.sparse32;
      if (!opt.shuffle && !collective && !info.multi_hot) {
        f.hint_fd = FileFd(name);
        if (opt.packed_one_hot) f.read_fd = FileFd(name);
        f.dense_extent = extent_of(f.dense, H5T_NATIVE_FLOAT);
        f.labels_extent = extent_of(f.labels, H5T_NATIVE_FLOAT);
        if (f.sparse.valid()) f.sparse_extent = extent_of(f.sparse, f.sparse32 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT64);
      }
      files.push_back(std::move(f));
    }
    for (std::int64_t rows : info.table_rows) {
      max64.push_back(rows - 1);
      max32.push_back(static_cast<std::int32_t>(std::clamp<std::int64_t>(rows - 1, -1, INT32_MAX)));
    }
    packed = opt.packed_one_hot && !info.multi_hot &&
             std::all_of(info.table_rows.begin(), info.table_rows.end(),
                         [](std::int64_t rows) { return rows - 1 <= INT32_MAX; });
    for (int j = 0; j < kLimitRows; ++j)
      for (std::int32_t m : max32) max_rows.push_back(static_cast<std::uint32_t>(m));
  }

  hid_t xfer() const { return transfer.valid() ? transfer.get() : H5P_DEFAULT; }

  // --- sample order ---

  // The order of the full blocks for `epoch`; a last, shorter block always stays at the end, so
  // that windows that are multiples of the block size hold whole blocks.
  void ensure_block_perm(std::int64_t epoch) const {
    if (perm_epoch == epoch) return;
    const std::int64_t nb = info.rows / block;
    block_perm.resize(static_cast<std::size_t>(nb));
    std::iota(block_perm.begin(), block_perm.end(), 0);
    random::CounterRng rng(opt.seed, random::hash(0xB10C, static_cast<std::uint64_t>(epoch), 0));
    for (std::int64_t i = nb - 1; i > 0; --i)
      std::swap(block_perm[i], block_perm[rng.next_below(static_cast<std::uint64_t>(i + 1))]);
    perm_epoch = epoch;
  }

  const std::vector<std::uint32_t>& window_perm(std::int64_t epoch, std::int64_t w) const {
    for (const WindowPerm& c : window_cache)
      if (c.epoch == epoch && c.window == w) return c.perm;
    WindowPerm& c = window_cache[window_next];
    window_next ^= 1;
    const std::int64_t base = w * window;
    const std::int64_t len = std::min(window, info.rows - base);
    c.perm.resize(static_cast<std::size_t>(len));
    std::iota(c.perm.begin(), c.perm.end(), 0u);
    random::CounterRng rng(opt.seed, random::hash(0x3D0, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(w)));
    for (std::int64_t i = len - 1; i > 0; --i)
      std::swap(c.perm[i], c.perm[rng.next_below(static_cast<std::uint64_t>(i + 1))]);
    c.epoch = epoch;
    c.window = w;
    return c.perm;
  }

  // Position p of the epoch's order -> dataset row. Caller holds shuffle_mutex.
  std::int64_t row_locked(std::int64_t epoch, std::int64_t p) const {
    if (!opt.shuffle) return p;
    const std::int64_t w = p / window;
    const std::int64_t q = w * window + window_perm(epoch, w)[static_cast<std::size_t>(p - w * window)];
    ensure_block_perm(epoch);
    const std::int64_t slot = q / block;
    if (slot >= static_cast<std::int64_t>(block_perm.size())) return q;  // the short last block
    return block_perm[static_cast<std::size_t>(slot)] * block + q % block;
  }

  std::int64_t sample_row(std::int64_t epoch, std::int64_t p) const {
    std::lock_guard<std::mutex> lock(shuffle_mutex);
    return row_locked(epoch, p);
  }

  // --- reading one batch ---

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

  // Reads batch `pos` into out. defer_checks: a packed batch in file order may come back with its
  // values unchecked (the return value says so), for the consumer to check (values_ok) while
  // this thread reads on.
  bool read_batch(ReaderPosition pos, Batch& out, bool defer_checks = false) {
    if (staged()) {
      out.global_index = pos.batch;
      if (packed) {
        const bool check = opt.validate && !defer_checks;
        if (read_packed(pos.batch, out, check)) return opt.validate && !check;
      } else {
        if (pos.batch < stage.first || pos.batch >= stage.end) read_unit(pos.batch);
        if (!stage.direct) {
          serve_staged(pos.batch, out);
          return false;
        }
      }
      // the batch could not be read whole or holds a bad value: read alone, as below, it
      // reports what is wrong
    }
    const auto [g_lo, g_hi, lo, n] = slice(pos.batch);
    const std::int64_t g = g_hi - g_lo;

    // rows of this rank, and the files the whole global batch touches (collective mode)
    std::vector<std::pair<std::int64_t, std::int64_t>> rows(static_cast<std::size_t>(n));  // (row, slot)
    std::vector<char> touched(files.size(), 0);
    {
      std::lock_guard<std::mutex> lock(shuffle_mutex);
      for (std::int64_t i = 0; i < n; ++i) rows[i] = {row_locked(pos.epoch, lo + i), i};
      if (collective) {
        if (!opt.shuffle) {
          if (g > 0)
            for (int f = file_of(g_lo); f <= file_of(g_hi - 1); ++f) touched[f] = 1;
        } else {
          for (std::int64_t p = g_lo; p < g_hi; ++p) touched[file_of(row_locked(pos.epoch, p))] = 1;
        }
      }
    }
    out.global_index = pos.batch;
    if (opt.shuffle && !collective) {
      gather_from_blocks(rows, out);
    } else {
      if (opt.shuffle) std::sort(rows.begin(), rows.end());
      read_rows(rows, !opt.shuffle, touched, out);
    }
    if (packed) pack_one_hot(out);
    return false;
  }

  // The checks of ReaderOptions::validate on a packed batch that read_batch left unchecked.
  bool values_ok(const Batch& b) const {
    return all_finite(b.dense.data(), b.dense.size()) && labels_ok(b.labels.data(), b.labels.size()) &&
           indices_ok(b.one_hot.data(), b.size, info.num_tables(), max_rows.data());
  }

  // Batch b in file order, packed: this rank's rows go straight from the file into the batch (with
  // pread where the storage is plain, otherwise one HDF5 read per dataset and file) and, with
  // `check`, are checked in place. False when a read fails or a value is bad; the caller then
  // reads the batch by the per-table path, which names the file, dataset and row at fault.
  bool read_packed(std::int64_t b, Batch& out, bool check) {
    const int D = info.num_dense, T = info.num_tables();
    read_ahead_for(b, b + 1, unit_batches());
    std::vector<std::int64_t> at;
    const std::vector<Piece> pieces = pieces_of(b, b + 1, &at);
    const std::int64_t n = at.back();
    out.size = n;
    out.packed = true;
    out.tables = T;
    out.dense.resize(static_cast<std::size_t>(n * D));
    out.labels.resize(static_cast<std::size_t>(n));
    out.one_hot.resize(static_cast<std::size_t>(n * T));
    out.offsets.clear();
    out.indices.clear();
    bool ok = true;
    try {
      h5::Lock lock(h5::api_mutex());
      for (const Piece& p : pieces) {
        OpenFile& file = files[p.file];
        const std::vector<Run> run{p.run};
        const auto len = static_cast<std::size_t>(p.run.len);
        // plain storage straight from the file with pread, anything else through HDF5; each
        // piece checked as soon as it is read, while it is in cache
        auto read = [&](h5::Dataset& dataset, Extent& e, hsize_t cols, auto* dest) {
          using V = std::remove_pointer_t<decltype(dest)>;
          const std::int64_t per_row = e.row_bytes / static_cast<std::int64_t>(sizeof(V));
          const int fd = file.read_fd.get();
          if (e.plain && fd >= 0 && for_each_segment(dataset.get(), e, p.run, [&](std::int64_t at, std::int64_t rows, std::int64_t j) {
                return pread_all(fd, dest + j * per_row, rows * e.row_bytes, at);
              }))
            return;
          read_runs_into(dataset, run, cols, dest, xfer());
        };
        if (D > 0) {
          float* dense = out.dense.data() + p.at * D;
          read(file.dense, file.dense_extent, static_cast<hsize_t>(D), dense);
          if (check && !all_finite(dense, len * D)) return false;
        }
        float* labels = out.labels.data() + p.at;
        read(file.labels, file.labels_extent, 0, labels);
        if (check && !labels_ok(labels, len)) return false;
        if (T == 0) continue;
        std::int32_t* dest = out.one_hot.data() + p.at * T;
        if (file.sparse32) {
          read(file.sparse, file.sparse_extent, static_cast<hsize_t>(T), dest);
          if (check && !indices_ok(dest, p.run.len, T, max_rows.data())) return false;
          continue;
        }
        scratch_sparse64.resize(static_cast<std::size_t>(p.run.len * T));
        read_runs_into(file.sparse, run, static_cast<hsize_t>(T), scratch_sparse64.data(), xfer());
        for (std::int64_t k = 0; k < p.run.len * T; ++k) {  // int64 files: narrowed, out of range fails
          const std::int64_t v = scratch_sparse64[k];
          ok &= v >= 0 && v <= max64[k % T];
          dest[k] = static_cast<std::int32_t>(v);
        }
      }
    } catch (...) {
      return false;
    }
    return ok;
  }

  // Turns a batch read by the per-table path into the packed layout. An index int32 cannot hold
  // becomes -1, so that the embedding layer reports it as out of range.
  void pack_one_hot(Batch& out) const {
    const int T = info.num_tables();
    const std::int64_t n = out.size;
    out.one_hot.resize(static_cast<std::size_t>(n * T));
    for (int t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t v = out.indices[t][i];
        out.one_hot[i * T + t] = v >= 0 && v <= INT32_MAX ? static_cast<std::int32_t>(v) : -1;
      }
    out.offsets.clear();
    out.indices.clear();
    out.packed = true;
    out.tables = T;
  }

  // Reads `rows` ((row, slot) sorted by row) into `out` (slot order). in_order: slot i holds the
  // i-th smallest row, so values go straight into place. In collective mode every file that
  // `touched` marks takes part in the reads, with an empty selection where this rank has no row.
  void read_rows(const std::vector<std::pair<std::int64_t, std::int64_t>>& rows, bool in_order,
                 const std::vector<char>& touched, Batch& out) {
    const auto n = static_cast<std::int64_t>(rows.size());
    const int D = info.num_dense, T = info.num_tables();
    shape_batch(out, n);
    // multi-hot: per table, each slot's index list gathered before packing into CSR
    std::vector<std::vector<std::int64_t>> slot_begin, slot_len, gathered;
    if (!info.multi_hot) {
      for (int t = 0; t < T; ++t) out.indices[t].resize(static_cast<std::size_t>(n));
      one_hot_offsets(out, n);
    } else {
      slot_begin.assign(T, std::vector<std::int64_t>(n, 0));
      slot_len.assign(T, std::vector<std::int64_t>(n, 0));
      gathered.resize(T);
    }

    h5::Lock lock(h5::api_mutex());
    std::size_t k = 0;
    for (int f = 0; f < static_cast<int>(files.size()); ++f) {
      const std::size_t k0 = k;
      while (k < rows.size() && rows[k].first < file_start[f + 1]) ++k;
      if (k == k0 && !(collective && touched[f])) continue;
      OpenFile& file = files[f];
      const auto m = static_cast<std::int64_t>(k - k0);
      std::vector<Run> runs;
      for (std::size_t i = k0; i < k; ++i) {
        std::int64_t r = rows[i].first - file_start[f];
        if (!runs.empty() && runs.back().start + runs.back().len == r)
          ++runs.back().len;
        else
          runs.push_back({r, 1});
      }
      auto local_row = [&](std::int64_t j) { return rows[k0 + static_cast<std::size_t>(j)].first - file_start[f]; };

      float* dense = out.dense.data() + k0 * D;
      float* labels = out.labels.data() + k0;
      if (!in_order) {
        scratch_dense.resize(static_cast<std::size_t>(m * D));
        scratch_labels.resize(static_cast<std::size_t>(m));
        dense = scratch_dense.data();
        labels = scratch_labels.data();
      }
      read_runs_into(file.dense, runs, static_cast<hsize_t>(D), (m * D) != 0 ? dense : nullptr, xfer());
      read_runs_into(file.labels, runs, 0, m ? labels : nullptr, xfer());
      if (opt.validate) {
        const std::size_t bad = first_non_finite(dense, static_cast<std::size_t>(m * D));
        if (bad < static_cast<std::size_t>(m * D))
          bad_value(f, "dense", local_row(static_cast<std::int64_t>(bad) / D),
                    "column " + std::to_string(bad % D) + " is not finite");
        for (std::int64_t j = 0; j < m; ++j)
          if (!(labels[j] >= 0.0f && labels[j] <= 1.0f))
            bad_value(f, "labels", local_row(j), "label " + std::to_string(labels[j]) + " outside [0, 1]");
      }
      if (!in_order)
        for (std::int64_t j = 0; j < m; ++j) {
          const std::int64_t slot = rows[k0 + j].second;
          std::copy_n(dense + j * D, D, out.dense.data() + slot * D);
          out.labels[slot] = labels[j];
        }

      if (!info.multi_hot) {
        if (T == 0) continue;
        // row-major [m x T] -> one array per table: read in order, T sequential write streams
        auto transpose = [&](const auto* src) {
          TableColumns columns(out.indices);
          std::int64_t** out_t = columns.data();
          const std::vector<std::int64_t>& limit = info.table_rows;
          bool bad = false;
          if (in_order) {
            for (int t = 0; t < T; ++t) out_t[t] += k0;
            using S = std::remove_cv_t<std::remove_reference_t<decltype(*src)>>;
            if constexpr (sizeof(S) == 4)
              bad = transpose_widen(src, T, m, out_t, max32.data());
            else
              bad = transpose_widen(src, T, m, out_t, max64.data());
          } else
          for (std::int64_t j = 0; j < m; ++j) {
            const std::int64_t slot = rows[k0 + j].second;
            const auto* row = src + j * T;
            for (int t = 0; t < T; ++t) {
              const auto v = static_cast<std::int64_t>(row[t]);
              out_t[t][slot] = v;
              bad |= static_cast<std::uint64_t>(v) >= static_cast<std::uint64_t>(limit[t]);
            }
          }
          if (opt.validate && bad)
            for (std::int64_t j = 0; j < m; ++j)
              for (int t = 0; t < T; ++t) {
                const auto v = static_cast<std::int64_t>(src[j * T + t]);
                if (v < 0 || v >= info.table_rows[t])
                  bad_value(f, "sparse", local_row(j),
                            "column " + std::to_string(t) + ": index " + std::to_string(v) +
                                " outside table rows [0, " + std::to_string(info.table_rows[t]) + ")");
              }
        };
        if (file.sparse32) {
          scratch_sparse32.resize(static_cast<std::size_t>(m * T));
          read_runs_into(file.sparse, runs, static_cast<hsize_t>(T), m ? scratch_sparse32.data() : nullptr, xfer());
          transpose(scratch_sparse32.data());
        } else {
          scratch_sparse64.resize(static_cast<std::size_t>(m * T));
          read_runs_into(file.sparse, runs, static_cast<hsize_t>(T), m ? scratch_sparse64.data() : nullptr, xfer());
          transpose(scratch_sparse64.data());
        }
        continue;
      }
      std::vector<std::int64_t> foffsets, findices;
      for (int t = 0; t < T; ++t) {
        const std::string name = "sparse/" + std::to_string(t);
        std::vector<Run> offset_runs;
        for (const Run& r : runs) offset_runs.push_back({r.start, r.len + 1});
        read_runs(file.offsets[t], offset_runs, 0, foffsets, xfer());
        std::vector<Run> index_runs;
        std::size_t at = 0;
        for (const Run& r : offset_runs) {
          for (std::int64_t j = 0; j < r.len; ++j) {
            const std::int64_t o = foffsets[at + j];
            const bool bad = o < 0 || o > file.nnz[t] || (j > 0 && o < foffsets[at + j - 1]);
            if (bad)
              bad_value(f, name + "/offsets", r.start + j,
                        "offset " + std::to_string(o) + " not non-decreasing within [0, " +
                            std::to_string(file.nnz[t]) + "]");
          }
          index_runs.push_back({foffsets[at], foffsets[at + r.len - 1] - foffsets[at]});
          at += static_cast<std::size_t>(r.len);
        }
        read_runs(file.indices[t], index_runs, 0, findices, xfer());
        // walk samples in file order: each sample's indices follow the previous one's
        std::size_t sample = k0, off_at = 0;
        std::int64_t idx_at = 0;
        for (const Run& r : offset_runs) {
          for (std::int64_t j = 0; j + 1 < r.len; ++j, ++sample) {
            const std::int64_t len = foffsets[off_at + j + 1] - foffsets[off_at + j];
            const std::int64_t slot = rows[sample].second;
            slot_begin[t][slot] = static_cast<std::int64_t>(gathered[t].size());
            slot_len[t][slot] = len;
            for (std::int64_t e = 0; e < len; ++e) {
              const std::int64_t v = findices[idx_at + e];
              if (opt.validate && (v < 0 || v >= info.table_rows[t]))
                bad_value(f, name + "/indices", foffsets[off_at + j] + e,
                          "index " + std::to_string(v) + " outside table rows [0, " +
                              std::to_string(info.table_rows[t]) + ") (sample row " + std::to_string(r.start + j) +
                              ")");
              gathered[t].push_back(v);
            }
            idx_at += len;
          }
          off_at += static_cast<std::size_t>(r.len);
        }
      }
    }
    if (info.multi_hot)
      for (int t = 0; t < T; ++t) {
        auto& offs = out.offsets[t];
        auto& idx = out.indices[t];
        offs.resize(static_cast<std::size_t>(n + 1));
        offs[0] = 0;
        idx.clear();
        for (std::int64_t i = 0; i < n; ++i) {
          const auto b = gathered[t].begin() + slot_begin[t][i];
          idx.insert(idx.end(), b, b + slot_len[t][i]);
          offs[i + 1] = static_cast<std::int64_t>(idx.size());
        }
      }
  }

  // --- shuffled reads (independent I/O): whole blocks of rows, cached while the window lasts ---

  struct CachedBlock {
    std::int64_t id = -1;
    std::uint64_t used = 0;
    Batch rows;                          // the block's rows in order, already validated
    std::vector<std::int64_t> row_major;  // one-hot: [rows x tables], so a row's indices are adjacent
  };
  std::vector<CachedBlock> block_cache;
  std::uint64_t block_clock = 0;

  const Batch& load_block(std::int64_t id) {
    for (CachedBlock& b : block_cache)
      if (b.id == id) {
        b.used = ++block_clock;
        return b.rows;
      }
    const std::size_t capacity = static_cast<std::size_t>(window / block) + 2;
    CachedBlock* slot = nullptr;
    if (block_cache.size() < capacity) {
      slot = &block_cache.emplace_back();
    } else {
      slot = &*std::min_element(block_cache.begin(), block_cache.end(),
                                [](const CachedBlock& a, const CachedBlock& b) { return a.used < b.used; });
    }
    slot->id = -1;  // invalid until read completely
    const std::int64_t first = id * block, count = std::min(block, info.rows - first);
    std::vector<std::pair<std::int64_t, std::int64_t>> rows(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) rows[i] = {first + i, i};
    read_rows(rows, true, {}, slot->rows);
    if (!info.multi_hot) {
      const int T = info.num_tables();
      slot->row_major.resize(static_cast<std::size_t>(count * T));
      for (int t = 0; t < T; ++t)
        for (std::int64_t i = 0; i < count; ++i) slot->row_major[i * T + t] = slot->rows.indices[t][i];
    }
    slot->id = id;
    slot->used = ++block_clock;
    return slot->rows;
  }

  void gather_from_blocks(const std::vector<std::pair<std::int64_t, std::int64_t>>& rows, Batch& out) {
    const auto n = static_cast<std::int64_t>(rows.size());
    const int D = info.num_dense, T = info.num_tables();
    shape_batch(out, n);
    if (!info.multi_hot) {
      for (int t = 0; t < T; ++t) out.indices[t].resize(static_cast<std::size_t>(n));
      one_hot_offsets(out, n);
    } else {
      for (int t = 0; t < T; ++t) {
        out.offsets[t].resize(static_cast<std::size_t>(n + 1));
        out.offsets[t][0] = 0;
        out.indices[t].clear();
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t row = rows[i].first;
      const std::int64_t id = row / block;
      if (cached == nullptr || cached->id != id) {
        load_block(id);
        for (CachedBlock& c : block_cache)
          if (c.id == id) cached = &c;
      }
      const Batch& b = cached->rows;
      const std::int64_t k = row - id * block;
      const float* src = b.dense.data() + k * D;
      float* to = out.dense.data() + i * D;
      for (int d = 0; d < D; ++d) to[d] = src[d];
      out.labels[i] = b.labels[k];
      if (!info.multi_hot) {
        const std::int64_t* idx = cached->row_major.data() + k * T;
        for (int t = 0; t < T; ++t) out.indices[t][i] = idx[t];
        continue;
      }
      for (int t = 0; t < T; ++t) {
        const auto* begin = b.indices[t].data() + b.offsets[t][k];
        out.indices[t].insert(out.indices[t].end(), begin, b.indices[t].data() + b.offsets[t][k + 1]);
        out.offsets[t][i + 1] = static_cast<std::int64_t>(out.indices[t].size());
      }
    }
    cached = nullptr;  // the cache may be reorganised before the next batch
  }

  CachedBlock* cached = nullptr;

  // --- file order, one-hot, independent I/O: read units of several batches ---
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

  std::int64_t unit_batches() const {
    const std::int64_t row_bytes = 4 * (info.num_dense + 1) + (sparse32 ? 4 : 8) * info.num_tables();
    const std::int64_t rows = std::max<std::int64_t>(1, opt.global_batch / opt.world);
    return std::max<std::int64_t>(1, kUnitBytes / (row_bytes * rows));
  }

  // This rank's rows of batches [first, end), split at file boundaries into file-local runs, each
  // with the staging row it goes to; runs that continue each other are merged. `at` receives the
  // staging row of each batch's first row, then the total.
  struct Piece {
    int file;
    Run run;
    std::int64_t at;
  };
  std::vector<Piece> pieces_of(std::int64_t first, std::int64_t end, std::vector<std::int64_t>* at) const {
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

  // Read-ahead: a thread of its own reads the bytes the next units will need into the page
  // cache, so that storage works while this thread copies.
  std::int64_t hinted_to = -1;  // batches before this one (from the current unit on) were hinted

  void hint(std::int64_t first, std::int64_t end) {
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

  void run_hints() {
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

  void read_ahead(const Hint& h) {
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
  static bool in_page_cache(const Hint& h) {
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

  void stop_hints() {
    {
      std::lock_guard<std::mutex> lock(hint_mutex);
      hint_stop = true;
    }
    hint_cv.notify_all();
    if (hint_thread.joinable()) hint_thread.join();
  }

  ~Impl() { stop_hints(); }

  // Read-ahead for batches [first, end), read `unit` batches at a time: these, unless announced
  // already, and up to 2 * kUnitsAhead units after them, announced kUnitsAhead units at a time so
  // that the ranges of consecutive units join into long reads. After a seek or at a new epoch the
  // announcements start again from `first`.
  void read_ahead_for(std::int64_t first, std::int64_t end, std::int64_t unit) {
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

  void read_unit(std::int64_t b) {
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
  void serve_staged(std::int64_t b, Batch& out) {
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
  void report_staged(std::int64_t b, std::int64_t s, std::int64_t n) const {
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

  // --- one-hot offsets: 0, 1, ..., n for every batch of n rows ---
  //
  // The batch buffers go round between the consumer and the reader, so an offsets array the
  // reader filled comes back holding what it held: it is rewritten only when its size changed or
  // it is not one the reader filled (a new batch, or one from elsewhere).
  std::unordered_map<const std::int64_t*, std::size_t> iota_known;

  bool holds_iota(const std::vector<std::int64_t>& o, std::size_t size) const {
    if (o.size() != size) return false;
    auto it = iota_known.find(o.data());
    if (it == iota_known.end() || it->second != size) return false;
    for (std::size_t k = 0; k <= 8; ++k) {  // spot check: nothing rewrote it in place
      const std::size_t at = (size - 1) * k / 8;
      if (o[at] != static_cast<std::int64_t>(at)) return false;
    }
    return true;
  }

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

  void one_hot_offsets(Batch& out, std::int64_t n) {
    const auto size = static_cast<std::size_t>(n + 1);
    out.offsets.resize(static_cast<std::size_t>(info.num_tables()));
    for (std::vector<std::int64_t>& o : out.offsets) {
      if (holds_iota(o, size)) continue;
      o.resize(size);
      std::iota(o.begin(), o.end(), std::int64_t{0});
      if (iota_known.size() >= 4096) iota_known.clear();  // forget buffers long gone
      iota_known[o.data()] = size;
    }
  }

  std::vector<float> scratch_dense, scratch_labels;
  std::vector<std::int32_t> scratch_sparse32;
  std::vector<std::int64_t> scratch_sparse64;

  // --- prefetch ---

  ReaderPosition advance(ReaderPosition p) const {
    if (++p.batch >= bpe) return {p.epoch + 1, 0};
    return p;
  }

  void run_worker() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      cv.wait(lock, [&] {
        return stop || (!paused && !failed && bpe > 0 && static_cast<int>(queue.size()) < opt.prefetch);
      });
      if (stop) return;
      Item item;
      if (!spare.empty()) {  // reuse the buffers of a batch the consumer is done with
        item.batch = std::move(spare.back());
        spare.pop_back();
      }
      item.pos = produce_pos;
      const std::uint64_t gen = generation;
      produce_pos = advance(produce_pos);
      busy = true;
      lock.unlock();
      try {
        item.check_values = read_batch(item.pos, item.batch, true);
      } catch (...) {
        item.error = std::current_exception();
      }
      lock.lock();
      busy = false;
      if (gen == generation) {
        if (item.error) failed = true;
        queue.push_back(std::move(item));
      }
      cv.notify_all();
    }
  }

  // Waits until no read is in flight. Collective reads must happen on every rank or none, so a
  // collective reader first lets its producer finish every read up to the read-ahead limit
  // (consumed + prefetch), a point that is the same on every rank, before anything stops it.
  void wait_idle(std::unique_lock<std::mutex>& lock) {
    if (collective && worker.joinable()) {
      paused = false;
      cv.notify_all();
      cv.wait(lock, [&] {
        return !busy && (failed || bpe == 0 || static_cast<int>(queue.size()) >= opt.prefetch);
      });
    }
    cv.wait(lock, [&] { return !busy; });
  }
};

Reader::Reader(std::vector<std::string> files, ReaderOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->opt = options;
  impl_->open(files, nullptr);
  if (impl_->opt.prefetch > 0) impl_->worker = std::thread([this] { impl_->run_worker(); });
}

Reader::Reader(std::vector<std::string> files, ReaderOptions options, void* mpi_comm)
    : impl_(std::make_unique<Impl>()) {
  RECMIX_REQUIRE(mpi_comm != nullptr, ConfigError, "reader: collective I/O needs a communicator");
  MPI_Comm comm = *static_cast<MPI_Comm*>(mpi_comm);
  MPI_Comm_rank(comm, &options.rank);
  MPI_Comm_size(comm, &options.world);
  if (options.prefetch > 0) {
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) options.prefetch = 0;  // reads must stay on the calling thread
  }
  impl_->opt = options;
  impl_->collective = true;
  impl_->open(files, mpi_comm);
  if (impl_->opt.prefetch > 0) impl_->worker = std::thread([this] { impl_->run_worker(); });
}

Reader::~Reader() {
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->wait_idle(lock);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

const DatasetInfo& Reader::info() const { return impl_->info; }
const ReaderOptions& Reader::options() const { return impl_->opt; }
std::int64_t Reader::batches_per_epoch() const { return impl_->bpe; }

bool Reader::next(Batch& out) {
  Impl& m = *impl_;
  if (m.opt.prefetch == 0) {
    if (m.consume_pos.batch >= m.bpe) {
      m.consume_pos = {m.consume_pos.epoch + 1, 0};
      return false;
    }
    m.read_batch(m.consume_pos, out);
    ++m.consume_pos.batch;
    return true;
  }
  std::unique_lock<std::mutex> lock(m.mutex);
  if (m.consume_pos.batch >= m.bpe) {
    m.consume_pos = {m.consume_pos.epoch + 1, 0};
    return false;
  }
  m.paused = false;
  m.cv.notify_all();
  m.cv.wait(lock, [&] { return !m.queue.empty(); });
  // A failed read stays at the front (every later next() reports it) until a seek().
  if (m.queue.front().error) std::rethrow_exception(m.queue.front().error);
  Item item = std::move(m.queue.front());
  m.queue.pop_front();
  m.cv.notify_all();
  if (!(item.pos == m.consume_pos)) throw Error("reader: prefetch queue out of order");
  bool ok = true;
  if (item.check_values) {  // checked here, while the producer reads on
    lock.unlock();
    ok = m.values_ok(item.batch);
    lock.lock();
  }
  if (!ok) {
    // Read again by the path that names the file, dataset and row at fault; the error then stays
    // at the front, as a read error does, until a seek().
    m.wait_idle(lock);
    ++m.generation;
    m.queue.clear();
    m.produce_pos = m.consume_pos;
    try {
      m.read_batch(item.pos, item.batch);
      throw DataError("reader: batch " + std::to_string(item.pos.batch) + " holds a bad value");
    } catch (...) {
      m.failed = true;
      m.queue.push_back({item.pos, {}, std::current_exception()});
      throw;
    }
  }
  std::swap(out, item.batch);
  if (m.spare.size() < 2) m.spare.push_back(std::move(item.batch));
  ++m.consume_pos.batch;
  return true;
}

ReaderPosition Reader::position() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->consume_pos;
}

void Reader::seek(ReaderPosition p) {
  Impl& m = *impl_;
  RECMIX_REQUIRE(p.epoch >= 0 && p.batch >= 0 && p.batch <= m.bpe, ConfigError,
                 "reader: position (epoch " + std::to_string(p.epoch) + ", batch " + std::to_string(p.batch) +
                     ") outside the dataset (" + std::to_string(m.bpe) + " batches per epoch)");
  std::unique_lock<std::mutex> lock(m.mutex);
  m.wait_idle(lock);
  ++m.generation;
  m.queue.clear();
  m.consume_pos = p;
  m.produce_pos = p.batch >= m.bpe ? ReaderPosition{p.epoch + 1, 0} : p;
  m.failed = false;
  m.paused = false;
  m.cv.notify_all();
}

void Reader::pause_prefetch() {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->wait_idle(lock);
  impl_->paused = true;
}

std::int64_t Reader::sample_row(std::int64_t epoch, std::int64_t pos) const {
  RECMIX_REQUIRE(pos >= 0 && pos < impl_->info.rows, ConfigError, "reader: sample position out of range");
  return impl_->sample_row(epoch, pos);
}

}  // namespace recmix::data
