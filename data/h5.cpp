// The HDF5 helpers' base: the API mutex, errors as exceptions, handles, native types and opening
// or creating files (serial and MPI-IO). Datasets (h5_datasets.cpp), attributes
// (h5_attributes.cpp) and the temporary-then-rename writes (h5_atomic_path.cpp) have their own.
#include "data/h5.hpp"

#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
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

}  // namespace recmix::h5
