// libFuzzer target: jitdump files (jit-PID.dump, written by the profiled
// user). Any input parses, whole or in pieces, to the same records; the code
// map's symbols are sorted, disjoint, non-empty and bounded, and a lookup
// finds only code holding the address.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "userspace/process/jitdump.h"
#include "userspace/process/perf_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gsymprof;
  const std::span<const uint8_t> bytes(data, size);
  ParsedJitdump whole = parse_jitdump(bytes);
  // Fed in two pieces (a file read while it grows), the same records.
  JitdumpParser parser;
  std::vector<JitdumpEvent> events;
  const size_t split = size / 3;
  const size_t used = parser.parse(bytes.first(split), events);
  parser.parse(bytes.subspan(used), events);
  if (events.size() != whole.events.size()) std::abort();
  for (const JitdumpEvent& event : whole.events) {
    const JitCode& code = event.code;
    if (code.start >= code.end || code.name.size() > kMaxJitdumpNameBytes) std::abort();
    if (code.unwind.size() > kMaxJitdumpUnwindBytes) std::abort();
    if (code.lines.size() > kMaxJitdumpLineRows) std::abort();
    for (const JitLine& line : code.lines)
      if (line.address < code.start || line.address >= code.end || line.line == 0) std::abort();
  }
  JitCodeMap map;
  map.apply(std::move(whole.events));
  const std::vector<JitSymbol> symbols = map.symbols();
  for (size_t i = 0; i < symbols.size(); ++i) {
    const JitSymbol& s = symbols[i];
    if (s.start >= s.end || s.name.empty() || s.name.size() > 3 * kMaxJitdumpNameBytes) std::abort();
    if (i > 0 && symbols[i - 1].end > s.start) std::abort();
    uint64_t moved_by = 0;
    const JitCode* code = map.find(s.start, &moved_by);
    if (!code || s.start - moved_by < code->start || s.start - moved_by >= code->end) std::abort();
    if (find_jit_symbol(symbols, s.end - 1) != &s) std::abort();
  }
  return 0;
}
