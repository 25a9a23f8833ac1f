#pragma once
// The reader's row runs and their hyperslab reads: the union of row ranges of a dataset read in
// one HDF5 call. Internal to recmix_data.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/h5.hpp"

namespace recmix::data::detail {

// Row runs [start, start+len) in file-local coordinates, and the matching hyperslab union.
struct Run {
  std::int64_t start, len;
};

// Selects the union of `runs` (rows, all `cols` columns) in `file_space`; an empty list selects none.
inline void select_runs(hid_t file_space, const std::vector<Run>& runs, hsize_t cols, int ndims,
                        const std::string& where) {
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

}  // namespace recmix::data::detail
