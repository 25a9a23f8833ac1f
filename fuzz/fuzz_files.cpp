#include "fuzz/fuzz_files.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace recmix::fuzz {

namespace {

struct Scratch {
  std::string dir;
  Scratch() {
    // Memory-backed where the system has it: inputs are rewritten thousands of times a second.
    std::error_code ec;
    const bool shm = std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0;
    std::string templ = ((shm ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path()) /
                         "recmix-fuzz-XXXXXX").string();
    if (!mkdtemp(templ.data())) {
      std::perror("recmix fuzz: mkdtemp");
      std::abort();
    }
    dir = templ;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

std::string scratch_dir() {
  static Scratch scratch;
  return scratch.dir;
}

std::string write_scratch_file(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "recmix fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace recmix::fuzz
