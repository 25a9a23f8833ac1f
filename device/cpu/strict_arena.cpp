#include "device/cpu/strict_arena.hpp"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>

#include "core/error.hpp"
#include "device/memory_pool.hpp"

namespace recmix::device::strict {
namespace {

std::size_t page_size() {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// The arena is aligned to, and its protection changed in, whole 2 MiB steps, with transparent huge
// pages asked for: changing the protection of 170 MB of tables then touches 85 page-table entries,
// not 42,000 (measured in bench/RESULTS.md).
constexpr std::size_t kHuge = std::size_t(2) << 20;

// Arenas the signal handler looks in. Slots are claimed and released with atomics; the handler
// only reads them.
constexpr int kSlots = 256;
std::array<std::atomic<const Arena*>, kSlots> registry{};
struct sigaction previous_action;
std::once_flag handler_once;

void write_all(const char* text, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<std::size_t>(w);
  }
}

void on_segv(int sig, siginfo_t* info, void* context) {
  const void* addr = info->si_addr;
  for (auto& slot : registry) {
    const Arena* arena = slot.load(std::memory_order_acquire);
    if (!arena || !arena->contains(addr)) continue;
    char what[256];
    if (!arena->describe_for_signal(addr, what, sizeof what))
      std::snprintf(what, sizeof what, "an allocation (the arena was busy)");
    char line[512];
    const int n = std::snprintf(line, sizeof line,
                                "recmix: host access to device memory at %p, inside %s: host code read or wrote "
                                "memory of a cpu-strict device allocation outside a kernel, a copy, a GEMM or a "
                                "collective of its backend\n",
                                addr, what);
    write_all(line, static_cast<std::size_t>(n > 0 ? std::min<int>(n, sizeof line - 1) : 0));
    void* frames[48];
    const int depth = backtrace(frames, 48);
    backtrace_symbols_fd(frames, depth, STDERR_FILENO);
    // Dies of SIGSEGV when the access runs again, as it would have without the emulator.
    signal(SIGSEGV, SIG_DFL);
    return;
  }
  // Not ours: whatever handled SIGSEGV before (Open MPI's backtrace printer, or the default).
  if (previous_action.sa_flags & SA_SIGINFO) {
    previous_action.sa_sigaction(sig, info, context);
  } else if (previous_action.sa_handler == SIG_DFL || previous_action.sa_handler == SIG_IGN) {
    signal(SIGSEGV, SIG_DFL);
  } else {
    previous_action.sa_handler(sig);
  }
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previous_action);
}

}  // namespace

Arena::Arena(std::size_t reserve_bytes) : reserve_(round_up(reserve_bytes, kHuge)) {
  void* p = mmap(nullptr, reserve_ + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw DeviceError(fmt::format("cpu-strict: reserving {} of address space failed: {}", format_bytes(reserve_),
                                  std::strerror(errno)));
  mapping_ = static_cast<char*>(p);
  base_ = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(mapping_), kHuge));
  madvise(base_, reserve_, MADV_HUGEPAGE);  // a hint: without it the arena still works, slower
  std::call_once(handler_once, install_handler);
  for (int i = 0; i < kSlots; ++i) {
    const Arena* expected = nullptr;
    if (registry[i].compare_exchange_strong(expected, this)) {
      slot_ = i;
      break;
    }
  }
  if (slot_ < 0) {
    munmap(mapping_, reserve_ + kHuge);
    throw DeviceError(fmt::format("cpu-strict: more than {} device arenas in one process", kSlots));
  }
}

Arena::~Arena() {
  registry[slot_].store(nullptr, std::memory_order_release);
  munmap(mapping_, reserve_ + kHuge);
}

void Arena::protect(std::size_t begin, std::size_t end, bool open) const {
  end = std::min(round_up(end, kHuge), reserve_);
  if (end <= begin) return;
  if (mprotect(base_ + begin, end - begin, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    throw DeviceError(fmt::format("cpu-strict: mprotect failed: {}", std::strerror(errno)));
}

void* Arena::allocate(std::size_t bytes) {
  const std::size_t size = round_up(std::max<std::size_t>(bytes, 1), page_size());
  std::lock_guard lock(mutex_);
  std::size_t offset = 0;
  auto fit = free_.begin();
  while (fit != free_.end() && fit->second < size) ++fit;
  if (fit != free_.end()) {
    offset = fit->first;
    const std::size_t left = fit->second - size;
    free_.erase(fit);
    if (left > 0) free_[offset + size] = left;
  } else {
    if (extent_ + size > reserve_)
      throw OutOfMemoryError(fmt::format("cpu-strict: device allocation of {} does not fit in the emulator's "
                                         "{} address range ({} in use)",
                                         format_bytes(bytes), format_bytes(reserve_), format_bytes(extent_)));
    offset = extent_;
    extent_ += size;
  }
  // Garbage, not zeros: code that forgets to initialise device memory reads NaN. The whole arena
  // opens for it, as for any work: protecting parts of it would split its huge pages.
  protect(0, extent_, true);  // also opens a grown extent while work is running
  std::memset(base_ + offset, 0xff, size);
  if (open_count_ == 0) protect(0, extent_, false);
  Block block{size, {}};
  std::snprintf(block.name, sizeof block.name, "an unnamed allocation");
  live_[offset] = block;
  return base_ + offset;
}

void Arena::deallocate(void* ptr) noexcept {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  const std::size_t offset = static_cast<std::size_t>(static_cast<char*>(ptr) - base_);
  auto it = live_.find(offset);
  if (it == live_.end()) return;
  std::size_t begin = offset, size = it->second.bytes;
  live_.erase(it);
  madvise(base_ + begin, size, MADV_DONTNEED);
  // Coalesce with free neighbours.
  auto next = free_.find(begin + size);
  if (next != free_.end()) {
    size += next->second;
    free_.erase(next);
  }
  auto prev = free_.lower_bound(begin);
  if (prev != free_.begin()) {
    --prev;
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[begin] = size;
}

void Arena::name(const void* ptr, const std::string& what) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(static_cast<std::size_t>(static_cast<const char*>(ptr) - base_));
  if (it != live_.end()) std::snprintf(it->second.name, sizeof it->second.name, "%s", what.c_str());
}

void Arena::open() {
  std::lock_guard lock(mutex_);
  if (open_count_++ == 0) protect(0, extent_, true);
}

void Arena::close() noexcept {
  std::lock_guard lock(mutex_);
  if (--open_count_ == 0) {
    try {
      protect(0, extent_, false);
    } catch (...) {
    }
  }
}

bool Arena::contains(const void* p, std::size_t bytes) const {
  const char* c = static_cast<const char*>(p);
  return c >= base_ && c + bytes <= base_ + reserve_;
}

bool Arena::inside_allocation(const void* p, std::size_t bytes) const {
  if (!contains(p, std::max<std::size_t>(bytes, 1))) return false;
  std::lock_guard lock(mutex_);
  const std::size_t offset = static_cast<std::size_t>(static_cast<const char*>(p) - base_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  return offset + bytes <= it->first + it->second.bytes;
}

std::string Arena::describe(const void* p) const {
  char text[256];
  return describe_for_signal(p, text, sizeof text) ? std::string(text) : std::string("no allocation");
}

bool Arena::describe_for_signal(const void* p, char* out, std::size_t size) const {
  if (!contains(p)) return false;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  const std::size_t offset = static_cast<std::size_t>(static_cast<const char*>(p) - base_);
  auto it = live_.upper_bound(offset);
  if (it != live_.begin()) {
    --it;
    if (offset < it->first + it->second.bytes) {
      std::snprintf(out, size, "%s (a block of %zu bytes; byte %zu of it)", it->second.name, it->second.bytes,
                    offset - it->first);
      return true;
    }
  }
  std::snprintf(out, size, "no live allocation (byte %zu of the device arena: freed or never allocated)", offset);
  return true;
}

}  // namespace recmix::device::strict
