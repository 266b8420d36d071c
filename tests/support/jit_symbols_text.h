// tests/support/jit_symbols_text.h - JIT symbols as text, one
// "start-end name" line each (hex), for comparing them in unit tests.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "userspace/capture/capture.h"

namespace gsymprof {

inline std::string describe(const std::vector<JitSymbol>& symbols) {
  std::string out;
  for (const JitSymbol& s : symbols) {
    char line[64];
    std::snprintf(line, sizeof line, "%llx-%llx ", static_cast<unsigned long long>(s.start),
                  static_cast<unsigned long long>(s.end));
    out += line + s.name + "\n";
  }
  return out;
}

}  // namespace gsymprof
