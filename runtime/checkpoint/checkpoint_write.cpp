#include "runtime/checkpoint/checkpoint_write.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "comm/mpi/mpi_handle.hpp"
#include "core/error.hpp"
#include "data/h5.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sparse_optimizer.hpp"
#include "runtime/checkpoint/checkpoint_checksum.hpp"
#include "runtime/checkpoint/checkpoint_staging.hpp"
#include "runtime/train/dlrm_model.hpp"

namespace recmix::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// fsync of a file or a directory; a failure is an IoError naming it.
void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw IoError(fmt::format("cannot sync '{}' to disk: {}", path, std::strerror(err)));
  }
  ::close(fd);
}

// Writes bytes [0, n) of data at `offset` of fd, whatever pwrite splits them into.
void pwrite_all(int fd, const void* data, std::size_t n, std::uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) throw IoError(fmt::format("cannot write '{}': {}", path, std::strerror(done < 0 ? errno : EIO)));
    p += done, n -= static_cast<std::size_t>(done), offset += static_cast<std::uint64_t>(done);
  }
}

// A file descriptor closed at scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Every rank's block checksums of one array added up. The sums are mod 2^64; they travel as
// two 32-bit halves in int64 so that the all-reduce never overflows.
std::vector<std::uint64_t> sum_over_ranks(const std::vector<std::uint64_t>& mine, comm::Communicator& comm) {
  std::vector<std::int64_t> halves(2 * mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    halves[2 * i] = static_cast<std::int64_t>(mine[i] & 0xffffffffu);
    halves[2 * i + 1] = static_cast<std::int64_t>(mine[i] >> 32);
  }
  comm.all_reduce_sum(halves.data(), halves.data(), halves.size(), comm::DataType::i64);
  std::vector<std::uint64_t> total(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i)
    total[i] = static_cast<std::uint64_t>(halves[2 * i]) + (static_cast<std::uint64_t>(halves[2 * i + 1]) << 32);
  return total;
}

// The groups above a dataset path ("embedding/3/weights": "embedding", "embedding/3").
void add_parents(const std::string& name, std::vector<std::string>& groups) {
  for (auto slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
    auto group = name.substr(0, slash);
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
  }
}

}  // namespace

std::size_t CheckpointContent::bytes() const {
  std::size_t total = 0;
  for (auto& p : pieces) total += p.count * arrays[p.array].cols * sizeof(float);
  return total;
}

CheckpointContent describe_checkpoint(DlrmModel& model, const CheckpointMeta& meta, int rank) {
  CheckpointContent c;
  c.meta = meta;
  c.dense_step_count = model.dense_optimizer().step_count();
  c.num_tables = model.num_tables();
  c.table_storage = half::to_string(model.embedding().storage().type);
  auto add = [&](std::string name, hsize_t rows, hsize_t cols) {
    c.arrays.push_back({std::move(name), rows, cols});
    return c.arrays.size() - 1;
  };
  // Dense parameters and optimizer state are replicated: rank 0 writes them.
  for (auto& p : model.dense_parameters()) {
    auto a = add("dense/" + p.name, p.count, 1);
    if (rank == 0) c.pieces.push_back({a, 0, p.count, p.value, false});
  }
  for (auto& s : model.dense_optimizer().state()) {
    auto a = add("dense_optimizer/" + s.name, s.count, 1);
    if (rank == 0) c.pieces.push_back({a, 0, s.count, s.value, false});
  }
  // Embedding tables, logical and unsharded: each owner writes its own rows. The optimizer
  // state's layout follows from the optimizer kind, which every rank knows, so all ranks create
  // the same datasets even when some own no rows.
  const auto kind = model.embedding().optimizer_kind();
  const int dim = model.embedding().dim();
  const auto state_width = embedding::state_per_row(kind, dim);
  const std::string state_name = state_width > 0 ? embedding::state_name(kind) : std::string();
  auto shards = model.embedding().local_shards();
  for (int t = 0; t < model.num_tables(); ++t) {
    const hsize_t rows = model.table_rows()[t];
    const auto weights = add(fmt::format("embedding/{}/weights", t), rows, dim);
    std::size_t state = 0;
    if (state_width > 0) state = add(fmt::format("embedding/{}/{}", t, state_name), rows, state_width);
    for (auto& shard : shards) {
      if (shard.table != t) continue;
      const hsize_t n = shard.row_end - shard.row_begin;
      c.pieces.push_back({weights, static_cast<hsize_t>(shard.row_begin), n, shard.weights, shard.host_memory});
      if (state_width == 0) continue;
      if (shard.state.size() != 1 || shard.state[0].first != state_name)
        throw Error(fmt::format("table {}: embedding optimizer state differs between shards", t));
      c.pieces.push_back({state, static_cast<hsize_t>(shard.row_begin), n, shard.state[0].second, shard.host_memory});
    }
  }
  return c;
}

void write_checkpoint_file(const std::string& path, const CheckpointContent& content, device::Backend& backend,
                           comm::Communicator& comm, bool hold_hdf5) {
  const std::string tmp = path + ".tmp";
  const int rank = comm.rank();
  const auto parent = std::filesystem::path(path).parent_path();
  if (rank == 0 && !parent.empty()) std::filesystem::create_directories(parent);
  comm.barrier();
  MPI_Comm mpi = comm::mpi_handle(comm);
  auto stream = backend.create_stream();
  // Each array's block checksums over the rows this rank writes.
  std::vector<BlockChecksums> sums;
  for (auto& a : content.arrays) sums.emplace_back(0, a.rows);
  try {
    std::unique_lock<std::recursive_mutex> whole(h5::api_mutex(), std::defer_lock);
    if (hold_hdf5) whole.lock();  // a reader's prefetch thread waits for the whole write
    auto file = h5::create_file_mpio(tmp, &mpi);
    // Metadata calls are collective: every rank makes them with the same values.
    const CheckpointMeta& meta = content.meta;
    h5::write_attribute(file, "format", std::string(kCheckpointFormat));
    h5::write_attribute(file, "version", std::int64_t{kCheckpointVersion});
    h5::write_attribute(file, "step", meta.step);
    h5::write_attribute(file, "data_epoch", meta.position.epoch);
    h5::write_attribute(file, "data_batch", meta.position.batch);
    h5::write_attribute(file, "seed", static_cast<std::int64_t>(meta.seed));
    h5::write_attribute(file, "world_size", std::int64_t{meta.world_size});
    h5::write_attribute(file, "table_rows", meta.table_rows);
    h5::write_attribute(file, "num_dense", std::int64_t{meta.num_dense});
    h5::write_attribute(file, "job_spec", meta.job_spec);
    h5::write_attribute(file, "checksum_block_rows", static_cast<std::int64_t>(kChecksumBlockRows));

    std::vector<std::string> groups{"dense", "dense_optimizer", "embedding"};
    for (int t = 0; t < content.num_tables; ++t) groups.push_back(fmt::format("embedding/{}", t));
    for (auto& a : content.arrays) add_parents(checksum_dataset(a.name), groups);
    for (auto& g : groups) h5::create_group(file, g);
    h5::write_attribute(h5::open_group(file, "dense_optimizer"), "step_count", content.dense_step_count);
    for (int t = 0; t < content.num_tables; ++t)
      h5::write_attribute(h5::open_group(file, fmt::format("embedding/{}", t)), "storage", content.table_storage);
    // Every element is written below: no fill at creation (a second pass over the whole file).
    h5::CreateOptions written;
    written.fill = false;
    std::vector<h5::Dataset> datasets;
    for (auto& a : content.arrays)
      datasets.push_back(h5::create_dataset(file, a.name, h5::native_type<float>(), {a.rows, a.cols}, written));

    // Without the lock held throughout, the rows go to their place in the file with pwrite: the
    // datasets are contiguous and their space is allocated when they are created (parallel
    // HDF5), so nothing but these writes touches it, and the HDF5 lock (which the data reader's
    // thread takes for every batch) is not held while the page cache throttles a large write.
    // A rank's failure to write its rows (a full disk) is agreed on before the next collective,
    // so that every rank throws here and closes the file together.
    Fd direct;
    std::string failure;
    try {
      if (checkpoint_faults().failing_rank.load() == rank)
        throw IoError(fmt::format("cannot write '{}': failure injected on rank {} (tests)", tmp, rank));
      if (!hold_hdf5) {
        direct.fd = ::open(tmp.c_str(), O_WRONLY);
        if (direct.fd < 0) throw IoError(fmt::format("cannot open '{}' to write: {}", tmp, std::strerror(errno)));
      }
      for (auto& p : content.pieces) {
        const hsize_t cols = content.arrays[p.array].cols;
        hid_t d = datasets[p.array];
        haddr_t offset = HADDR_UNDEF;
        if (direct.fd >= 0) {
          h5::Lock lock(h5::api_mutex());
          offset = H5Dget_offset(d);
        }
        if (offset != HADDR_UNDEF && (p.host || backend.host_accessible(device::Tier::device))) {
          const std::size_t row_bytes = cols * sizeof(float);
          pwrite_all(direct.fd, p.data, p.count * row_bytes, offset + p.first * row_bytes, tmp);
          sums[p.array].add(p.first, p.count, cols, p.data);
          continue;
        }
        if (p.host || backend.host_accessible(device::Tier::device)) {
          h5::write_rows(d, p.first, p.count, p.data);
          sums[p.array].add(p.first, p.count, cols, p.data);
          continue;
        }
        for_each_piece(p.count, cols, [&](hsize_t r, hsize_t n, std::vector<float>& host) {
          backend.copy(host.data(), p.data + r * cols, host.size() * sizeof(float), *stream);
          stream->synchronize();
          h5::write_rows(d, p.first + r, n, host.data());
          sums[p.array].add(p.first + r, n, cols, host.data());
        });
      }
      if (direct.fd >= 0 && ::fsync(direct.fd) != 0)  // each rank's own rows, before rank 0 renames
        throw IoError(fmt::format("cannot sync '{}' to disk: {}", tmp, std::strerror(errno)));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    std::int32_t failed = failure.empty() ? 0 : 1;
    comm.all_reduce_sum(&failed, &failed, 1, comm::DataType::i32);
    if (failed > 0)
      throw IoError(failure.empty() ? fmt::format("writing '{}' failed on {} other rank(s)", tmp, failed) : failure);
    for (std::size_t i = 0; i < content.arrays.size(); ++i) {
      const auto total = sum_over_ranks(sums[i].sums(), comm);
      auto d = h5::create_dataset(file, checksum_dataset(content.arrays[i].name), h5::native_type<std::uint64_t>(),
                                  {static_cast<hsize_t>(total.size())}, written);
      if (rank == 0 && !total.empty()) h5::write_rows(d, 0, total.size(), total.data());
    }
  } catch (...) {
    if (rank == 0) std::filesystem::remove(tmp);
    throw;
  }
  comm.barrier();
  if (rank == 0) {
    // On disk before it takes the name, and the name on disk after: a power cut leaves the old
    // checkpoint or the new one, whole.
    sync_path(tmp);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw IoError(fmt::format("cannot rename '{}' to '{}': {}", tmp, path, ec.message()));
    sync_path(parent.empty() ? std::string(".") : parent.string());
  }
  comm.barrier();
}

SnapshotBuffer::~SnapshotBuffer() { release(); }

void SnapshotBuffer::release() {
  if (touch_.joinable()) touch_.join();
  if (data_) ::munmap(data_, mapped_);
  data_ = nullptr;
  bytes_ = mapped_ = 0;
}

void SnapshotBuffer::reserve(std::size_t floats) {
  const std::size_t bytes = floats * sizeof(float);
  if (bytes <= bytes_) return;
  release();
  constexpr std::size_t kHugePage = std::size_t(2) << 20;
  mapped_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    mapped_ = 0;
    throw OutOfMemoryError(fmt::format("cannot allocate the {} checkpoint snapshot in host memory: {}",
                                       device::format_bytes(bytes), std::strerror(errno)));
  }
  ::madvise(p, mapped_, MADV_HUGEPAGE);  // advice only: 4 KiB pages where it is not taken
  data_ = static_cast<float*>(p);
  bytes_ = bytes;
  touch_ = std::thread([p = static_cast<volatile char*>(p), n = mapped_] {
    for (std::size_t i = 0; i < n; i += 4096) p[i] = 0;
  });
}

float* SnapshotBuffer::data() {
  if (touch_.joinable()) touch_.join();
  return data_;
}

AsyncCheckpointWriter::AsyncCheckpointWriter(comm::Communicator& comm, device::Backend& backend,
                                             std::size_t snapshot_bytes)
    : comm_(comm.split(0, comm.rank())), backend_(backend) {
  buffer_.reserve(snapshot_bytes / sizeof(float));
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

std::string AsyncCheckpointWriter::snapshot(const CheckpointContent& content) {
  RECMIX_REQUIRE(!thread_.joinable(), Error, "a checkpoint write is already in flight");
  const auto copy_start = Clock::now();
  content_ = content;
  buffer_.reserve(content.bytes() / sizeof(float));
  float* buffer = buffer_.data();
  auto stream = backend_.create_stream();
  // Host-to-host copies in two halves, the second on a helper thread: the copy is what a
  // background checkpoint costs the step, and a step with one compute thread leaves a core free.
  std::vector<std::pair<float*, const float*>> host_copies;
  std::vector<std::size_t> host_counts;
  std::vector<bool> from_device(content_.pieces.size(), false);
  std::size_t at = 0;
  for (std::size_t i = 0; i < content_.pieces.size(); ++i) {
    CheckpointPiece& p = content_.pieces[i];
    const std::size_t n = p.count * content_.arrays[p.array].cols;
    if (p.host || backend_.host_accessible(device::Tier::device)) {
      host_copies.push_back({buffer + at, p.data});
      host_counts.push_back(n);
    } else {
      backend_.copy(buffer + at, p.data, n * sizeof(float), *stream);
      from_device[i] = true;
    }
    p.data = buffer + at;
    p.host = true;
    at += n;
  }
  const std::size_t total = at, half = total / 2;
  // Floats [from, to) of the host copies, a block at a time, each block checked for values that
  // are not finite right after its copy (still in cache: no second pass over the model). Returns
  // the buffer offset of the first block holding one, or `total`.
  constexpr std::size_t kBlock = std::size_t(1) << 14;
  auto copy_range = [&](std::size_t from, std::size_t to) {
    std::size_t base = 0, bad = total;
    for (std::size_t i = 0; i < host_copies.size(); base += host_counts[i], ++i) {
      const std::size_t lo = std::max(from, base), hi = std::min(to, base + host_counts[i]);
      for (std::size_t b = lo; b < hi; b += kBlock) {
        const std::size_t n = std::min(kBlock, hi - b);
        float* dst = host_copies[i].first + (b - base);
        std::memcpy(dst, host_copies[i].second + (b - base), n * sizeof(float));
        if (bad == total && !all_finite(dst, n)) bad = static_cast<std::size_t>(dst - buffer);
      }
    }
    return bad;
  };
  std::size_t bad_second = total;
  std::thread second([&] { bad_second = copy_range(half, total); });
  const std::size_t bad_first = copy_range(0, half);
  second.join();
  stream->synchronize();
  // Named by array and row: the piece holding the first bad block of the host copies, and the
  // pieces copied from device memory (checked here, in the snapshot).
  const std::size_t first_bad = std::min(bad_first, bad_second);
  std::string found;
  std::size_t off = 0;
  for (std::size_t i = 0; i < content_.pieces.size() && found.empty(); ++i) {
    const CheckpointPiece& p = content_.pieces[i];
    const std::size_t cols = content_.arrays[p.array].cols, n = p.count * cols;
    if (from_device[i] || (first_bad >= off && first_bad < off + n))
      found = non_finite_in(buffer + off, p.first, p.count, cols, content_.arrays[p.array].name);
    off += n;
  }
  snapshot_s_ = std::chrono::duration<double>(Clock::now() - copy_start).count();
  return found;
}

CheckpointFaults& checkpoint_faults() {
  static CheckpointFaults faults;
  return faults;
}

void AsyncCheckpointWriter::launch(const std::string& path) {
  RECMIX_REQUIRE(!thread_.joinable(), Error, "a checkpoint write is already in flight");
  path_ = path;
  error_ = nullptr;
  failed_anywhere_ = false;
  done_ = false;
  thread_ = std::thread([this] {
    // Below the training threads: where cores are short, the step goes first and the write waits.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    const auto write_start = Clock::now();
    // Tests make the write outlast the steps after it (checkpoint.when_busy).
    if (const int delay = checkpoint_faults().delay_ms.load(); delay > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    try {
      write_checkpoint_file(path_, content_, backend_, *comm_, false);
    } catch (...) {
      error_ = std::current_exception();
    }
    std::int32_t failed = error_ ? 1 : 0;
    try {
      comm_->all_reduce_sum(&failed, &failed, 1, comm::DataType::i32);
    } catch (...) {
      failed = 1;
    }
    failed_anywhere_ = failed > 0;
    seconds_ = std::chrono::duration<double>(Clock::now() - write_start).count();
    done_ = true;
  });
}

std::string AsyncCheckpointWriter::wait() {
  if (!thread_.joinable()) return {};
  thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  if (failed_anywhere_) throw IoError(fmt::format("writing checkpoint '{}' failed on another rank", path_));
  return path_;
}

}  // namespace recmix::runtime
