// Structured fuzz target for the checkpoint loader (runtime/checkpoint/checkpoint.hpp): a valid checkpoint
// of the small model in fuzz/checkpoint_model.hpp is written at start; each input is a list of
// edits made to a copy through the HDF5 API (fuzz/h5_edits.hpp). The input's first byte says
// whether the block checksums are then recomputed over the edited arrays, so that edits reach
// the checks behind the checksum (shapes, finite values, metadata) and are not all caught by it.
// The copy is read with read_checkpoint_meta and loaded with load_checkpoint. Findings: an
// exception other than recmix::Error, a crash, a sanitizer report, damaged metadata accepted,
// a non-finite value loaded, or a load that succeeds although an array of the checkpoint is gone
// or has another shape or type class than the model's (extra or transposed data accepted); the
// checksum arrays count only while the file has its checksums group (version 1 files have none).
// Every edit list gives a well-formed HDF5 file, so this target runs time-boxed in CI.
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz/checkpoint_model.hpp"
#include "fuzz/fuzz_files.hpp"
#include "fuzz/h5_edits.hpp"
#include "runtime/checkpoint/checkpoint_checksum.hpp"

namespace {

using namespace recmix;

fuzz::CheckpointModel* model = nullptr;
std::string base;
std::vector<fuzz::DatasetShape> base_shapes;

void finding(const std::string& what, const fuzz::EditLog& log) {
  std::fprintf(stderr, "checkpoint edits fuzz: %s\nedits:\n%s", what.c_str(), log.text().c_str());
  std::abort();
}

// Rewrites /checksums/<array> for every 2-D float array that has one of the right length.
void reseal_checksums(const std::string& path) {
  const auto shapes = fuzz::dataset_shapes(path);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return;
  for (auto& s : shapes) {
    if (s.path.rfind("/checksums/", 0) == 0 || s.type_class != H5T_FLOAT || s.dims.size() != 2) continue;
    const std::string sums_path = std::string(1, '/').append(runtime::checksum_dataset(s.path.substr(1)));
    const hsize_t rows = s.dims[0], cols = s.dims[1];
    runtime::BlockChecksums sums(0, rows);
    const hid_t d = H5Dopen2(file, s.path.c_str(), H5P_DEFAULT);
    std::vector<float> values(rows * cols);
    if (d >= 0 && (values.empty() || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0))
      sums.add(0, rows, cols, values.data());
    const hid_t c = H5Lexists(file, "/checksums", H5P_DEFAULT) > 0 ? H5Dopen2(file, sums_path.c_str(), H5P_DEFAULT) : -1;
    if (c >= 0) {
      const hid_t space = H5Dget_space(c);
      if (H5Sget_simple_extent_npoints(space) == static_cast<hssize_t>(sums.sums().size()) && !sums.sums().empty())
        H5Dwrite(c, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, sums.sums().data());
      H5Sclose(space);
      H5Dclose(c);
    }
    if (d >= 0) H5Dclose(d);
  }
  H5Fclose(file);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  base = fuzz::scratch_dir() + "/base.h5";
  model = fuzz::start_checkpoint_model(argc, argv, base);
  base_shapes = fuzz::dataset_shapes(base);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::ByteReader in(data, size);
  const bool reseal = in.byte() & 1;
  const std::string path = fuzz::scratch_dir() + "/edited.h5";
  std::filesystem::copy_file(base, path, std::filesystem::copy_options::overwrite_existing);
  const fuzz::EditLog log = fuzz::edit_h5_file(path, in);
  if (reseal) reseal_checksums(path);
  try {
    const runtime::CheckpointMeta meta = runtime::read_checkpoint_meta(path);
    if (meta.step < 0 || meta.world_size < 1 || meta.num_dense < 0 || meta.position.epoch < 0 ||
        meta.position.epoch > meta.step || meta.position.batch < 0)
      finding("damaged metadata accepted", log);
    for (auto r : meta.table_rows)
      if (r <= 0) finding("a table without rows accepted", log);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    finding(std::string("read_checkpoint_meta threw ") + e.what(), log);
  }
  bool loaded = false;
  try {
    runtime::load_checkpoint(path, model->model);
    loaded = true;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    finding(std::string("load_checkpoint threw ") + e.what(), log);
  }
  if (!loaded) return 0;
  if (!runtime::first_non_finite(model->model, false).empty()) finding("a value that is not finite loaded", log);
  const std::vector<fuzz::DatasetShape> shapes = fuzz::dataset_shapes(path);
  // Without its checksums group the file reads as format version 1, which has none: the
  // checksums are then not required (with the group, the loader checks every array's).
  bool has_checksums = false;
  for (auto& s : shapes) has_checksums = has_checksums || s.path.rfind("/checksums/", 0) == 0;
  for (auto& b : base_shapes) {
    if (!has_checksums && b.path.rfind("/checksums/", 0) == 0) continue;
    bool same = false;
    for (auto& s : shapes) same = same || s == b;
    if (!same) finding("loaded although " + b.path + " is gone or has another shape or type", log);
  }
  return 0;
}
