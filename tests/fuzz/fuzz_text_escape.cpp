// libFuzzer target: escape_control on any bytes. Its promises must hold for
// every input: the result is valid UTF-8 with no C0, DEL or C1 control (so
// nothing reaches a terminal raw and no line can be split), printable input
// passes unchanged, and escaping an escaped text changes nothing more.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/base/text_escape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string escaped = gsymprof::escape_control(text);
  bool changed = false;
  for (size_t i = 0; i < escaped.size();) {
    uint32_t cp = 0;
    const size_t length = gsymprof::decode_utf8(escaped, i, &cp);
    if (length == 0) std::abort();                             // invalid UTF-8 left
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) std::abort();  // a control left
    i += length;
  }
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t length = gsymprof::decode_utf8(text, i, &cp);
    if (length == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
      changed = true;
      break;
    }
    i += length;
  }
  if (!changed && escaped != text) std::abort();  // clean text must pass unchanged
  if (gsymprof::escape_control(escaped) != escaped) std::abort();
  return 0;
}
