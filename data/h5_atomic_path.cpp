// AtomicPath: a file written under a temporary name and renamed into place, with the temporaries
// removed if a signal ends the process; and the checks an output path gets before it is written.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/h5.hpp"

namespace recmix::h5 {

namespace {

// The temporaries of live AtomicPaths, where a signal handler can read them: a slot is free (0),
// being written (1) or holds a path (2). Registration never allocates in the handler's view.
constexpr int kTempSlots = 8;
constexpr std::size_t kTempPathBytes = 4096;
std::atomic<int> temp_state[kTempSlots];
char temp_paths[kTempSlots][kTempPathBytes];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

int register_temp(const std::string& path) {
  if (path.size() >= kTempPathBytes) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (temp_state[i].compare_exchange_strong(expected, 1)) {
      std::memcpy(temp_paths[i], path.c_str(), path.size() + 1);
      temp_state[i].store(2);
      return i;
    }
  }
  return -1;  // more than kTempSlots at once: this one is not removed on a signal
}

void unregister_temp(int slot) {
  if (slot >= 0) temp_state[slot].store(0);
}

void remove_temporaries_and_reraise(int signal) {
  const int saved_errno = errno;
  for (int i = 0; i < kTempSlots; ++i)
    if (temp_state[i].load() == 2) ::unlink(temp_paths[i]);
  errno = saved_errno;
  ::raise(signal);  // SA_RESETHAND restored the default action: it runs once this handler returns
}

// "is a directory" for anything that is not a regular file or a symbolic link; "" for those.
std::string not_a_file(mode_t mode) {
  if (S_ISREG(mode) || S_ISLNK(mode)) return "";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device";
  if (S_ISFIFO(mode)) return "is a FIFO";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

}  // namespace

AtomicPath::AtomicPath(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp." + std::to_string(::getpid())), slot_(register_temp(temp_)) {}

AtomicPath::~AtomicPath() {
  if (!done_) std::remove(temp_.c_str());
  unregister_temp(slot_);
}

void AtomicPath::commit() {
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    const std::string kind = not_a_file(st.st_mode);
    if (!kind.empty()) throw IoError(path_ + ": " + kind + "; only a regular file is replaced by " + temp_);
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0)
    throw IoError(path_ + ": cannot rename " + temp_ + " onto it");
  done_ = true;
  unregister_temp(slot_);
  slot_ = -1;
}

void AtomicPath::discard() {
  std::remove(temp_.c_str());
  done_ = true;
  unregister_temp(slot_);
  slot_ = -1;
}

void AtomicPath::remove_temporaries_on_signal() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_reraise;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    ::sigaction(signal, &action, nullptr);
  }
}

void check_output_path(const std::string& path, bool replace) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) return;  // nothing there (or unreachable: the writer says why)
  struct stat target {};
  const std::string kind = not_a_file(::stat(path.c_str(), &target) == 0 ? target.st_mode : link.st_mode);
  if (!kind.empty()) throw IoError(path + ": " + kind + "; only a regular file can be replaced by a dataset");
  if (!replace) throw IoError(path + ": already exists; --force replaces it");
}

}  // namespace recmix::h5
