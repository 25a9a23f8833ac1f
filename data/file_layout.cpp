// Where a dataset's rows lie in its file, asked of HDF5, and plain reads of file bytes.
#include "data/file_layout.hpp"

#include "core/error.hpp"

namespace recmix::data::detail {

Extent extent_of(hid_t dataset, hid_t memory_type) {
  Extent e;
  const std::string where = h5::describe(dataset);
  h5::PropList dcpl(RECMIX_H5_CHECK(H5Dget_create_plist(dataset), IoError, where));
  h5::Datatype type(RECMIX_H5_CHECK(H5Dget_type(dataset), IoError, where));
  const std::vector<hsize_t> dims = h5::shape(dataset);
  const hsize_t cols = dims.size() == 2 ? dims[1] : 1;
  e.row_bytes = static_cast<std::int64_t>(H5Tget_size(type) * cols);
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_CHUNKED) {
    hsize_t chunk[2] = {0, 0};
    if (H5Pget_chunk(dcpl, 2, chunk) < 1 || chunk[0] == 0) return e;
    e.chunked = true;
    e.chunk_rows = static_cast<std::int64_t>(chunk[0]);
    e.filtered = H5Pget_nfilters(dcpl) > 0;
    e.known = true;
  } else if (layout == H5D_CONTIGUOUS) {
    e.base = H5Dget_offset(dataset);
    e.known = e.base != HADDR_UNDEF;
  }
  e.plain = e.known && !e.filtered && H5Tequal(type, memory_type) > 0;
  return e;
}

bool pread_all(int fd, void* dest, std::int64_t bytes, std::int64_t offset) {
  char* out = static_cast<char*>(dest);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, out, static_cast<std::size_t>(bytes), offset);
    if (n <= 0) return false;
    out += n;
    offset += n;
    bytes -= n;
  }
  return true;
}

bool chunk_location(hid_t dataset, Extent& e, std::int64_t c, haddr_t* addr, hsize_t* bytes) {
  if (static_cast<std::int64_t>(e.chunks.size()) <= c) e.chunks.resize(c + 1, {HADDR_UNDEF, 0});
  auto& [a, z] = e.chunks[c];
  if (a == HADDR_UNDEF) {
    hsize_t offset[2] = {static_cast<hsize_t>(c * e.chunk_rows), 0};
    unsigned mask = 0;
    if (H5Dget_chunk_info_by_coord(dataset, offset, &mask, &a, &z) < 0 || a == HADDR_UNDEF) {
      H5Eclear2(H5E_DEFAULT);
      a = HADDR_UNDEF;
      return false;
    }
  }
  *addr = a;
  *bytes = z;
  return true;
}

}  // namespace recmix::data::detail
