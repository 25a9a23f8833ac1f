#include "fuzz/h5_edits.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace recmix::fuzz {

std::uint64_t ByteReader::bytes(int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t{byte()} << (8 * i);
  return v;
}

std::size_t ByteReader::below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(bytes(2)) % n; }

std::string ByteReader::text(std::size_t max_length) {
  std::string s(std::min<std::size_t>(byte(), max_length), '\0');
  for (char& c : s) c = static_cast<char>(byte());
  return s;
}

std::string EditLog::text() const {
  std::string s;
  for (auto& l : lines) s += l + "\n";
  return s;
}

namespace {

// Closes an HDF5 handle of any kind at scope exit.
struct Handle {
  hid_t id;
  explicit Handle(hid_t h) : id(h) {}
  ~Handle() {
    if (id >= 0) H5Idec_ref(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id; }
  bool ok() const { return id >= 0; }
};

struct Objects {
  std::vector<std::string> groups{"/"};
  std::vector<std::string> datasets;
  std::vector<std::pair<std::string, std::string>> attributes;  // (object, name)
};

herr_t visit_object(hid_t, const char* name, const H5O_info_t* info, void* out) {
  auto& objects = *static_cast<Objects*>(out);
  if (std::strcmp(name, ".") == 0) return 0;
  const std::string path = std::string("/") + name;
  if (info->type == H5O_TYPE_GROUP) objects.groups.push_back(path);
  if (info->type == H5O_TYPE_DATASET) objects.datasets.push_back(path);
  return 0;
}

herr_t visit_attribute(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

Objects list_objects(hid_t file) {
  Objects objects;
  H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit_object, &objects, H5O_INFO_BASIC);
  std::vector<std::string> all = objects.groups;
  all.insert(all.end(), objects.datasets.begin(), objects.datasets.end());
  for (auto& o : all) {
    std::vector<std::string> names;
    hsize_t index = 0;
    H5Aiterate_by_name(file, o.c_str(), H5_INDEX_NAME, H5_ITER_NATIVE, &index, visit_attribute, &names, H5P_DEFAULT);
    for (auto& n : names) objects.attributes.emplace_back(o, n);
  }
  return objects;
}

// The types an edit writes: integers of every width and signedness, floats, strings.
enum class Kind { i8, u8, i16, u16, i32, u32, i64, u64, f32, f64, fixed_ascii, fixed_utf8, vlen_utf8, count };
constexpr const char* kKindNames[] = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                      "uint64", "float32", "float64", "fixed ascii string",
                                      "fixed utf-8 string", "variable utf-8 string"};

bool is_string(Kind k) { return k >= Kind::fixed_ascii; }

hid_t numeric_type(Kind k) {
  switch (k) {
    case Kind::i8: return H5T_STD_I8LE;
    case Kind::u8: return H5T_STD_U8LE;
    case Kind::i16: return H5T_STD_I16LE;
    case Kind::u16: return H5T_STD_U16LE;
    case Kind::i32: return H5T_STD_I32LE;
    case Kind::u32: return H5T_STD_U32LE;
    case Kind::i64: return H5T_STD_I64LE;
    case Kind::u64: return H5T_STD_U64LE;
    case Kind::f32: return H5T_IEEE_F32LE;
    default: return H5T_IEEE_F64LE;
  }
}

// A string type: fixed length (n bytes, null-padded) or variable length.
hid_t string_type(Kind k, std::size_t n) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, k == Kind::vlen_utf8 ? H5T_VARIABLE : std::max<std::size_t>(n, 1));
  H5Tset_cset(t, k == Kind::fixed_ascii ? H5T_CSET_ASCII : H5T_CSET_UTF8);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  return t;
}

// Values that break checks: boundaries of the integer widths, non-finite floats, fractions.
double special_value(ByteReader& in) {
  constexpr double kValues[] = {0, -1, 1, 2, 3, 0.5, -0.5, 1e30, -1e30, 127, 255, 32768, 2147483648.0,
                                4294967296.0, 9.2233720368547758e18, 1.8446744073709552e19,
                                std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(), 4096, 1e6};
  return kValues[in.below(std::size(kValues))];
}

// The first values of a numeric object (an attribute or a dataset), read as doubles.
std::vector<double> read_numbers(hid_t obj, bool attribute, std::size_t limit) {
  Handle type(attribute ? H5Aget_type(obj) : H5Dget_type(obj));
  const H5T_class_t c = type.ok() ? H5Tget_class(type) : H5T_NO_CLASS;
  if (c != H5T_INTEGER && c != H5T_FLOAT) return {};
  Handle space(attribute ? H5Aget_space(obj) : H5Dget_space(obj));
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n <= 0 || static_cast<std::size_t>(n) > limit) return {};
  std::vector<double> v(static_cast<std::size_t>(n));
  const herr_t e = attribute ? H5Aread(obj, H5T_NATIVE_DOUBLE, v.data())
                             : H5Dread(obj, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  return e < 0 ? std::vector<double>{} : v;
}

// A new value for an object whose old values were `old`: the old ones (changed in one place or
// not at all), a run of one special value, or numbers from the input.
std::vector<double> new_numbers(ByteReader& in, const std::vector<double>& old, std::size_t n, std::string& how) {
  std::vector<double> v(n, 0.0);
  switch (in.byte() % 4) {
    case 0:
      for (std::size_t i = 0; i < n; ++i) v[i] = i < old.size() ? old[i] : 0.0;
      how = "old values";
      if (n > 0 && (in.byte() & 1)) {
        const std::size_t i = in.below(n);
        v[i] = (in.byte() & 1) ? v[i] + 1 : special_value(in);
        how += " but one";
      }
      break;
    case 1:
      std::fill(v.begin(), v.end(), special_value(in));
      how = "one special value";
      break;
    case 2:
      for (auto& x : v) x = static_cast<double>(static_cast<std::int64_t>(in.bytes(2)) - 32768);
      how = "small integers";
      break;
    default:
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
      how = "0, 1, 2, ...";
  }
  return v;
}

// Old strings (or "" where the object held none), a known word, or text from the input.
std::string new_text(ByteReader& in, const std::string& old) {
  constexpr const char* kWords[] = {"recmix-dataset", "recmix-checkpoint", "recmix-dataset ", "RECMIX-DATASET", ""};
  switch (in.byte() % 3) {
    case 0: return old;
    case 1: return kWords[in.below(std::size(kWords))];
    default: return in.text(40);
  }
}

std::string read_text(hid_t attribute) {
  Handle type(H5Aget_type(attribute));
  if (!type.ok() || H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) > 0) return {};
  const std::size_t n = H5Tget_size(type);
  Handle space(H5Aget_space(attribute));
  if (n == 0 || n > 4096 || H5Sget_simple_extent_npoints(space) != 1) return {};
  std::string s(n, '\0');
  Handle mem(H5Tcopy(type));
  if (H5Aread(attribute, mem, s.data()) < 0) return {};
  return s.substr(0, s.find('\0'));
}

// Writes an attribute `name` on `object` of a kind and shape read from the input.
std::string write_attribute(hid_t file, const std::string& object, const std::string& name, ByteReader& in,
                            const std::vector<double>& old_numbers, const std::string& old_text) {
  const auto kind = static_cast<Kind>(in.below(static_cast<std::size_t>(Kind::count)));
  const bool scalar = in.byte() % 3 != 0;
  const std::size_t n = scalar ? 1 : in.below(6);
  const hsize_t dims[1] = {n};
  Handle space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, nullptr));
  if (H5Aexists_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT);
  std::string how;
  if (is_string(kind)) {
    const std::string s = new_text(in, old_text);
    Handle type(string_type(kind, s.size()));
    Handle a(H5Acreate_by_name(file, object.c_str(), name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!a.ok()) return "(not created)";
    std::vector<const char*> ptrs(n, s.c_str());
    std::vector<char> fixed(n * std::max<std::size_t>(s.size(), 1), '\0');
    for (std::size_t i = 0; i < n; ++i) std::memcpy(fixed.data() + i * std::max<std::size_t>(s.size(), 1), s.data(), s.size());
    H5Awrite(a, type, kind == Kind::vlen_utf8 ? static_cast<const void*>(ptrs.data()) : fixed.data());
    how = "\"" + s + "\"";
  } else {
    const std::vector<double> v = new_numbers(in, old_numbers, n, how);
    Handle a(H5Acreate_by_name(file, object.c_str(), name.c_str(), numeric_type(kind), space, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT));
    if (!a.ok()) return "(not created)";
    if (n > 0) H5Awrite(a, H5T_NATIVE_DOUBLE, v.data());
  }
  return std::string(kKindNames[static_cast<int>(kind)]) + (scalar ? " scalar" : " [" + std::to_string(n) + "]") +
         " = " + how;
}

// Writes dataset `path` of a numeric kind with the given shape (every element from the input's
// choice of values); chunked and compressed at the input's choice.
std::string write_dataset(hid_t file, const std::string& path, ByteReader& in, std::vector<hsize_t> dims,
                          const std::vector<double>& old_numbers) {
  const auto kind = static_cast<Kind>(in.below(static_cast<std::size_t>(Kind::f64) + 1));
  hsize_t n = 1;
  for (auto d : dims) n *= d;
  if (n > (1u << 16)) return "(too large)";
  std::string how;
  const std::vector<double> v = new_numbers(in, old_numbers, static_cast<std::size_t>(n), how);
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle create(H5Pcreate(H5P_DATASET_CREATE));
  const int layout = in.byte() % 3;
  if (layout > 0 && n > 0 && !dims.empty()) {
    std::vector<hsize_t> chunk(dims);
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], 1 + in.below(16)));
    H5Pset_chunk(create, static_cast<int>(chunk.size()), chunk.data());
    if (layout == 2) H5Pset_deflate(create, 1);
  }
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle d(H5Dcreate2(file, path.c_str(), numeric_type(kind), space, lcpl, create, H5P_DEFAULT));
  if (!d.ok()) return "(not created)";
  if (n > 0) H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  std::string shape;
  for (auto x : dims) shape += (shape.empty() ? "" : ", ") + std::to_string(x);
  return std::string(kKindNames[static_cast<int>(kind)]) + " [" + shape + "]" + (layout ? " chunked" : "") +
         (layout == 2 ? " gzip" : "") + " = " + how;
}

std::vector<hsize_t> dataset_dims(hid_t file, const std::string& path) {
  Handle d(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
  if (!d.ok()) return {};
  Handle space(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims;
}

// A shape near `dims`: the same, one dimension off by one or zeroed, transposed, a dimension
// dropped or added.
std::vector<hsize_t> new_dims(ByteReader& in, std::vector<hsize_t> dims) {
  switch (in.byte() % 6) {
    case 0: break;
    case 1:
      if (!dims.empty()) {
        auto& d = dims[in.below(dims.size())];
        d = (in.byte() & 1) ? d + 1 : (d > 0 ? d - 1 : 0);
      }
      break;
    case 2:
      if (!dims.empty()) dims[in.below(dims.size())] = 0;
      break;
    case 3: std::reverse(dims.begin(), dims.end()); break;
    case 4:
      if (!dims.empty()) dims.pop_back();
      break;
    default: dims.push_back(1 + in.below(3));
  }
  return dims;
}

// Overwrites a few elements of a dataset, in its own type, with special values.
std::string overwrite_elements(hid_t file, const std::string& path, ByteReader& in) {
  Handle d(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
  if (!d.ok()) return "(not opened)";
  Handle space(H5Dget_space(d));
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (n <= 0 || rank <= 0) return "(empty)";
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const int count = 1 + static_cast<int>(in.below(4));
  std::string what;
  for (int k = 0; k < count; ++k) {
    hsize_t flat = in.below(static_cast<std::size_t>(n)), coord[8] = {};
    for (int i = rank - 1; i >= 0; --i) {
      coord[i] = flat % dims[static_cast<std::size_t>(i)];
      flat /= dims[static_cast<std::size_t>(i)];
    }
    if (rank > 8) return "(rank above 8)";
    H5Sselect_elements(space, H5S_SELECT_SET, 1, coord);
    const hsize_t one = 1;
    Handle mem(H5Screate_simple(1, &one, nullptr));
    const double v = special_value(in);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, mem, space, H5P_DEFAULT, &v);
    what += (what.empty() ? "" : ", ") + std::to_string(v);
  }
  return what;
}

constexpr const char* kNames[] = {"format", "format_version", "num_dense", "num_tables", "table_rows", "multi_hot",
                                  "rows", "max_bag", "version", "step", "data_epoch", "data_batch", "seed",
                                  "world_size", "num_dense", "job_spec", "checksum_block_rows", "step_count"};
constexpr const char* kPaths[] = {"/dense", "/labels", "/sparse", "/sparse/0/indices", "/sparse/0/offsets",
                                  "/access_counts/0", "/extra", "/embedding/0/weights", "/dense/0/weight",
                                  "/checksums/extra"};

}  // namespace

EditLog edit_h5_file(const std::string& path, ByteReader& in, int max_edits) {
  EditLog log;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!file.ok()) {
    log.lines.push_back("(the base file did not open)");
    return log;
  }
  for (int e = 0; e < max_edits && !in.empty(); ++e) {
    const Objects objects = list_objects(file);
    const int op = in.byte() % 8;
    if (op == 0 && !objects.attributes.empty()) {  // delete an attribute
      auto& [o, a] = objects.attributes[in.below(objects.attributes.size())];
      H5Adelete_by_name(file, o.c_str(), a.c_str(), H5P_DEFAULT);
      log.lines.push_back("delete attribute " + o + "@" + a);
    } else if (op == 1 && !objects.attributes.empty()) {  // rewrite an attribute
      auto [o, a] = objects.attributes[in.below(objects.attributes.size())];
      std::vector<double> numbers;
      std::string text;
      {
        Handle old(H5Aopen_by_name(file, o.c_str(), a.c_str(), H5P_DEFAULT, H5P_DEFAULT));
        if (old.ok()) {
          numbers = read_numbers(old, true, 1 << 12);
          text = read_text(old);
        }
      }
      log.lines.push_back("rewrite attribute " + o + "@" + a + ": " + write_attribute(file, o, a, in, numbers, text));
    } else if (op == 2) {  // add an attribute to any object
      std::vector<std::string> all = objects.groups;
      all.insert(all.end(), objects.datasets.begin(), objects.datasets.end());
      const std::string& o = all[in.below(all.size())];
      const std::string a = (in.byte() & 3) ? kNames[in.below(std::size(kNames))] : in.text(12);
      if (a.empty() || a.find('\0') != std::string::npos) continue;
      log.lines.push_back("add attribute " + o + "@" + a + ": " + write_attribute(file, o, a, in, {}, {}));
    } else if (op == 3 && objects.groups.size() + objects.datasets.size() > 1) {  // delete an object
      std::vector<std::string> all(objects.groups.begin() + 1, objects.groups.end());
      all.insert(all.end(), objects.datasets.begin(), objects.datasets.end());
      const std::string& o = all[in.below(all.size())];
      H5Ldelete(file, o.c_str(), H5P_DEFAULT);
      log.lines.push_back("delete " + o);
    } else if (op == 4 && !objects.datasets.empty()) {  // replace a dataset
      const std::string o = objects.datasets[in.below(objects.datasets.size())];
      const std::vector<hsize_t> dims = dataset_dims(file, o);
      std::vector<double> old;
      {
        Handle d(H5Dopen2(file, o.c_str(), H5P_DEFAULT));
        if (d.ok()) old = read_numbers(d, false, 1 << 16);
      }
      const std::vector<hsize_t> shape = new_dims(in, dims);
      H5Ldelete(file, o.c_str(), H5P_DEFAULT);
      log.lines.push_back("replace " + o + ": " + write_dataset(file, o, in, shape, old));
    } else if (op == 5 && !objects.datasets.empty()) {  // overwrite elements in place
      const std::string& o = objects.datasets[in.below(objects.datasets.size())];
      log.lines.push_back("overwrite elements of " + o + ": " + overwrite_elements(file, o, in));
    } else if (op == 6) {  // add a dataset
      const std::string o = kPaths[in.below(std::size(kPaths))];
      if (H5Lexists(file, o.c_str(), H5P_DEFAULT) > 0) continue;
      std::vector<hsize_t> dims(1 + in.below(2));
      for (auto& d : dims) d = in.below(20);
      log.lines.push_back("add " + o + ": " + write_dataset(file, o, in, dims, {}));
    } else if (op == 7 && objects.datasets.size() > 1) {  // move a dataset onto another's name
      const std::string& from = objects.datasets[in.below(objects.datasets.size())];
      const std::string& to = objects.datasets[in.below(objects.datasets.size())];
      if (from == to) continue;
      H5Ldelete(file, to.c_str(), H5P_DEFAULT);
      H5Lmove(file, from.c_str(), file, to.c_str(), H5P_DEFAULT, H5P_DEFAULT);
      log.lines.push_back("move " + from + " onto " + to);
    }
  }
  return log;
}

std::vector<DatasetShape> dataset_shapes(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  std::vector<DatasetShape> shapes;
  if (!file.ok()) return shapes;
  for (auto& o : list_objects(file).datasets) {
    Handle d(H5Dopen2(file, o.c_str(), H5P_DEFAULT));
    Handle type(H5Dget_type(d));
    DatasetShape s{o, {}, static_cast<int>(H5Tget_class(type))};
    for (auto x : dataset_dims(file, o)) s.dims.push_back(x);
    shapes.push_back(std::move(s));
  }
  return shapes;
}

}  // namespace recmix::fuzz
