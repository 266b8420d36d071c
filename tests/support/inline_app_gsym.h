// tests/support/inline_app_gsym.h - a small GSYM with an inline chain, for
// units and fuzz targets: an "app" module, build ID aa010203, with main
// [0x1000,0x1100) and foo [0x1100,0x1200) (mangled _Z3fooi), bar inlined in
// foo at [0x1110,0x1150) from app.c:20.
#pragma once

#include <cstdint>
#include <vector>

namespace gsymprof::test {

inline const std::vector<uint8_t> kInlineAppId = {0xaa, 0x01, 0x02, 0x03};

// Its bytes; empty when the builder refused it (a bug in the builder).
std::vector<uint8_t> inline_app_gsym_bytes();

}  // namespace gsymprof::test
