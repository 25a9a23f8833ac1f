// bench_reader: the reader's throughput against a raw sequential read of the same file
// (bench/RESULTS.md). Writes a synthetic one-hot dataset, reads the whole file once with
// read(2) in 4 MiB blocks (the ceiling: what the storage plus page cache deliver), then reads
// every row through the Reader in several configurations. Throughput is file bytes per second;
// repeats alternate raw and reader reads so that both see the same cache state.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <stdexcept>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/common/timing.hpp"
#include "data/reader.hpp"
#include "data/synth.hpp"

namespace {

using recmix::bench::median;
using recmix::bench::seconds_since;

bool cold = false;  // drop the page cache before every timed read (needs root)

// Block-device counters of the device holding the dataset (/sys/dev/block/MAJ:MIN/stat): read
// requests completed and sectors read, summed over the timed passes of each configuration.
std::string stat_path;
struct IoCount {
  double requests = 0, sectors = 0;
};
IoCount io_now() {
  IoCount c;
  if (stat_path.empty()) return c;
  std::FILE* f = std::fopen(stat_path.c_str(), "r");
  if (!f) return c;
  double merged = 0;
  if (std::fscanf(f, "%lf %lf %lf", &c.requests, &merged, &c.sectors) != 3) c = {};
  std::fclose(f);
  return c;
}
void io_add(IoCount& sum, const IoCount& before) {
  const IoCount after = io_now();
  sum.requests += after.requests - before.requests;
  sum.sectors += after.sectors - before.sectors;
}

void drop_cache() {
  if (!cold) return;
  ::sync();
  std::FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (!f || std::fputs("1\n", f) < 0) throw std::runtime_error("--cold: cannot write /proc/sys/vm/drop_caches");
  std::fclose(f);
}

double raw_read(const std::string& path, IoCount* io) {
  drop_cache();
  const IoCount io0 = io_now();
  std::vector<char> buf(4u << 20);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t total = 0;
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) > 0) total += static_cast<std::size_t>(n);
  const double s = seconds_since(t0);
  ::close(fd);
  if (io) io_add(*io, io0);
  return s;
}

std::int64_t read_all(const std::string& path, const recmix::data::ReaderOptions& o) {
  recmix::data::Reader reader({path}, o);
  recmix::data::Batch b;
  std::int64_t n = 0;
  while (reader.next(b)) n += b.size;
  return n;
}

// One pass of a reader; with processes > 1, that many processes read at once, as ranks 0 ..
// processes - 1 of a job on this node (o.rank and o.world are set for each), and *rows counts
// the rows of all of them.
double reader_pass(const std::string& path, recmix::data::ReaderOptions o, int processes, std::int64_t* rows,
                   IoCount* io) {
  drop_cache();
  const IoCount io0 = io_now();
  const auto t0 = std::chrono::steady_clock::now();
  if (processes <= 1) {
    *rows = read_all(path, o);
  } else {
    std::vector<pid_t> children;
    for (int r = 0; r < processes; ++r) {
      o.rank = r;
      o.world = processes;
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        int code = 0;
        try {
          read_all(path, o);
        } catch (...) {
          code = 1;
        }
        std::_Exit(code);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      if (::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("a reading process failed");
    }
    recmix::data::Reader counter({path}, o);  // every row of the epoch was read by one of them
    *rows = counter.batches_per_epoch() * o.global_batch;
  }
  const double s = seconds_since(t0);
  io_add(*io, io0);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Reader throughput against a raw sequential read"};
  std::string rows_text = "2000000";
  int repeats = 5;
  std::string dir = std::filesystem::temp_directory_path().string();
  std::int64_t batch = 4096;
  app.add_option("--rows", rows_text, "rows of the synthetic dataset")->capture_default_str();
  app.add_option("--batch", batch, "global batch")->capture_default_str();
  app.add_option("--repeats", repeats, "timed repeats (median reported)")->capture_default_str();
  app.add_option("--dir", dir, "where the dataset goes")->capture_default_str();
  std::string only;
  app.add_option("--only", only, "run only the configurations whose name contains this text");
  app.add_flag("--cold", cold, "drop the page cache before every timed read: storage speed, not memory speed");
  CLI11_PARSE(app, argc, argv);

  recmix::data::SynthOptions so;
  so.output = dir + "/bench_reader.h5";
  so.rows = std::stoll(rows_text);
  so.table_rows = std::vector<std::int64_t>(26, 100000);
  so.access_counts_limit = 0;
  recmix::data::synthesize(so);
  const double mb = static_cast<double>(std::filesystem::file_size(so.output)) / 1e6;
  fmt::print("dataset: {} rows, 13 dense, 26 one-hot tables (int32), {:.1f} MB, batch {}\n", so.rows, mb, batch);

  struct Config {
    const char* name;
    recmix::data::ReaderOptions options;
    int processes = 1;
  };
  std::vector<Config> configs = {
      {"file order, prefetch 2, validate", {.global_batch = batch, .prefetch = 2}},
      {"file order, prefetch 2, no validation", {.global_batch = batch, .prefetch = 2, .validate = false}},
      {"file order, synchronous, validate", {.global_batch = batch, .prefetch = 0}},
      {"shuffled (block 4096, window 65536), prefetch 2", {.global_batch = batch, .shuffle = true, .seed = 1, .prefetch = 2}},
      {"rank 0 of 2, file order, prefetch 2", {.global_batch = batch, .rank = 0, .world = 2, .prefetch = 2}},
      // the layout the trainer reads: indices int32 row-major, as stored (ReaderOptions::packed_one_hot)
      {"packed, file order, prefetch 2, validate", {.global_batch = batch, .prefetch = 2, .packed_one_hot = true}},
      {"packed, file order, synchronous, validate", {.global_batch = batch, .prefetch = 0, .packed_one_hot = true}},
      {"packed, file order, synchronous, no validation",
       {.global_batch = batch, .prefetch = 0, .validate = false, .packed_one_hot = true}},
      {"packed, rank 0 of 2, file order, prefetch 2",
       {.global_batch = batch, .rank = 0, .world = 2, .prefetch = 2, .packed_one_hot = true}},
      {"packed, 2 ranks at once (2 processes), file order, prefetch 2",
       {.global_batch = batch, .prefetch = 2, .packed_one_hot = true}, 2},
  };
  std::erase_if(configs, [&](const Config& c) { return std::string(c.name).find(only) == std::string::npos; });
  if (struct stat st; ::stat(so.output.c_str(), &st) == 0)
    stat_path = fmt::format("/sys/dev/block/{}:{}/stat", major(st.st_dev), minor(st.st_dev));
  if (!std::filesystem::exists(stat_path)) stat_path.clear();
  raw_read(so.output, nullptr);  // warm up the cache once
  std::vector<IoCount> io(configs.size() + 1);
  std::vector<double> raw;
  std::vector<std::vector<double>> timed(configs.size());
  std::vector<std::int64_t> rows(configs.size());
  for (int r = 0; r < repeats; ++r) {
    raw.push_back(raw_read(so.output, &io[0]));
    for (std::size_t c = 0; c < configs.size(); ++c)
      timed[c].push_back(reader_pass(so.output, configs[c].options, configs[c].processes, &rows[c], &io[c + 1]));
  }
  const double raw_gbs = mb / 1e3 / median(raw);
  // mean size of the device's read requests over the timed passes (cold: what storage was asked)
  auto request_size = [&](const IoCount& c) {
    return c.requests > 0 ? fmt::format("  {:.2f} MB/request", c.sectors * 512 / c.requests / 1e6) : std::string();
  };
  fmt::print("{:<52} {:>8.2f} GB/s{}\n", "raw sequential read(2), 4 MiB blocks", raw_gbs, cold ? request_size(io[0]) : "");
  for (std::size_t c = 0; c < configs.size(); ++c) {
    // a rank reads its share: count the bytes of the rows it delivered
    const double share = static_cast<double>(rows[c]) / static_cast<double>(so.rows);
    const double gbs = mb * share / 1e3 / median(timed[c]);
    // the same ratio taken within each repeat (raw and reader read one after the other), which
    // drifts in the storage's speed affect less; with its range over the repeats
    std::vector<double> paired;
    for (int r = 0; r < repeats; ++r) paired.push_back(100.0 * share * raw[r] / timed[c][r]);
    std::sort(paired.begin(), paired.end());
    fmt::print("{:<52} {:>8.2f} GB/s  {:5.1f}% of raw  ({:.2f} M rows/s)  paired {:5.1f}% [{:.0f}-{:.0f}]{}\n",
               configs[c].name, gbs, 100.0 * gbs / raw_gbs, rows[c] / median(timed[c]) / 1e6, median(paired),
               paired.front(), paired.back(), cold ? request_size(io[c + 1]) : "");
  }
  std::filesystem::remove(so.output);
  return 0;
}
