// Structured fuzz target for the dataset checks (data/format.hpp, data/reader.hpp): the input's
// first byte picks a valid base file (one-hot or multi-hot, written by the generator at start),
// the rest is a list of edits made to a copy of it through the HDF5 API (fuzz/h5_edits.hpp), and
// the copy is inspected as `recmix data inspect` does (data::inspect_file). An independent check
// of docs/dataset-format.md (below, written from the page, not from the reader) then judges the
// verdict: a file inspect_file calls valid must be valid by the page, and a file valid by the
// page must not be refused. Findings: a disagreement, an exception other than recmix::Error, a
// crash or a sanitizer report. Every edit list gives a well-formed HDF5 file, so unlike
// fuzz_dataset (raw bytes) this target never trips over HDF5's own handling of damaged files
// and runs time-boxed in CI.
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/inspect.hpp"
#include "data/synth.hpp"
#include "fuzz/fuzz_files.hpp"
#include "fuzz/h5_edits.hpp"

namespace {

std::string base_files[2];  // one-hot, multi-hot

// ---- docs/dataset-format.md, read with plain HDF5 calls ----

// Whether every component of an absolute path exists (H5Lexists fails on a missing parent).
bool exists(hid_t file, const std::string& path) {
  for (std::size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    if (H5Lexists(file, path.substr(0, end).c_str(), H5P_DEFAULT) <= 0) return false;
    if (end == std::string::npos) return true;
  }
}

struct Reader {
  hid_t file;
  std::string problem;
  bool fail(const std::string& what) {
    if (problem.empty()) problem = what;
    return false;
  }
  // An attribute's values, when it exists and its class is `cls`.
  bool numbers(const char* name, H5T_class_t cls, std::vector<double>& out) {
    if (H5Aexists(file, name) <= 0) return fail(std::string("no attribute ") + name);
    const hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    const hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    const bool right = H5Tget_class(t) == cls;
    const hssize_t n = H5Sget_simple_extent_npoints(s);
    out.assign(n > 0 ? static_cast<std::size_t>(n) : 0, 0.0);
    const bool read = right && (out.empty() || H5Aread(a, H5T_NATIVE_DOUBLE, out.data()) >= 0);
    H5Tclose(t), H5Sclose(s), H5Aclose(a);
    return read || fail(std::string("attribute ") + name + " of the wrong class");
  }
  // An integer attribute holding exactly one value (scalar or [1]).
  bool integer(const char* name, double& v) {
    std::vector<double> x;
    if (!numbers(name, H5T_INTEGER, x)) return false;
    if (x.size() != 1) return fail(std::string("attribute ") + name + " is not one value");
    v = x[0];
    return true;
  }
  bool text(const char* name, std::string& v) {
    if (H5Aexists(file, name) <= 0) return fail(std::string("no attribute ") + name);
    const hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    const hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    bool ok = H5Tget_class(t) == H5T_STRING && H5Sget_simple_extent_npoints(s) == 1;
    if (ok && H5Tis_variable_str(t) > 0) {
      char* p = nullptr;
      ok = H5Aread(a, t, &p) >= 0 && p != nullptr;
      if (ok) v = p;
      if (p) H5free_memory(p);
    } else if (ok) {
      std::string buf(H5Tget_size(t), '\0');
      ok = H5Aread(a, t, buf.data()) >= 0;
      v = buf.substr(0, buf.find('\0'));
    }
    H5Tclose(t), H5Sclose(s), H5Aclose(a);
    return ok || fail(std::string("attribute ") + name + " is not one string");
  }
  // A dataset's values, when it exists with class `cls`, a size the page allows and exactly the
  // shape `dims`.
  bool dataset(const std::string& path, H5T_class_t cls, const std::vector<hsize_t>& dims, std::vector<double>& out,
               bool any_width = false) {
    if (!exists(file, path))
      return fail("no dataset " + path);
    H5O_info_t info;
    if (H5Oget_info_by_name2(file, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 || info.type != H5O_TYPE_DATASET)
      return fail(path + " is not a dataset");
    const hid_t d = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
    const hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    std::vector<hsize_t> got(static_cast<std::size_t>(std::max(H5Sget_simple_extent_ndims(s), 0)));
    if (!got.empty()) H5Sget_simple_extent_dims(s, got.data(), nullptr);
    // The page's element types: float32, and integers of 32 or 64 bits.
    const std::size_t bytes = H5Tget_size(t);
    bool ok = H5Tget_class(t) == cls && (any_width || (cls == H5T_FLOAT ? bytes == 4 : bytes == 4 || bytes == 8)) &&
              got == dims;
    hsize_t n = 1;
    for (auto x : got) n *= x;
    if (ok) {
      out.assign(n, 0.0);
      ok = n == 0 || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0;
    }
    H5Tclose(t), H5Sclose(s), H5Dclose(d);
    return ok || fail(path + " has the wrong class or shape");
  }
};

// The first way the file breaks the page's rules, or "" when it follows them.
std::string page_problem(const std::string& path) {
  Reader r{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), {}};
  if (r.file < 0) return "does not open";
  std::string format;
  double version = 0, num_dense = 0, num_tables = 0, multi_hot = 0, rows = 0;
  std::vector<double> table_rows, v, w;
  [&] {
    if (!r.text("format", format) || !r.integer("format_version", version) || !r.integer("num_dense", num_dense) ||
        !r.integer("num_tables", num_tables) || !r.numbers("table_rows", H5T_INTEGER, table_rows) ||
        !r.integer("multi_hot", multi_hot) || !r.integer("rows", rows))
      return;
    if (format != "recmix-dataset" || version != 1) return (void)r.fail("format or version");
    // Counts are int64 values (an unsigned attribute past int64 does not fit), so that they
    // convert to sizes below; recmix also caps num_dense at 2^20, far above what a fuzzed file holds.
    constexpr double kInt64 = 9.2e18;
    if (num_dense < 0 || num_dense > (1 << 20) || rows < 0 || rows >= kInt64 || (multi_hot != 0 && multi_hot != 1))
      return (void)r.fail("a count out of range");
    if (table_rows.size() != num_tables) return (void)r.fail("table_rows does not have num_tables entries");
    for (double t : table_rows)
      if (t <= 0 || t >= kInt64) return (void)r.fail("a table without rows, or too many");
    const hsize_t n = static_cast<hsize_t>(rows), tables = table_rows.size();
    if (!r.dataset("/labels", H5T_FLOAT, {n}, v)) return;
    for (double x : v)
      if (!(x >= 0 && x <= 1)) return (void)r.fail("a label outside [0, 1]");
    if (!r.dataset("/dense", H5T_FLOAT, {n, static_cast<hsize_t>(num_dense)}, v)) return;
    for (double x : v)
      if (!std::isfinite(x)) return (void)r.fail("a dense value that is not finite");
    std::vector<double> max_bag;
    const bool has_max_bag = multi_hot == 1 && H5Aexists(r.file, "max_bag") > 0;
    if (has_max_bag && (!r.numbers("max_bag", H5T_INTEGER, max_bag) || max_bag.size() != tables))
      return (void)r.fail("max_bag");
    for (std::size_t t = 0; t < tables; ++t) {
      std::vector<double> indices;
      double bag = 1;
      if (multi_hot == 0) {
        if (t == 0 && !r.dataset("/sparse", H5T_INTEGER, {n, tables}, w)) return;
        for (hsize_t i = 0; i < n; ++i) indices.push_back(w[i * tables + t]);
      } else {
        std::vector<double> offsets;
        const std::string g = "/sparse/" + std::to_string(t);
        if (!r.dataset(g + "/offsets", H5T_INTEGER, {n + 1}, offsets)) return;
        H5O_info_t info;
        if (!exists(r.file, g + "/indices") ||
            H5Oget_info_by_name2(r.file, (g + "/indices").c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
            info.type != H5O_TYPE_DATASET)
          return (void)r.fail("no indices");
        const hid_t d = H5Dopen2(r.file, (g + "/indices").c_str(), H5P_DEFAULT);
        const hid_t s = H5Dget_space(d);
        hsize_t len = 0;
        const bool one_dim = H5Sget_simple_extent_ndims(s) == 1 && H5Sget_simple_extent_dims(s, &len, nullptr) == 1;
        H5Sclose(s), H5Dclose(d);
        if (!one_dim || !r.dataset(g + "/indices", H5T_INTEGER, {len}, indices)) return (void)r.fail("indices shape");
        if (offsets[0] != 0 || offsets[n] != static_cast<double>(len)) return (void)r.fail("offsets ends");
        bag = 0;
        for (hsize_t i = 0; i < n; ++i) {
          if (offsets[i + 1] < offsets[i]) return (void)r.fail("offsets decrease");
          bag = std::max(bag, offsets[i + 1] - offsets[i]);
        }
      }
      for (double x : indices)
        if (!(x >= 0 && x < table_rows[t])) return (void)r.fail("an index outside its table");
      if (has_max_bag && bag > max_bag[t]) return (void)r.fail("a bag above max_bag");
      const std::string counts = "/access_counts/" + std::to_string(t);
      // Counts are read converted, so any integer type holds them; they are not checked against
      // the data (a wrong count misleads the hot-row ranking, not training).
      if (exists(r.file, counts)) {
        if (!r.dataset(counts, H5T_INTEGER, {static_cast<hsize_t>(table_rows[t])}, w, true)) return;
        double sum = 0;
        for (double x : w) {
          if (x < 0) return (void)r.fail("a negative access count");
          sum += x;
        }
        if (sum > static_cast<double>(indices.size())) return (void)r.fail("access counts above the table's indices");
      }
      if (multi_hot == 0 && t + 1 < tables && !r.dataset("/sparse", H5T_INTEGER, {n, tables}, w)) return;
    }
  }();
  H5Fclose(r.file);
  return r.problem;
}

void finding(const std::string& what, const recmix::fuzz::EditLog& log) {
  std::fprintf(stderr, "dataset edits fuzz: %s\nedits:\n%s", what.c_str(), log.text().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (int multi = 0; multi < 2; ++multi) {
    recmix::data::SynthOptions o;
    o.output = recmix::fuzz::scratch_dir() + (multi ? "/base-multi.h5" : "/base-one.h5");
    o.rows = 24;
    o.num_dense = 3;
    o.table_rows = {10, 30};
    o.multi_hot = multi == 1;
    o.pooling_min = multi ? 0 : 1;
    o.pooling_max = multi ? 3 : 1;
    o.chunk_rows = 8;
    o.seed = 5;
    recmix::data::synthesize(o);
    base_files[multi] = o.output;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  recmix::fuzz::ByteReader in(data, size);
  const std::string path = recmix::fuzz::scratch_dir() + "/edited.h5";
  std::filesystem::copy_file(base_files[in.byte() & 1], path, std::filesystem::copy_options::overwrite_existing);
  const recmix::fuzz::EditLog log = recmix::fuzz::edit_h5_file(path, in);
  recmix::data::InspectReport report;
  try {
    report = recmix::data::inspect_file(path, true);
  } catch (const std::exception& e) {
    finding(std::string("inspect_file threw: ") + e.what(), log);
  }
  (void)recmix::data::format_report(report);
  const std::string page = page_problem(path);
  if (report.problem.empty() && !page.empty()) finding("accepted a file the format page refuses: " + page, log);
  if (!report.problem.empty() && page.empty()) finding("refused a file the format page accepts: " + report.problem, log);
  if (report.problem.empty() && report.rows_checked != report.info.rows) finding("valid file with rows unread", log);
  return 0;
}
