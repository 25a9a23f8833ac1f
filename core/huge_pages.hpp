#pragma once
// Advice to back a large host allocation with 2 MiB pages. Embedding tables, tier maps and
// similar per-row arrays are read at random rows: on 4 KiB pages nearly every such access costs a
// TLB miss and a page walk besides its cache miss. Only a hint, and only useful before the first
// touch of the memory (the kernel then faults in huge pages where it has them).
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace recmix {

inline void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  if (!p || bytes < 4 * kHuge) return;  // a few pages: not worth it
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

// v = n copies of value, its storage advised before it is first written. The reserve() of a large
// vector maps fresh, untouched memory (glibc serves such sizes with mmap), so the advice applies.
template <class T>
void assign_huge(std::vector<T>& v, std::size_t n, const T& value) {
  std::vector<T>().swap(v);
  v.reserve(n);
  advise_huge_pages(v.data(), n * sizeof(T));
  v.assign(n, value);
}

}  // namespace recmix
