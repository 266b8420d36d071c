// libFuzzer target: jitdump files (jit-PID.dump, written by the profiled
// user). Any input parses, whole or in pieces, to the same records; the code
// map's symbols are sorted, disjoint, non-empty and bounded, and a lookup
// finds only code holding the address. Each load's .eh_frame is placed
// within its code or refused (unwind/jit_eh_frame.h), and a walk from the
// code's start through it by the CFI unwinder ends within its bounds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <array>
#include <span>

#include "userspace/process/jitdump.h"
#include "userspace/process/perf_map.h"
#include "userspace/unwind/cfi_unwinder.h"
#include "userspace/unwind/jit_eh_frame.h"

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
  static CfiUnwinder unwinder({.max_frames = 8});
  uint64_t serial = 0;
  for (const JitdumpEvent& event : whole.events) {
    const JitCode& code = event.code;
    if (code.unwind.size() <= code.eh_frame_hdr_size) continue;
    auto placed = place_jit_eh_frame(code.unwind, code.eh_frame_hdr_size, code.start, code.end);
    if (placed && (placed->fdes == 0 || placed->eh_frame.size() > code.unwind.size())) std::abort();
    UnwindModule module;
    module.jit = JitUnwindCode{code.start, code.end, code.unwind, code.eh_frame_hdr_size, ++serial};
    std::array<uint8_t, 64> stack{};
    const StackView view{{code.start, 0x1000, 0x1000}, 0x1000, stack};
    UnwindResult result;
    unwinder.unwind(view, [&](uint64_t a) { return a >= code.start && a < code.end ? &module : nullptr; }, result);
    if (result.ips.empty() || result.ips.size() > 8 || result.ips[0] != code.start) std::abort();
    unwinder.forget_module(module);  // a serial per input: nothing kept across inputs
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
