// The reader's set-up and public calls: opening the files, the prefetch thread that reads batches
// ahead, and Reader's methods over them.
#include "data/reader.hpp"

#include <mpi.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "data/h5.hpp"
#include "data/reader_checks.hpp"
#include "data/reader_impl.hpp"

namespace recmix::data {

using namespace detail;

namespace {

constexpr std::int64_t kDefaultShuffleBlock = 4096;
constexpr std::size_t kChunkCacheBytes = 32u << 20;

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

}  // namespace

void Reader::Impl::open(const std::vector<std::string>& names, void* comm) {
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

// --- prefetch ---

void Reader::Impl::run_worker() {
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
void Reader::Impl::wait_idle(std::unique_lock<std::mutex>& lock) {
  if (collective && worker.joinable()) {
    paused = false;
    cv.notify_all();
    cv.wait(lock, [&] {
      return !busy && (failed || bpe == 0 || static_cast<int>(queue.size()) >= opt.prefetch);
    });
  }
  cv.wait(lock, [&] { return !busy; });
}

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
