#include "data/h5.hpp"

#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <filesystem>

namespace recmix::h5 {

std::recursive_mutex& api_mutex() {
  static std::recursive_mutex mutex;
  // Errors become exceptions, not stderr dumps. A thread-safe HDF5 keeps the error stack, and
  // whether it prints, per thread: every thread that calls the library (the reader's prefetch
  // threads too) turns the printing off once. That call is into HDF5 like any other, so it holds
  // the mutex: Debian's parallel HDF5 is not thread-safe, and a prefetch thread's first call made
  // unguarded while the main thread loaded a checkpoint crashed a resumed run.
  thread_local bool quiet = false;
  if (!quiet) {
    std::lock_guard<std::recursive_mutex> lock(mutex);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
  return mutex;
}

std::string describe(hid_t id) {
  Lock lock(api_mutex());
  std::string file = "?";
  hid_t fid = H5Iget_file_id(id);
  if (fid >= 0) {
    ssize_t n = H5Fget_name(fid, nullptr, 0);
    if (n > 0) {
      file.assign(static_cast<std::size_t>(n) + 1, '\0');
      H5Fget_name(fid, file.data(), file.size());
      file.resize(static_cast<std::size_t>(n));
    }
    H5Fclose(fid);
  }
  std::string object;
  H5I_type_t kind = H5Iget_type(id);
  if (kind == H5I_ATTR) {
    ssize_t n = H5Aget_name(id, 0, nullptr);
    if (n > 0) {
      object.assign(static_cast<std::size_t>(n) + 1, '\0');
      H5Aget_name(id, object.size(), object.data());
      object.resize(static_cast<std::size_t>(n));
      object = "attribute " + object;
    }
  } else if (kind != H5I_FILE) {
    ssize_t n = H5Iget_name(id, nullptr, 0);
    if (n > 0) {
      object.assign(static_cast<std::size_t>(n) + 1, '\0');
      H5Iget_name(id, object.data(), object.size());
      object.resize(static_cast<std::size_t>(n));
    }
  }
  H5Eclear2(H5E_DEFAULT);
  return object.empty() ? file : file + ":" + object;
}

std::string last_error_message() {
  Lock lock(api_mutex());
  std::string message;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
        auto* m = static_cast<std::string*>(data);
        if (n == 0 && e->desc) *m = e->desc;
        return 0;
      },
      &message);
  H5Eclear2(H5E_DEFAULT);
  return message;
}

void fail_io(const std::string& where, const std::string& what) {
  std::string m = last_error_message();
  throw IoError(where + ": " + what + (m.empty() ? "" : " (" + m + ")"));
}

void fail_data(const std::string& where, const std::string& what) {
  throw DataError(where + ": " + what);
}

void Handle::reset() noexcept {
  if (id_ < 0) return;
  Lock lock(api_mutex());
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP:
    case H5I_DATASET: H5Oclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
  H5Eclear2(H5E_DEFAULT);
  id_ = H5I_INVALID_HID;
}

template <> hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <> hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <> hid_t native_type<std::int32_t>() { return H5T_NATIVE_INT32; }
template <> hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }
template <> hid_t native_type<std::uint8_t>() { return H5T_NATIVE_UINT8; }
template <> hid_t native_type<std::uint64_t>() { return H5T_NATIVE_UINT64; }

// --- files ---

File create_file(const std::string& path) {
  Lock lock(api_mutex());
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) fail_io(path, "cannot create HDF5 file");
  return File(f);
}

// A directory or device handed to H5Fopen fails with a dump of HDF5's error stack that names
// neither; the path is checked first.
static void require_regular_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) throw IoError(path + ": no such file");
  if (std::filesystem::is_directory(status)) throw IoError(path + ": is a directory, not an HDF5 file");
  if (!std::filesystem::is_regular_file(status)) throw IoError(path + ": is not a regular file");
}

File open_file(const std::string& path, bool writable) {
  Lock lock(api_mutex());
  require_regular_file(path);
  hid_t f = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) fail_io(path, "cannot open as HDF5 (not an HDF5 file, or truncated)");
  return File(f);
}

static PropList fapl_mpio(void* mpi_comm) {
  RECMIX_REQUIRE(mpi_comm != nullptr, IoError, "MPI-IO file access needs a communicator");
  // Open MPI 4.1.0-4.1.4's OMPIO returns wrong data for some non-contiguous collective reads
  // when its read data sieving is on (open-mpi/ompi#10546); the component reads this setting
  // when it first opens a file, so turning it off here works unless the user chose otherwise.
  ::setenv("OMPI_MCA_fbtl_posix_read_datasieving", "0", 0);
  PropList fapl(RECMIX_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), IoError, "file access list"));
  RECMIX_H5_CHECK(H5Pset_fapl_mpio(fapl, *static_cast<MPI_Comm*>(mpi_comm), MPI_INFO_NULL), IoError,
                  "file access list");
  return fapl;
}

File create_file_mpio(const std::string& path, void* mpi_comm) {
  Lock lock(api_mutex());
  PropList fapl = fapl_mpio(mpi_comm);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (f < 0) fail_io(path, "cannot create HDF5 file (MPI-IO)");
  return File(f);
}

File open_file_mpio(const std::string& path, void* mpi_comm, bool writable) {
  Lock lock(api_mutex());
  require_regular_file(path);
  PropList fapl = fapl_mpio(mpi_comm);
  hid_t f = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
  if (f < 0) fail_io(path, "cannot open as HDF5 with MPI-IO (not an HDF5 file, or truncated)");
  return File(f);
}

PropList transfer_mpio(bool collective) {
  Lock lock(api_mutex());
  PropList dxpl(RECMIX_H5_CHECK(H5Pcreate(H5P_DATASET_XFER), IoError, "transfer list"));
  RECMIX_H5_CHECK(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
                  IoError, "transfer list");
  return dxpl;
}

namespace {

// The temporaries of live AtomicPaths, where a signal handler can read them: a slot is free (0),
// being written (1) or holds a path (2). Registration never allocates in the handler's view.
constexpr int kTempSlots = 8;
constexpr std::size_t kTempPathBytes = 4096;
std::atomic<int> temp_state[kTempSlots];
char temp_paths[kTempSlots][kTempPathBytes];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

int register_temp(const std::string& path) {
  if (path.size() >= kTempPathBytes) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (temp_state[i].compare_exchange_strong(expected, 1)) {
      std::memcpy(temp_paths[i], path.c_str(), path.size() + 1);
      temp_state[i].store(2);
      return i;
    }
  }
  return -1;  // more than kTempSlots at once: this one is not removed on a signal
}

void unregister_temp(int slot) {
  if (slot >= 0) temp_state[slot].store(0);
}

void remove_temporaries_and_reraise(int signal) {
  const int saved_errno = errno;
  for (int i = 0; i < kTempSlots; ++i)
    if (temp_state[i].load() == 2) ::unlink(temp_paths[i]);
  errno = saved_errno;
  ::raise(signal);  // SA_RESETHAND restored the default action: it runs once this handler returns
}

// "is a directory" for anything that is not a regular file or a symbolic link; "" for those.
std::string not_a_file(mode_t mode) {
  if (S_ISREG(mode) || S_ISLNK(mode)) return "";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device";
  if (S_ISFIFO(mode)) return "is a FIFO";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

}  // namespace

AtomicPath::AtomicPath(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp." + std::to_string(::getpid())), slot_(register_temp(temp_)) {}

AtomicPath::~AtomicPath() {
  if (!done_) std::remove(temp_.c_str());
  unregister_temp(slot_);
}

void AtomicPath::commit() {
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    const std::string kind = not_a_file(st.st_mode);
    if (!kind.empty()) throw IoError(path_ + ": " + kind + "; only a regular file is replaced by " + temp_);
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0)
    throw IoError(path_ + ": cannot rename " + temp_ + " onto it");
  done_ = true;
  unregister_temp(slot_);
  slot_ = -1;
}

void AtomicPath::discard() {
  std::remove(temp_.c_str());
  done_ = true;
  unregister_temp(slot_);
  slot_ = -1;
}

void AtomicPath::remove_temporaries_on_signal() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_reraise;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    ::sigaction(signal, &action, nullptr);
  }
}

void check_output_path(const std::string& path, bool replace) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) return;  // nothing there (or unreachable: the writer says why)
  struct stat target {};
  const std::string kind = not_a_file(::stat(path.c_str(), &target) == 0 ? target.st_mode : link.st_mode);
  if (!kind.empty()) throw IoError(path + ": " + kind + "; only a regular file can be replaced by a dataset");
  if (!replace) throw IoError(path + ": already exists; --force replaces it");
}

// --- groups, datasets ---

bool exists(hid_t loc, const std::string& name) {
  Lock lock(api_mutex());
  std::size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    std::string prefix = name.substr(0, pos);
    if (!prefix.empty() && prefix != "/") {
      htri_t e = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
      if (e <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
    }
    if (pos == std::string::npos) return true;
  }
}

Group create_group(hid_t loc, const std::string& name) {
  return Group(RECMIX_H5_CHECK(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                               IoError, describe(loc) + ": group " + name));
}

Group open_group(hid_t loc, const std::string& name) {
  Lock lock(api_mutex());
  if (!exists(loc, name)) fail_data(describe(loc), "missing group " + name);
  return Group(RECMIX_H5_CHECK(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), IoError,
                               describe(loc) + ": group " + name));
}

Dataset open_dataset(hid_t loc, const std::string& name) {
  Lock lock(api_mutex());
  if (!exists(loc, name)) fail_data(describe(loc), "missing dataset " + name);
  hid_t d = H5Dopen2(loc, name.c_str(), H5P_DEFAULT);
  if (d < 0) fail_io(describe(loc), "cannot open dataset " + name);
  return Dataset(d);
}

Dataset create_dataset(hid_t loc, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                       const CreateOptions& options) {
  Lock lock(api_mutex());
  std::string where = describe(loc) + ": dataset " + name;
  std::vector<hsize_t> maxdims = dims;
  if (options.extendible) maxdims[0] = H5S_UNLIMITED;
  Dataspace space(RECMIX_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()),
                                  IoError, where));
  PropList dcpl(RECMIX_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), IoError, where));
  if (!options.chunk.empty()) {
    RECMIX_H5_CHECK(H5Pset_chunk(dcpl, static_cast<int>(options.chunk.size()), options.chunk.data()), IoError,
                    where);
    if (options.gzip_level > 0) {
      RECMIX_H5_CHECK(H5Pset_shuffle(dcpl), IoError, where);
      RECMIX_H5_CHECK(H5Pset_deflate(dcpl, static_cast<unsigned>(options.gzip_level)), IoError, where);
    }
  }
  if (!options.fill) RECMIX_H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), IoError, where);
  PropList lcpl(RECMIX_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), IoError, where));
  RECMIX_H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1), IoError, where);
  return Dataset(RECMIX_H5_CHECK(H5Dcreate2(loc, name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), IoError,
                                 where));
}

std::vector<hsize_t> shape(hid_t dataset) {
  Lock lock(api_mutex());
  Dataspace space(RECMIX_H5_CHECK(H5Dget_space(dataset), IoError, describe(dataset)));
  int rank = RECMIX_H5_CHECK(H5Sget_simple_extent_ndims(space), IoError, describe(dataset));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  RECMIX_H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr), IoError, describe(dataset));
  return dims;
}

H5T_class_t type_class(hid_t dataset, std::size_t* size) {
  Lock lock(api_mutex());
  Datatype type(RECMIX_H5_CHECK(H5Dget_type(dataset), IoError, describe(dataset)));
  if (size) *size = H5Tget_size(type);
  return H5Tget_class(type);
}

template <class T>
static void check_convertible(hid_t dataset) {
  H5T_class_t c = type_class(dataset);
  bool want_float = std::is_floating_point_v<T>;
  if ((want_float && c != H5T_FLOAT) || (!want_float && c != H5T_INTEGER))
    fail_data(describe(dataset), std::string("wrong element type (expected ") +
                                     (want_float ? "floating point" : "integer") + ")");
}

template <class T>
void write_array(hid_t loc, const std::string& name, const T* data, const std::vector<hsize_t>& dims,
                 const CreateOptions& options) {
  Lock lock(api_mutex());
  Dataset d = create_dataset(loc, name, native_type<T>(), dims, options);
  RECMIX_H5_CHECK(H5Dwrite(d, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), IoError, describe(d));
}

template <class T>
std::vector<T> read_array(hid_t loc, const std::string& name, std::vector<hsize_t>* dims) {
  Lock lock(api_mutex());
  Dataset d = open_dataset(loc, name);
  check_convertible<T>(d);
  std::vector<hsize_t> s = shape(d);
  std::size_t n = 1;
  for (hsize_t x : s) n *= x;
  std::vector<T> out(n);
  if (n > 0)
    RECMIX_H5_CHECK(H5Dread(d, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), IoError,
                    describe(d));
  if (dims) *dims = s;
  return out;
}

// File and memory dataspaces selecting rows [first, first+count) of `dataset`.
static std::pair<Dataspace, Dataspace> row_spaces(hid_t dataset, hsize_t first, hsize_t count) {
  std::vector<hsize_t> dims = shape(dataset);
  if (dims.empty() || dims.size() > 2) fail_data(describe(dataset), "expected a 1-D or 2-D dataset");
  if (first + count > dims[0])
    fail_data(describe(dataset), "rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                     ") out of range (" + std::to_string(dims[0]) + " rows)");
  Dataspace file(RECMIX_H5_CHECK(H5Dget_space(dataset), IoError, describe(dataset)));
  std::vector<hsize_t> start(dims.size(), 0), block = dims;
  start[0] = first;
  block[0] = count;
  std::vector<hsize_t> mem_dims = block;
  if (count == 0) {
    RECMIX_H5_CHECK(H5Sselect_none(file), IoError, describe(dataset));
    mem_dims[0] = 1;
    Dataspace mem(RECMIX_H5_CHECK(H5Screate_simple(static_cast<int>(mem_dims.size()), mem_dims.data(), nullptr),
                                  IoError, describe(dataset)));
    RECMIX_H5_CHECK(H5Sselect_none(mem), IoError, describe(dataset));
    return {std::move(file), std::move(mem)};
  }
  RECMIX_H5_CHECK(H5Sselect_hyperslab(file, H5S_SELECT_SET, start.data(), nullptr, block.data(), nullptr),
                  IoError, describe(dataset));
  Dataspace mem(RECMIX_H5_CHECK(H5Screate_simple(static_cast<int>(mem_dims.size()), mem_dims.data(), nullptr),
                                IoError, describe(dataset)));
  return {std::move(file), std::move(mem)};
}

template <class T>
void write_rows(hid_t dataset, hsize_t first, hsize_t count, const T* data, hid_t transfer) {
  Lock lock(api_mutex());
  // Named handles, not a structured binding: clang before 16 cannot capture one in the check's lambda.
  auto spaces = row_spaces(dataset, first, count);
  const hid_t file = spaces.first, mem = spaces.second;
  RECMIX_H5_CHECK(H5Dwrite(dataset, native_type<T>(), mem, file, transfer, data), IoError, describe(dataset));
}

template <class T>
void read_rows(hid_t dataset, hsize_t first, hsize_t count, T* data, hid_t transfer) {
  Lock lock(api_mutex());
  check_convertible<T>(dataset);
  auto spaces = row_spaces(dataset, first, count);
  const hid_t file = spaces.first, mem = spaces.second;
  T dummy{};
  // A failed read (a damaged compressed chunk, a truncated file) names the file, dataset and rows.
  RECMIX_H5_CHECK(H5Dread(dataset, native_type<T>(), mem, file, transfer, count ? data : &dummy), IoError,
                  describe(dataset) + " rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                      ") (a damaged or truncated file?)");
}

void extend_rows(hid_t dataset, hsize_t rows) {
  Lock lock(api_mutex());
  std::vector<hsize_t> dims = shape(dataset);
  dims[0] = rows;
  RECMIX_H5_CHECK(H5Dset_extent(dataset, dims.data()), IoError, describe(dataset));
}

#define RECMIX_H5_INSTANTIATE(T)                                                                         \
  template void write_array<T>(hid_t, const std::string&, const T*, const std::vector<hsize_t>&,         \
                               const CreateOptions&);                                                    \
  template std::vector<T> read_array<T>(hid_t, const std::string&, std::vector<hsize_t>*);              \
  template void write_rows<T>(hid_t, hsize_t, hsize_t, const T*, hid_t);                                \
  template void read_rows<T>(hid_t, hsize_t, hsize_t, T*, hid_t);
RECMIX_H5_INSTANTIATE(float)
RECMIX_H5_INSTANTIATE(double)
RECMIX_H5_INSTANTIATE(std::int32_t)
RECMIX_H5_INSTANTIATE(std::int64_t)
RECMIX_H5_INSTANTIATE(std::uint8_t)
RECMIX_H5_INSTANTIATE(std::uint64_t)
#undef RECMIX_H5_INSTANTIATE

// --- attributes ---

bool has_attribute(hid_t obj, const std::string& name) {
  Lock lock(api_mutex());
  htri_t e = H5Aexists(obj, name.c_str());
  H5Eclear2(H5E_DEFAULT);
  return e > 0;
}

static void write_attribute_raw(hid_t obj, const std::string& name, hid_t type, hid_t space, const void* data) {
  std::string where = describe(obj) + ": attribute " + name;
  if (has_attribute(obj, name)) RECMIX_H5_CHECK(H5Adelete(obj, name.c_str()), IoError, where);
  Attribute a(RECMIX_H5_CHECK(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), IoError, where));
  RECMIX_H5_CHECK(H5Awrite(a, type, data), IoError, where);
}

void write_attribute(hid_t obj, const std::string& name, const std::string& value) {
  Lock lock(api_mutex());
  Datatype type(RECMIX_H5_CHECK(H5Tcopy(H5T_C_S1), IoError, name));
  H5Tset_size(type, std::max<std::size_t>(1, value.size()));
  H5Tset_strpad(type, H5T_STR_NULLPAD);
  Dataspace space(RECMIX_H5_CHECK(H5Screate(H5S_SCALAR), IoError, name));
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  write_attribute_raw(obj, name, type, space, padded.data());
}

template <class T>
static void write_vector_attribute(hid_t obj, const std::string& name, const std::vector<T>& value) {
  Lock lock(api_mutex());
  hsize_t n = value.size();
  Dataspace space(RECMIX_H5_CHECK(n ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_NULL), IoError, name));
  T dummy{};
  write_attribute_raw(obj, name, native_type<T>(), space, n ? value.data() : &dummy);
}

void write_attribute(hid_t obj, const std::string& name, std::int64_t value) {
  Lock lock(api_mutex());
  Dataspace space(RECMIX_H5_CHECK(H5Screate(H5S_SCALAR), IoError, name));
  write_attribute_raw(obj, name, H5T_NATIVE_INT64, space, &value);
}

void write_attribute(hid_t obj, const std::string& name, double value) {
  Lock lock(api_mutex());
  Dataspace space(RECMIX_H5_CHECK(H5Screate(H5S_SCALAR), IoError, name));
  write_attribute_raw(obj, name, H5T_NATIVE_DOUBLE, space, &value);
}

void write_attribute(hid_t obj, const std::string& name, const std::vector<std::int64_t>& value) {
  write_vector_attribute(obj, name, value);
}
void write_attribute(hid_t obj, const std::string& name, const std::vector<double>& value) {
  write_vector_attribute(obj, name, value);
}

static Attribute open_attribute(hid_t obj, const std::string& name) {
  if (!has_attribute(obj, name)) fail_data(describe(obj), "missing attribute " + name);
  return Attribute(RECMIX_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), IoError,
                                   describe(obj) + ": attribute " + name));
}

std::string read_string_attribute(hid_t obj, const std::string& name) {
  Lock lock(api_mutex());
  Attribute a = open_attribute(obj, name);
  std::string where = describe(obj) + ": attribute " + name;
  Datatype type(RECMIX_H5_CHECK(H5Aget_type(a), IoError, where));
  if (H5Tget_class(type) != H5T_STRING) fail_data(where, "not a string");
  {
    // One string, scalar or [1]: the reads below have room for one.
    Dataspace space(RECMIX_H5_CHECK(H5Aget_space(a), IoError, where));
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    if (n != 1) fail_data(where, "holds " + std::to_string(n) + " strings, not one");
  }
  if (H5Tis_variable_str(type) > 0) {  // h5py's default: variable length, UTF-8
    Datatype mem(RECMIX_H5_CHECK(H5Tcopy(H5T_C_S1), IoError, where));
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    char* s = nullptr;
    RECMIX_H5_CHECK(H5Aread(a, mem, &s), IoError, where);
    std::string out = s ? s : "";
    Dataspace space(H5Aget_space(a));
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, &s);
    return out;
  }
  std::size_t n = H5Tget_size(type);
  std::string out(n, '\0');
  RECMIX_H5_CHECK(H5Aread(a, type, out.data()), IoError, where);
  out.resize(std::strlen(out.c_str()));
  return out;
}

template <class T>
static std::vector<T> read_vector_attribute(hid_t obj, const std::string& name) {
  Lock lock(api_mutex());
  Attribute a = open_attribute(obj, name);
  std::string where = describe(obj) + ": attribute " + name;
  Datatype type(RECMIX_H5_CHECK(H5Aget_type(a), IoError, where));
  H5T_class_t c = H5Tget_class(type);
  if (c != H5T_INTEGER && c != H5T_FLOAT) fail_data(where, "not numeric");
  // Integers of any width and signedness convert (HDF5 converts them); a float where an integer
  // is documented does not.
  if (std::is_integral_v<T> && c != H5T_INTEGER) fail_data(where, "must be an integer (found a floating-point value)");
  if (std::is_integral_v<T> && H5Tget_sign(type) == H5T_SGN_NONE && H5Tget_size(type) >= sizeof(T)) {
    // Unsigned values as wide as T may not fit: read them as such and check.
    Dataspace uspace(RECMIX_H5_CHECK(H5Aget_space(a), IoError, where));
    std::vector<std::uint64_t> u(static_cast<std::size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(uspace), 0)));
    if (!u.empty()) RECMIX_H5_CHECK(H5Aread(a, H5T_NATIVE_UINT64, u.data()), IoError, where);
    std::vector<T> out;
    for (auto v : u) {
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) fail_data(where, "value " + std::to_string(v) + " is too large");
      out.push_back(static_cast<T>(v));
    }
    return out;
  }
  Dataspace space(RECMIX_H5_CHECK(H5Aget_space(a), IoError, where));
  hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<T> out(static_cast<std::size_t>(std::max<hssize_t>(n, 0)));
  if (!out.empty()) RECMIX_H5_CHECK(H5Aread(a, native_type<T>(), out.data()), IoError, where);
  return out;
}

std::int64_t read_int_attribute(hid_t obj, const std::string& name) {
  auto v = read_vector_attribute<std::int64_t>(obj, name);
  if (v.size() != 1) fail_data(describe(obj), "attribute " + name + " is not a single value");
  return v[0];
}
double read_double_attribute(hid_t obj, const std::string& name) {
  auto v = read_vector_attribute<double>(obj, name);
  if (v.size() != 1) fail_data(describe(obj), "attribute " + name + " is not a single value");
  return v[0];
}
std::vector<std::int64_t> read_int_vector_attribute(hid_t obj, const std::string& name) {
  return read_vector_attribute<std::int64_t>(obj, name);
}
std::vector<double> read_double_vector_attribute(hid_t obj, const std::string& name) {
  return read_vector_attribute<double>(obj, name);
}

std::vector<std::string> attribute_names(hid_t obj) {
  Lock lock(api_mutex());
  std::vector<std::string> names;
  H5Aiterate2(
      obj, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(name);
        return 0;
      },
      &names);
  return names;
}

}  // namespace recmix::h5
