#include "userspace/base/text_escape.h"

#include "gsym/base/hex.h"

namespace gsymprof {
namespace {

bool is_printable_ascii(uint8_t c) { return c >= 0x20 && c < 0x7f; }

// Length of the leading run of printable ASCII: the whole text in the common
// case, which is then copied without further per-byte work.
size_t printable_ascii_prefix(std::string_view text, size_t from) {
  size_t i = from;
  while (i < text.size() && is_printable_ascii(static_cast<uint8_t>(text[i]))) ++i;
  return i;
}

void append_hex_escape(std::string& out, uint8_t byte) {
  out += "\\x";
  gsym::append_hex_byte(out, byte);
}

}  // namespace

size_t decode_utf8(std::string_view text, size_t i, uint32_t* code_point) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  size_t length;
  uint32_t cp;
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  } else if (lead >= 0xC2 && lead <= 0xDF) {  // 0xC0, 0xC1 only start overlongs
    length = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {  // above 0xF4 is beyond U+10FFFF
    length = 4, cp = lead & 0x07;
  } else {
    return 0;
  }
  if (length > text.size() - i) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (byte(i + k) & 0x3F);
  }
  if ((length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  *code_point = cp;
  return length;
}

void append_escaped_control(std::string& out, std::string_view text) {
  size_t i = printable_ascii_prefix(text, 0);
  out.append(text.substr(0, i));
  while (i < text.size()) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c >= 0x80) {
      uint32_t cp = 0;
      const size_t length = decode_utf8(text, i, &cp);
      if (length > 0 && cp >= 0xA0) {  // printable non-ASCII
        out.append(text.substr(i, length));
        i += length;
        continue;
      }
      if (length > 0) {  // C1 control: both bytes, so no terminal sees it
        for (size_t k = 0; k < length; ++k) append_hex_escape(out, static_cast<uint8_t>(text[i + k]));
        i += length;
        continue;
      }
    }
    if (is_printable_ascii(c)) {
      const size_t end = printable_ascii_prefix(text, i);
      out.append(text.substr(i, end - i));
      i = end;
      continue;
    }
    append_hex_escape(out, c);  // C0, DEL, or a byte of invalid UTF-8
    ++i;
  }
}

std::string escape_control(std::string_view text) {
  if (printable_ascii_prefix(text, 0) == text.size()) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  append_escaped_control(out, text);
  return out;
}

}  // namespace gsymprof
