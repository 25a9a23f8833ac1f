// Attributes: strings, numbers and numeric vectors, written and read with the checks the format
// page asks for (a float where an integer is documented, an unsigned value too large).
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "data/h5.hpp"

namespace recmix::h5 {

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
