// gsym/data_cursor.h - the one bounds-checked reader for untrusted GSYM bytes.
//
// Reads fixed-width integers in the file's byte order and LEB128 values. The
// first failure (end of data, overlong or overflowing LEB128) is sticky: reads
// after it return 0, so callers check ok() once per group of reads, the way
// LLVM's DataExtractor::Cursor works, and the hot loops stay branch-light.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gsym::detail {

class DataCursor {
 public:
  enum class Failure : uint8_t { None, Truncated, LebTooLong };

  DataCursor() = default;
  // `base` is the absolute offset of `begin` in the whole input (for errors).
  DataCursor(const uint8_t* begin, const uint8_t* end, uint64_t base, bool swap)
      : begin_(begin), pos_(begin), end_(end), base_(base), swap_(swap) {}

  bool ok() const { return failure_ == Failure::None; }
  Failure failure() const { return failure_; }
  // Absolute offset where the first failure happened (or the current one).
  uint64_t failure_offset() const { return ok() ? offset() : failure_offset_; }
  uint64_t offset() const { return base_ + static_cast<uint64_t>(pos_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }
  bool at_end() const { return pos_ == end_; }
  const uint8_t* position() const { return pos_; }
  const uint8_t* end() const { return end_; }
  bool swap() const { return swap_; }

  // A cursor over the next `n` bytes (which this cursor skips), or a failed one.
  DataCursor sub(size_t n) {
    if (!ok() || n > remaining()) {
      fail(Failure::Truncated);
      DataCursor bad;
      bad.fail(Failure::Truncated);
      bad.failure_offset_ = failure_offset_;
      return bad;
    }
    DataCursor c(pos_, pos_ + n, offset(), swap_);
    pos_ += n;
    return c;
  }

  bool skip(size_t n) {
    if (!ok() || n > remaining()) return fail(Failure::Truncated);
    pos_ += n;
    return true;
  }

  uint8_t u8() {
    if (pos_ == end_) {
      fail(Failure::Truncated);
      return 0;
    }
    return *pos_++;
  }
  uint16_t u16() { return fixed<uint16_t>(); }
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }

  // ULEB128 bounded to 10 bytes and 64 bits.
  uint64_t uleb() {
    uint64_t value = 0;
    unsigned shift = 0;
    while (true) {
      if (pos_ == end_) {
        fail(Failure::Truncated);
        return 0;
      }
      const uint8_t byte = *pos_++;
      const uint64_t bits = byte & 0x7f;
      if (shift == 63 && bits > 1) return leb_failure();
      value |= bits << shift;
      if (!(byte & 0x80)) return value;
      shift += 7;
      if (shift > 63) return leb_failure();
    }
  }

  // SLEB128 bounded to 10 bytes and 64 bits.
  int64_t sleb() {
    uint64_t value = 0;
    unsigned shift = 0;
    uint8_t byte = 0;
    while (true) {
      if (pos_ == end_) {
        fail(Failure::Truncated);
        return 0;
      }
      byte = *pos_++;
      const uint64_t bits = byte & 0x7f;
      if (shift == 63) {
        // Only the sign bit fits: the byte must be 0x00 or 0x7f (sign-extended).
        if (bits != 0 && bits != 0x7f) return static_cast<int64_t>(leb_failure());
      }
      value |= bits << shift;
      shift += 7;
      if (!(byte & 0x80)) break;
      if (shift > 63) return static_cast<int64_t>(leb_failure());
    }
    if (shift < 64 && (byte & 0x40)) value |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(value);
  }

 private:
  template <class T>
  T fixed() {
    if (remaining() < sizeof(T)) {
      fail(Failure::Truncated);
      pos_ = end_;
      return 0;
    }
    T v;
    std::memcpy(&v, pos_, sizeof(T));
    pos_ += sizeof(T);
    if (swap_) v = byteswap(v);
    return v;
  }

  static uint16_t byteswap(uint16_t v) { return __builtin_bswap16(v); }
  static uint32_t byteswap(uint32_t v) { return __builtin_bswap32(v); }
  static uint64_t byteswap(uint64_t v) { return __builtin_bswap64(v); }

  uint64_t leb_failure() {
    fail(Failure::LebTooLong);
    return 0;
  }

  bool fail(Failure f) {
    if (failure_ == Failure::None) {
      failure_ = f;
      failure_offset_ = offset();
    }
    pos_ = end_;  // stop every loop that reads until the end
    return false;
  }

  const uint8_t* begin_ = nullptr;
  const uint8_t* pos_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t base_ = 0;
  uint64_t failure_offset_ = 0;
  Failure failure_ = Failure::None;
  bool swap_ = false;
};

}  // namespace gsym::detail
