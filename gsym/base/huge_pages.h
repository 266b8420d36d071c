// gsym/base/huge_pages.h - large buffers backed by transparent huge pages:
// one page fault per 2 MiB instead of one per 4 KiB. The converter's largest
// buffers (a unit's decoded line rows, its functions' rows) are written once,
// front to back, right after they are reserved; faulting them in 4 KiB at a
// time was a tenth of converting a small program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace gsym {

namespace huge_pages {

// Blocks of at least this many bytes are mapped on their own.
inline constexpr size_t kMinBytes = size_t{2} << 20;

// `bytes` (>= kMinBytes) of zero-filled memory starting at a 2 MiB boundary,
// with MADV_HUGEPAGE advised: a hint only (a kernel without transparent huge
// pages, or with them off, gives 4 KiB pages). nullptr when out of memory.
void* map(size_t bytes);
// Unmaps a block map() returned for `bytes`.
void unmap(void* block, size_t bytes);

}  // namespace huge_pages

// std::allocator, except that blocks of huge_pages::kMinBytes and more come
// from huge_pages::map.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) < huge_pages::kMinBytes) return std::allocator<T>().allocate(n);
    void* block = huge_pages::map(n * sizeof(T));
    if (!block) throw std::bad_alloc();
    return static_cast<T*>(block);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < huge_pages::kMinBytes)
      std::allocator<T>().deallocate(p, n);
    else
      huge_pages::unmap(p, n * sizeof(T));
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

// `size` bytes, uninitialized, from HugePageAllocator: for a buffer filled
// at once by a writer of its own (a decompressor).
struct HugePageBytesDeleter {
  size_t size = 0;
  void operator()(uint8_t* p) const noexcept { HugePageAllocator<uint8_t>().deallocate(p, size); }
};
using HugePageBytes = std::unique_ptr<uint8_t[], HugePageBytesDeleter>;
inline HugePageBytes allocate_huge_page_bytes(size_t size) {
  return HugePageBytes(HugePageAllocator<uint8_t>().allocate(size), HugePageBytesDeleter{size});
}

// For buffers reserved large and filled at once (reserve() first: growing
// one copies it like any vector).
template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace gsym
