#include "runtime/cli/run_directory.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "comm/communicator.hpp"
#include "core/error.hpp"

namespace recmix::cli {
namespace fs = std::filesystem;

bool holds_run(const fs::path& dir, const std::vector<std::string>& markers) {
  std::error_code ec;
  for (const auto& m : markers)
    if (fs::exists(dir / m, ec)) return true;
  return false;
}

fs::path move_aside(const fs::path& dir) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &utc);
  fs::path plain = dir;
  if (!plain.has_filename()) plain = plain.parent_path();  // "runs/demo/" -> "runs/demo"
  const std::string base = fmt::format("{}.{}", plain.string(), stamp);
  for (int n = 1; n < 1000; ++n) {
    const fs::path aside = n == 1 ? fs::path(base) : fs::path(fmt::format("{}-{}", base, n));
    if (renameat2(AT_FDCWD, plain.c_str(), AT_FDCWD, aside.c_str(), RENAME_NOREPLACE) == 0) return aside;
    if (errno != EEXIST && errno != ENOTEMPTY)
      throw IoError(fmt::format("cannot move '{}' aside to '{}': {}", plain.string(), aside.string(), std::strerror(errno)));
  }
  throw IoError(fmt::format("cannot move '{}' aside: '{}' and 999 more names are taken", plain.string(), base));
}

std::string from_rank0(comm::Communicator& world, std::string text) {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  world.broadcast(&length, 1, comm::DataType::i64, 0);
  text.resize(static_cast<std::size_t>(length));
  world.broadcast(text.data(), text.size(), comm::DataType::u8, 0);
  return text;
}

std::string claim_run_directory(comm::Communicator& world, const fs::path& dir, const std::vector<std::string>& markers,
                                bool resume, bool force, const std::string& command) {
  std::string error;
  if (world.rank() == 0 && !resume && holds_run(dir, markers)) {
    if (!force) {
      error = fmt::format("the run directory '{}' holds a run already: continue it with --resume{}, or start over "
                          "with --force (moves it aside to {}.<time>)",
                          dir.string(), command == "run" ? fmt::format(" {}", dir.string()) : " auto", dir.string());
    } else {
      try {
        const fs::path aside = move_aside(dir);
        std::printf("--force: the run that was in %s is now in %s\n", dir.c_str(), aside.c_str());
        std::fflush(stdout);
      } catch (const Error& e) {
        error = e.what();
      }
    }
  }
  return from_rank0(world, error);
}

}  // namespace recmix::cli
