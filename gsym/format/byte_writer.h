// gsym/format/byte_writer.h - growable output buffer for the GSYM encoder: fixed-width
// integers in the file's byte order, LEB128 (byte-order independent), zero
// padding and back-patching of placeholders (LLVM's FileWriter, in spirit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gsym/format/leb128.h"
#include "gsym/format/format.h"  // Endian

namespace gsym {

class ByteWriter {
 public:
  // `string_offset_size`: bytes of a string-table offset in records (4 in
  // GSYM version 1, 8 in version 2).
  explicit ByteWriter(Endian endian, unsigned string_offset_size = 4)
      : endian_(endian), string_offset_size_(string_offset_size) {}

  unsigned string_offset_size() const { return string_offset_size_; }
  uint64_t tell() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }
  void reserve(size_t n) { bytes_.reserve(n); }

  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v) { fixed(v, 2); }
  void u32(uint32_t v) { fixed(v, 4); }
  void u64(uint64_t v) { fixed(v, 8); }
  // An unsigned integer of `width` bytes (1, 2, 4 or 8).
  void uint(uint64_t v, unsigned width) { fixed(v, width); }
  // A string-table offset in the record width this writer was made for.
  void string_offset(uint64_t v) { fixed(v, string_offset_size_); }

  void uleb(uint64_t v) { leb128::append_uleb(bytes_, v); }
  void sleb(int64_t v) { leb128::append_sleb(bytes_, v); }

  void raw(std::string_view s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  void raw(std::span<const uint8_t> bytes) { bytes_.insert(bytes_.end(), bytes.begin(), bytes.end()); }
  void zeros(size_t n) { bytes_.insert(bytes_.end(), n, 0); }

  // Zero padding up to a multiple of `align` (relative to the buffer start).
  void align_to(unsigned align) {
    size_t rem = bytes_.size() % align;
    if (rem != 0) zeros(align - rem);
  }

  // Overwrites 4 bytes at `offset` (a placeholder written earlier).
  void fixup_u32(uint64_t offset, uint32_t v) { put(offset, v, 4); }
  void fixup_u64(uint64_t offset, uint64_t v) { put(offset, v, 8); }

 private:
  void fixed(uint64_t v, unsigned width) {
    size_t at = bytes_.size();
    bytes_.resize(at + width);
    put(at, v, width);
  }
  void put(uint64_t at, uint64_t v, unsigned width) {
    for (unsigned i = 0; i < width; ++i) {
      unsigned shift = endian_ == Endian::Little ? 8 * i : 8 * (width - 1 - i);
      bytes_[at + i] = static_cast<uint8_t>(v >> shift);
    }
  }

  Endian endian_;
  unsigned string_offset_size_;
  std::vector<uint8_t> bytes_;
};

// Resolves an already-interned string to its string-table offset (for the
// record encoders).
class StringOffsets {
 public:
  virtual uint32_t offset_of(std::string_view s) const = 0;

 protected:
  ~StringOffsets() = default;
};

}  // namespace gsym
