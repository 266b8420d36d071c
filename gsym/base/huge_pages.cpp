#include "gsym/base/huge_pages.h"

#include <sys/mman.h>

namespace gsym::huge_pages {

namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

size_t mapped_size(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

}  // namespace

void* map(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kHugePage) return nullptr;
  const size_t size = mapped_size(bytes);
  // Mapped a huge page larger, then trimmed to start on a boundary: the
  // kernel backs only aligned 2 MiB ranges with huge pages.
  void* mapped = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const uintptr_t first = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t start = (first + kHugePage - 1) & ~(kHugePage - 1);
  if (start > first) munmap(mapped, start - first);
  const uintptr_t tail = first + size + kHugePage - (start + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(start + size), tail);
  madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void unmap(void* block, size_t bytes) { munmap(block, mapped_size(bytes)); }

}  // namespace gsym::huge_pages
