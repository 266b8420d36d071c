// userspace/base/parse_number.h - numbers in text (flags, /proc, captures):
// the whole text or nothing, digits only (no sign, blank or prefix), no
// overflow. One parser, so "-1", " 5", "5x" and 2^64 are refused alike.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gsymprof {

template <std::unsigned_integral T>
std::optional<T> parse_unsigned(std::string_view text, int base = 10) {
  T value{};
  const char* end = text.data() + text.size();
  // from_chars takes no '+' or "0x", but reads a leading '-' for signed types only.
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  auto [ptr, ec] = std::from_chars(text.data(), end, value, base);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// "0x" + hex digits, or decimal digits.
inline std::optional<uint64_t> parse_address(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
    return parse_unsigned<uint64_t>(text.substr(2), 16);
  return parse_unsigned<uint64_t>(text);
}

}  // namespace gsymprof
