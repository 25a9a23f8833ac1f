// Groups and datasets: lookup, creation, whole arrays and row ranges (hyperslabs), with the
// element types the format uses instantiated here.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "data/h5.hpp"

namespace recmix::h5 {

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

}  // namespace recmix::h5
