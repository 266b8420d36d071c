// gsym/base/pod_array.h - a growable array of trivially copyable elements
// that grows without std::vector's allocate-copy-free, for the large pools
// of the builder and the converter (line rows, inline nodes, their ranges:
// tens of MB for a large C++ program): small blocks with realloc, large ones
// mapped on their own and grown with mremap, which moves their pages instead
// of copying them into freshly faulted ones. That copying and its page
// faults were 40% of the page faults of converting cppcheck. (realloc alone
// moves pages only for blocks glibc mapped itself, and glibc serves large
// blocks from its heap once a large block was freed: then it copies.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>

#include <sys/mman.h>

namespace gsym {

template <typename T>
class PodArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PodArray() = default;
  PodArray(const PodArray&) = delete;
  PodArray& operator=(const PodArray&) = delete;
  ~PodArray() {
    if (mapped_bytes_)
      munmap(data_, mapped_bytes_);
    else
      std::free(data_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* data() const { return data_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& operator[](size_t i) { return data_[i]; }
  T& back() { return data_[size_ - 1]; }

  void push_back(const T& value) {
    const T copy = value;  // `value` may be an element, moved by the growth
    make_room(1);
    data_[size_++] = copy;
  }
  // `items` must not point into this array (growth would move them).
  void append(std::span<const T> items) {
    if (items.empty()) return;
    make_room(items.size());
    std::memcpy(static_cast<void*>(data_ + size_), items.data(), items.size() * sizeof(T));
    size_ += items.size();
  }
  // Drops the elements from `size` on; capacity is kept.
  void truncate(size_t size) { size_ = std::min(size_, size); }
  void clear() { size_ = 0; }

 private:
  void make_room(size_t more) {
    if (capacity_ - size_ >= more) return;
    constexpr size_t kMax = SIZE_MAX / sizeof(T);
    if (more > kMax - size_) throw std::bad_alloc();
    const size_t doubled = capacity_ > kMax / 2 ? kMax : capacity_ * 2;
    const size_t capacity = std::max({doubled, size_ + more, size_t{64}});
    const size_t bytes = capacity * sizeof(T);
    if (bytes < kMappedBytes) {  // never mapped yet: a block only grows
      void* grown = std::realloc(data_, bytes);
      if (!grown) throw std::bad_alloc();
      data_ = static_cast<T*>(grown);
    } else {
      const size_t page = kPageBytes;
      if (bytes > SIZE_MAX - page) throw std::bad_alloc();
      const size_t mapped = (bytes + page - 1) / page * page;
      void* grown = mapped_bytes_ ? mremap(data_, mapped_bytes_, mapped, MREMAP_MAYMOVE)
                                  : mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (grown == MAP_FAILED) throw std::bad_alloc();
      if (!mapped_bytes_) {  // the last copy: from realloc's block
        if (size_) std::memcpy(grown, static_cast<const void*>(data_), size_ * sizeof(T));
        std::free(data_);
      }
      data_ = static_cast<T*>(grown);
      mapped_bytes_ = mapped;
    }
    capacity_ = capacity;
  }

  // Blocks from this size are mapped (glibc's default mmap threshold).
  static constexpr size_t kMappedBytes = size_t{128} << 10;
  static constexpr size_t kPageBytes = 4096;  // mapped lengths are rounded to it (the kernel, to its page)

  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  size_t mapped_bytes_ = 0;  // 0: data_ is realloc's
};

}  // namespace gsym
