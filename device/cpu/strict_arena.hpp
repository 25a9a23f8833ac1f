#pragma once
// StrictArena: the device memory of one strict-emulator backend. One reserved range of address
// space, kept PROT_NONE except while the backend works on it (open() .. close(), counted, so
// concurrent and nested work keeps it open until the last one ends). Host code that touches it
// outside that window faults, and the process-wide SIGSEGV handler installed with the first arena
// names the allocation: "host access to device memory".
//
// Each backend has its own arena, so one job's kernels opening its memory never open another
// job's: in `recmix run` the check holds for every job while the others compute. What it cannot
// see: host code of the same job touching its device memory while one of that job's own kernels
// runs on another thread (the window is per arena, not per thread).
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace recmix::device::strict {

class Arena {
 public:
  // Reserves `reserve_bytes` of address space (no memory until used). Throws DeviceError.
  explicit Arena(std::size_t reserve_bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Page-aligned blocks; the contents of a new block are garbage (0xff bytes: NaN as floats),
  // as cudaMalloc's are. Throws OutOfMemoryError when the reservation is exhausted.
  void* allocate(std::size_t bytes);
  void deallocate(void* ptr) noexcept;
  void name(const void* ptr, const std::string& what);

  void open();
  void close() noexcept;

  bool contains(const void* p, std::size_t bytes = 1) const;
  // Whether [p, p + bytes) lies inside one live allocation.
  bool inside_allocation(const void* p, std::size_t bytes) const;
  // "'embedding shard 2' (4.0 MiB at offset 128)" for an address in the arena (for messages).
  std::string describe(const void* p) const;
  // The same, for the signal handler: no allocation, no locks that can block; false if the
  // arena is busy or p is not inside it.
  bool describe_for_signal(const void* p, char* out, std::size_t size) const;

 private:
  struct Block {
    std::size_t bytes;
    char name[96];
  };
  void protect(std::size_t begin, std::size_t end, bool open) const;

  char* mapping_ = nullptr;  // the reservation as mapped; base_ is its first 2 MiB boundary
  char* base_ = nullptr;
  std::size_t reserve_ = 0;
  mutable std::mutex mutex_;
  std::map<std::size_t, Block> live_;            // offset -> block
  std::map<std::size_t, std::size_t> free_;      // offset -> bytes, coalesced
  std::size_t extent_ = 0;                       // bytes ever handed out from base_ (page multiple)
  int open_count_ = 0;
  int slot_ = -1;                                // in the signal handler's registry
};

}  // namespace recmix::device::strict
