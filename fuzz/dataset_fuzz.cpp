// Fuzz target for the dataset layout checks and the reader (data/format.hpp, data/reader.hpp):
// the input is written to a file and inspected the way `recmix data inspect` does it
// (data::inspect_file: the layout, then every row). A file that is not a valid dataset must be
// reported as a problem (a recmix::Error inside inspect_file, HDF5's errors included); any
// exception out of inspect_file, a crash or a sanitizer report is a finding. A file reported
// valid must have had every row read.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "data/format.hpp"
#include "data/inspect.hpp"
#include "fuzz/fuzz_files.hpp"

namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "dataset fuzz: %s\n", what);
    std::abort();
  }
}

// Rows and table rows above which the rows are not read (a damaged size can claim terabytes of
// unallocated chunks; reading them all is slow, not wrong).
constexpr std::int64_t kMaxScannedRows = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = recmix::fuzz::write_scratch_file("data.h5", data, size);
  bool scan = true;
  try {
    const recmix::data::DatasetInfo info = recmix::data::open_file_info(path);
    std::int64_t table_rows = 0;
    for (auto r : info.table_rows) table_rows += r < kMaxScannedRows ? r : kMaxScannedRows;
    scan = info.rows <= kMaxScannedRows && table_rows <= kMaxScannedRows;
  } catch (const recmix::Error&) {
  }
  const recmix::data::InspectReport report = recmix::data::inspect_file(path, scan);
  if (report.problem.empty() && scan) require(report.rows_checked == report.info.rows, "valid file with rows unread");
  (void)recmix::data::format_report(report);
  return 0;
}
