#pragma once
// A scratch folder of the test's own under the system's temporary folder, removed with it.
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace recmix::sched::test {

struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "recmix-sched-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace recmix::sched::test
