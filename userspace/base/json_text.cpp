#include "userspace/base/json_text.h"

#include "gsym/base/hex.h"

namespace gsymprof {
namespace {

// nlohmann's output is valid UTF-8 with C0 controls escaped; what is left
// raw that a terminal acts on is DEL (7f) and U+0080..U+009F (c2 80..c2 9f),
// and those bytes occur only inside strings.
std::string escape_del_and_c1(std::string text) {
  size_t i = 0;
  while (i < text.size() && text[i] != '\x7f' && text[i] != '\xc2') ++i;
  if (i == text.size()) return text;
  std::string out(text, 0, i);
  for (; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    const bool c1 = byte == 0xc2 && i + 1 < text.size() &&
                    static_cast<uint8_t>(text[i + 1]) >= 0x80 && static_cast<uint8_t>(text[i + 1]) <= 0x9f;
    if (byte != 0x7f && !c1) {
      out.push_back(text[i]);
      continue;
    }
    const uint8_t code = c1 ? static_cast<uint8_t>(text[++i]) : byte;
    out += "\\u00";
    gsym::append_hex_byte(out, code);
  }
  return out;
}

}  // namespace

std::string terminal_safe_json(const nlohmann::ordered_json& value) {
  // Names and paths are bytes from GSYM files and captures: never fail on
  // ones that are not UTF-8.
  return escape_del_and_c1(value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

void append_terminal_safe_json_string(std::string& out, std::string_view text) {
  out += terminal_safe_json(nlohmann::ordered_json(std::string(text)));
}

}  // namespace gsymprof
