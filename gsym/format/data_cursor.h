// gsym/format/data_cursor.h - the one bounds-checked reader for untrusted GSYM bytes.
//
// Reads fixed-width integers in the file's byte order, string-table offsets
// in the file's width (4 bytes in version 1, 8 in version 2) and LEB128
// values. The first failure (end of data, overlong or overflowing LEB128) is
// sticky: reads after it return 0, so callers check ok() once per group of
// reads, the way LLVM's DataExtractor::Cursor works, and the hot loops stay
// branch-light.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <string>

#include "gsym/base/expected.h"
#include "gsym/format/leb128.h"

namespace gsym::detail {

class DataCursor {
 public:
  enum class Failure : uint8_t { None, Truncated, LebTooLong };

  DataCursor() = default;
  // `base` is the absolute offset of `begin` in the whole input (for errors);
  // `wide_strings`: string offsets are 8 bytes (GSYM version 2).
  DataCursor(const uint8_t* begin, const uint8_t* end, uint64_t base, bool swap,
             bool wide_strings = false)
      : begin_(begin), pos_(begin), end_(end), base_(base), swap_(swap),
        wide_strings_(wide_strings) {}

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
  // Bytes of a string-table offset in this file: 4, or 8 in version 2.
  unsigned string_offset_size() const { return wide_strings_ ? 8 : 4; }

  // The Error for this failed cursor, which was reading `what`.
  Error error(const char* what) const {
    if (failure_ == Failure::LebTooLong)
      return Error(std::string(what) + ": LEB128 value longer than 10 bytes or over 64 bits",
                   failure_offset());
    return Error(std::string(what) + " is truncated", failure_offset());
  }

  // A cursor over the next `n` bytes (which this cursor skips), or a failed one.
  DataCursor sub(size_t n) {
    if (!ok() || n > remaining()) {
      fail(Failure::Truncated);
      DataCursor bad;
      bad.fail(Failure::Truncated);
      bad.failure_offset_ = failure_offset_;
      return bad;
    }
    DataCursor c(pos_, pos_ + n, offset(), swap_, wide_strings_);
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
  // A string-table offset (a name, a call-site pattern) in the file's width.
  uint64_t string_offset() { return wide_strings_ ? u64() : u32(); }

  // LEB128 values by the GSYM rule (leb128.h: at most 10 bytes, 64 bits).
  uint64_t uleb() {
    uint64_t value = 0;
    const leb128::Result result = leb128::decode_uleb<kMaxLebBytes>(pos_, end_, value);
    return checked(result, value);
  }
  int64_t sleb() {
    int64_t value = 0;
    const leb128::Result result = leb128::decode_sleb<kMaxLebBytes>(pos_, end_, value);
    return checked(result, value);
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

  template <class T>
  T checked(leb128::Result result, T value) {
    if (result == leb128::Result::Ok) return value;
    fail(result == leb128::Result::Truncated ? Failure::Truncated : Failure::LebTooLong);
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
  bool wide_strings_ = false;
};

}  // namespace gsym::detail
