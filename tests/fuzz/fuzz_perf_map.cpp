// libFuzzer target: perf-map text (/tmp/perf-PID.map, written by the
// profiled user). Any input parses; the result is sorted, disjoint and
// non-empty ranges, and a lookup finds only a symbol holding the address.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "userspace/process/perf_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gsymprof::ParsedPerfMap map = gsymprof::parse_perf_map(text);
  for (size_t i = 0; i < map.symbols.size(); ++i) {
    const gsymprof::JitSymbol& s = map.symbols[i];
    if (s.start >= s.end || s.name.empty() || s.name.size() > gsymprof::kMaxPerfMapNameBytes) std::abort();
    if (i > 0 && map.symbols[i - 1].end > s.start) std::abort();
  }
  for (const gsymprof::JitSymbol& s : map.symbols)
    for (uint64_t address : {s.start, s.end - 1, s.end}) {
      const gsymprof::JitSymbol* found = gsymprof::find_jit_symbol(map.symbols, address);
      if (found && (address < found->start || address >= found->end)) std::abort();
      if (!found && address < s.end) std::abort();
    }
  return 0;
}
