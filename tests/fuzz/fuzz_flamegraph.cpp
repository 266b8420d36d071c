// Fuzzes folded-text parsing and SVG rendering: any bytes give an SVG or a
// one-line error; the SVG is valid UTF-8 XML text (names escaped, nothing
// outside the fixed markup contains '<').
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/output/flamegraph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto stacks = gsymprof::parse_folded(text);
  if (!stacks) {
    if (stacks.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  auto svg = gsymprof::render_flamegraph_svg(*stacks);
  if (!svg) return 0;
  // Names are escaped: no markup inside any tooltip.
  for (size_t at = svg->find("<title>"); at != std::string::npos; at = svg->find("<title>", at + 1)) {
    size_t end = svg->find("</title>", at);
    if (end == std::string::npos) std::abort();
    std::string_view body(svg->data() + at + 7, end - at - 7);
    if (body.find('<') != std::string_view::npos) std::abort();
  }
  // The whole document must be valid UTF-8 without forbidden characters.
  if (gsymprof::sanitize_xml_text(*svg) != *svg) std::abort();
  return 0;
}
