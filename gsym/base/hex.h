// gsym/base/hex.h - hex digits: bytes as lowercase hex (build IDs in paths,
// headers, dumps, escapes), numbers as error messages quote them, and the
// digit decoder every hex parser uses.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace gsym {

// 0-15 for a hex digit of either case, -1 for anything else.
constexpr int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline void append_hex_byte(std::string& out, uint8_t byte) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out.push_back(kDigits[byte >> 4]);
  out.push_back(kDigits[byte & 15]);
}

inline std::string to_hex(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t byte : bytes) append_hex_byte(out, byte);
  return out;
}

// "0x1f" (or zero-padded to `digits`, "0x001f"): how error messages and
// dumps quote addresses, sizes and offsets.
inline void append_hex_number(std::string& out, uint64_t value, int digits = 0) {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, digits, value);
  out.append(buf, static_cast<size_t>(n));
}
inline std::string hex_number(uint64_t value, int digits = 0) {
  std::string out;
  append_hex_number(out, value, digits);
  return out;
}

}  // namespace gsym
