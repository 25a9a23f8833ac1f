#pragma once
// Small RAII layer over the HDF5 C API, shared by the dataset format and the checkpoints.
// Handles close themselves; RECMIX_H5_CHECK turns a negative status into a recmix error that
// names the file and object; helpers read and write 1-D/2-D arrays, row ranges and attributes.
//
// The Debian HDF5 build is not thread-safe: every HDF5 call in the process must hold
// h5::api_mutex(). The helpers and handle destructors here take it themselves; code that calls
// the C API directly takes an h5::Lock around it (the reader's prefetch thread does).
#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace recmix::h5 {

std::recursive_mutex& api_mutex();
using Lock = std::lock_guard<std::recursive_mutex>;

// "file.h5:/sparse/3" for any HDF5 object, file or attribute id (best effort, never throws).
std::string describe(hid_t id);
// The innermost message on HDF5's error stack ("" when empty); HDF5's own printing is turned off.
std::string last_error_message();
// Throws ErrorType("<where>: <what> failed (<hdf5 message>)").
[[noreturn]] void fail_io(const std::string& where, const std::string& what);
[[noreturn]] void fail_data(const std::string& where, const std::string& what);

}  // namespace recmix::h5

// Evaluates an HDF5 call; a negative hid_t/herr_t throws ErrorType naming `where` (a string).
#define RECMIX_H5_CHECK(expr, ErrorType, where)                                                  \
  ([&]() {                                                                                       \
    ::recmix::h5::Lock recmix_h5_lock_(::recmix::h5::api_mutex());                              \
    auto recmix_h5_status_ = (expr);                                                             \
    if (recmix_h5_status_ < 0)                                                                   \
      throw ErrorType(std::string(where) + ": " #expr " failed" +                                \
                      [] {                                                                       \
                        std::string m = ::recmix::h5::last_error_message();                      \
                        return m.empty() ? std::string() : " (" + m + ")";                       \
                      }());                                                                      \
    return recmix_h5_status_;                                                                    \
  }())

namespace recmix::h5 {

// Owns one HDF5 identifier of any kind (file, group, dataset, dataspace, attribute, type,
// property list) and closes it with the matching H5?close.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Handle() { reset(); }
  void reset() noexcept;
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: handles pass straight to the C API
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};
using File = Handle;
using Group = Handle;
using Dataset = Handle;
using Dataspace = Handle;
using Attribute = Handle;
using PropList = Handle;
using Datatype = Handle;

// The native HDF5 type of a C++ element type (float, double, int32, int64, uint8, uint64).
template <class T>
hid_t native_type();

// --- files ---
// Serial (sec2) access. create_file truncates an existing file.
File create_file(const std::string& path);
File open_file(const std::string& path, bool writable = false);
// MPI-IO access on `mpi_comm` (an MPI_Comm* passed as void* so that this header stays MPI-free):
// collective over the communicator's ranks.
File create_file_mpio(const std::string& path, void* mpi_comm);
File open_file_mpio(const std::string& path, void* mpi_comm, bool writable = false);
// A dataset-transfer property list for collective (true) or independent MPI-IO.
PropList transfer_mpio(bool collective);

// Writes to `path + ".tmp.<pid>"` and renames onto `path` in commit(); the destructor removes
// the temporary when commit() was never reached, so a failure leaves nothing half-written.
// commit() never replaces anything but a regular file (or a symbolic link): a device node, a
// directory or a FIFO at `path` is an IoError naming it.
class AtomicPath {
 public:
  explicit AtomicPath(std::string path);
  AtomicPath(const AtomicPath&) = delete;
  AtomicPath& operator=(const AtomicPath&) = delete;
  ~AtomicPath();
  const std::string& temp() const { return temp_; }
  const std::string& path() const { return path_; }
  void commit();   // rename temp -> path (throws IoError)
  void discard();  // remove temp now

  // Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the temporaries of every
  // AtomicPath not yet committed (up to 8 at a time) and then re-raise the signal, so that an
  // interrupted command leaves no `.tmp.<pid>` behind. A signal that is ignored, or already has a
  // handler, keeps it. The handler only calls unlink() and raise(), on paths in static buffers.
  static void remove_temporaries_on_signal();

 private:
  std::string path_, temp_;
  int slot_ = -1;  // where temp_ is registered for the signal handler; -1: not registered
  bool done_ = false;
};

// Refuses an output path that a new file should not be written to: anything that is not a regular
// file (a device node, a directory, a FIFO), and an existing file unless `replace`. IoError naming
// the path ("... already exists; --force replaces it").
void check_output_path(const std::string& path, bool replace);

// --- groups, datasets ---
bool exists(hid_t loc, const std::string& name);  // every path component checked
Group create_group(hid_t loc, const std::string& name);
Group open_group(hid_t loc, const std::string& name);
Dataset open_dataset(hid_t loc, const std::string& name);  // DataError naming it when missing

struct CreateOptions {
  std::vector<hsize_t> chunk;  // empty: contiguous (fixed size only)
  int gzip_level = 0;          // 0: no compression
  bool extendible = false;     // first dimension unlimited (needs chunk)
  // false: space is never filled with the fill value (for datasets whose every element is
  // written; parallel HDF5 allocates space at creation and would otherwise fill it there)
  bool fill = true;
};
Dataset create_dataset(hid_t loc, const std::string& name, hid_t type,
                       const std::vector<hsize_t>& dims, const CreateOptions& options = {});

std::vector<hsize_t> shape(hid_t dataset);
// HDF5 class and size of a dataset's element type (e.g. H5T_FLOAT, 4).
H5T_class_t type_class(hid_t dataset, std::size_t* size = nullptr);

// Whole-array write/read of a 1-D or 2-D dataset. read_array checks that the stored type is
// convertible (integer <-> integer, float <-> float) and throws DataError otherwise.
template <class T>
void write_array(hid_t loc, const std::string& name, const T* data, const std::vector<hsize_t>& dims,
                 const CreateOptions& options = {});
template <class T>
std::vector<T> read_array(hid_t loc, const std::string& name, std::vector<hsize_t>* dims = nullptr);

// Row range [first, first+count) of a 1-D or 2-D dataset (all columns). `transfer` may be a
// collective MPI-IO property list; H5P_DEFAULT otherwise. count may be 0 (an empty selection,
// still a valid participant in a collective call).
template <class T>
void write_rows(hid_t dataset, hsize_t first, hsize_t count, const T* data, hid_t transfer = H5P_DEFAULT);
template <class T>
void read_rows(hid_t dataset, hsize_t first, hsize_t count, T* data, hid_t transfer = H5P_DEFAULT);
// Grows the first dimension of an extendible dataset to `rows`.
void extend_rows(hid_t dataset, hsize_t rows);

// --- attributes (on a file, group or dataset) ---
bool has_attribute(hid_t obj, const std::string& name);
void write_attribute(hid_t obj, const std::string& name, const std::string& value);
void write_attribute(hid_t obj, const std::string& name, std::int64_t value);
void write_attribute(hid_t obj, const std::string& name, double value);
void write_attribute(hid_t obj, const std::string& name, const std::vector<std::int64_t>& value);
void write_attribute(hid_t obj, const std::string& name, const std::vector<double>& value);
std::string read_string_attribute(hid_t obj, const std::string& name);
std::int64_t read_int_attribute(hid_t obj, const std::string& name);
double read_double_attribute(hid_t obj, const std::string& name);
std::vector<std::int64_t> read_int_vector_attribute(hid_t obj, const std::string& name);
std::vector<double> read_double_vector_attribute(hid_t obj, const std::string& name);
std::vector<std::string> attribute_names(hid_t obj);

}  // namespace recmix::h5
