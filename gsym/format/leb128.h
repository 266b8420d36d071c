// gsym/format/leb128.h - the one LEB128 codec: checked decoders, a fast inline
// decoder for the lookup loops, a skipper and the encoders.
//
// One rule for every decoder: the value must fit in 64 bits (ULEB: the bits
// past bit 63 are zero; SLEB: they repeat the sign) and take at most
// `MaxBytes` bytes, the only thing a use chooses: GSYM records take
// kMaxLebBytes (10, the shortest that holds 64 bits), the DWARF DIE walker
// allows one byte of padding more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gsym/format/format.h"

namespace gsym::leb128 {

enum class Result : uint8_t { Ok, Truncated, TooLong };

// Decodes the ULEB128 at `p` and advances `p` past it. Truncated leaves `p`
// at `end`; TooLong leaves it after the byte that broke the rule.
template <unsigned MaxBytes>
inline Result decode_uleb(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  static_assert(MaxBytes >= kMaxLebBytes);
  uint64_t result = 0;
  unsigned shift = 0;
  for (unsigned n = 1;; ++n, shift += 7) {
    if (p == end) return Result::Truncated;
    const uint8_t byte = *p++;
    const uint64_t bits = byte & 0x7f;
    if (shift >= 63 && (shift == 63 ? bits > 1 : bits != 0)) return Result::TooLong;
    if (shift < 64) result |= bits << shift;
    if (!(byte & 0x80)) {
      value = result;
      return Result::Ok;
    }
    if (n == MaxBytes) return Result::TooLong;
  }
}

// The same for SLEB128.
template <unsigned MaxBytes>
inline Result decode_sleb(const uint8_t*& p, const uint8_t* end, int64_t& value) {
  static_assert(MaxBytes >= kMaxLebBytes);
  uint64_t result = 0;
  unsigned shift = 0;
  for (unsigned n = 1;; ++n) {
    if (p == end) return Result::Truncated;
    const uint8_t byte = *p++;
    const uint64_t bits = byte & 0x7f;
    if (shift >= 63) {
      // Only copies of the sign bit (bit 63) may lie past bit 63.
      const uint64_t sign = shift == 63 ? (bits & 1) : result >> 63;
      if (bits != (sign ? 0x7f : 0)) return Result::TooLong;
    }
    if (shift < 64) result |= bits << shift;
    shift += 7;
    if (!(byte & 0x80)) {
      if (shift < 64 && (byte & 0x40)) result |= ~uint64_t{0} << shift;
      value = static_cast<int64_t>(result);
      return Result::Ok;
    }
    if (n == MaxBytes) return Result::TooLong;
  }
}

// Fast variants for the lookup loops (GSYM rule): one-byte values take one
// branch; false on any failure, the caller then reruns a checked decoder for
// the exact error.
inline bool read_uleb_fast(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  if (p < end && *p < 0x80) {
    value = *p++;
    return true;
  }
  return decode_uleb<kMaxLebBytes>(p, end, value) == Result::Ok;
}

inline bool read_sleb_fast(const uint8_t*& p, const uint8_t* end, int64_t& value) {
  return decode_sleb<kMaxLebBytes>(p, end, value) == Result::Ok;
}

// Steps over one LEB128 of at most MaxBytes bytes whose value is not needed
// (so not checked); false when it does not end in time.
template <unsigned MaxBytes>
inline bool skip(const uint8_t*& p, const uint8_t* end) {
  for (unsigned n = 0; p < end && n < MaxBytes; ++n)
    if (!(*p++ & 0x80)) return true;
  return false;
}

// Shortest encodings, written at `p` (room for kMaxLebBytes); each returns
// the position after the value.
inline uint8_t* write_uleb(uint8_t* p, uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    *p++ = byte;
  } while (v != 0);
  return p;
}

inline uint8_t* write_sleb(uint8_t* p, int64_t v) {
  bool more = true;
  while (more) {
    uint8_t byte = v & 0x7f;
    v >>= 7;  // arithmetic shift: C++20 defines it for negative values
    more = !((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40)));
    if (more) byte |= 0x80;
    *p++ = byte;
  }
  return p;
}

// The same, appended to `out` (byte by byte: cheaper than a range insert
// for values of a byte or two).
inline void append_uleb(std::vector<uint8_t>& out, uint64_t v) {
  uint8_t bytes[kMaxLebBytes];
  for (const uint8_t* p = bytes, *end = write_uleb(bytes, v); p != end; ++p) out.push_back(*p);
}

inline void append_sleb(std::vector<uint8_t>& out, int64_t v) {
  uint8_t bytes[kMaxLebBytes];
  for (const uint8_t* p = bytes, *end = write_sleb(bytes, v); p != end; ++p) out.push_back(*p);
}

}  // namespace gsym::leb128
