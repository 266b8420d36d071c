// userspace/symbolize/symbolize.h - Capture -> symbolized stacks. No /proc access:
// everything comes from the capture's module table and GSYM files.
//
// Input: a Capture (normalized frames: module index + unslid address, or an
// unresolved runtime address) and a GsymLocator.
// Output: one table of distinct frames (names demangled, files, lines,
// inline marks, module identity) and unique stacks, root first, as ids into
// that table; plus one ModuleReport per distinct (path, build ID) referenced
// by any stack.
//
// Rules:
// - Each unique (GSYM reader, unslid address) is looked up once, in sorted
//   batches per reader; each unique frame sequence is symbolized once.
// - A GSYM lookup yields frames innermost first; they are emitted root
//   first, so an address contributes [concrete function, inlined..., innermost].
//   Every frame but the concrete function has inlined = true.
// - A frame without a name is "MODULE+0xOFFSET": MODULE the basename of the
//   module path, OFFSET the file offset in the module (runtime address =
//   unslid + load_bias, then runtime - mapping.start + mapping.file_offset
//   for the mapping holding it). "[unknown]" only when not even a mapping
//   exists: CaptureFrame::module < 0, or no mapping of the module holds the
//   runtime address (or the module path has no basename).
// - CaptureStack::truncated adds a "[truncated]" root frame; an off-CPU
//   stack ends in its reason ("[off-cpu S]", "[runqueue]"), after a
//   "[short waits]" frame for waits summed without a stack.
// - A stack's count is its weight (stack_weight): samples, or nanoseconds
//   for off-CPU and wall-clock captures.
// - Kernel frames are named from Capture::kernel (the recording machine's
//   kallsyms, carried by the capture): "function", "function [module]" for a
//   module's symbol, "[kernel]" when no symbol holds the address; their
//   module is "[kernel.kallsyms]" with the recording kernel's build ID.
// - JIT frames (CaptureFrame::jit) are named by their perf-map entry as
//   written, no module.
// - Python frames (CaptureFrame::python) are named "STEM.QUALNAME
//   (BASENAME:LINE)" from their Capture::python_frames entry: BASENAME the
//   file's last path component (the whole file when it has none), STEM the
//   basename without a ".py" suffix, ":LINE" left out when the line is 0
//   ("fib.fib (fib.py:3)", "<frozen importlib._bootstrap>._find_and_load
//   (<frozen importlib._bootstrap>:1360)"); file and line as recorded, no
//   module.
// - Stacks that are equal after symbolization (comm, every frame field) are
//   merged and their counts summed; stacks with count 0 are dropped.
// - Cost: distinct frames are built once; unique sequences are found by
//   sorting stack indexes (comparing the capture's frames in place, no
//   copies), and stacks are sorted and merged as frame-id sequences. Memory
//   beyond the capture is a few 32-bit words per stack and per frame of a
//   unique sequence, plus the distinct frames and comms.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/reader/reader.h"
#include "userspace/base/build_id.h"
#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof {

enum class FrameKind : uint8_t {
  Function = 0,  // named by a GSYM
  ModuleOffset,  // "libfoo.so+0x1a2b": module known, no name
  Unknown,       // "[unknown]": not even a mapping
  Truncated,     // "[truncated]": the unwinder stopped early (root only)
  Kernel,        // a kernel frame: "function", "function [module]" or "[kernel]"
  Jit,           // JIT code named by the process's perf map (Capture::jit_symbols)
  OffCpu,        // why a thread was off the CPU ("[off-cpu S]", "[runqueue]"), and
                 // "[short waits]" for waits summed without a stack (leaf only)
  Python,        // a CPython function (Capture::python_frames)
};

struct SymbolizedFrame {
  FrameKind kind = FrameKind::Unknown;
  std::string name;         // demangled name, or "lib.so+0x1a2b", "[unknown]", "[truncated]"
  std::string file;         // "directory/basename", "basename" or "" (unknown)
  uint32_t line = 0;        // 0 = unknown
  bool inlined = false;     // an inlined call (not the concrete function)
  std::string module_path;  // "" for Unknown and Truncated
  BuildId build_id;         // the module's build ID (empty when unknown)
  std::string system_name;  // the name as the symbol table holds it (mangled); "" = same as name
  // The line of the function's (or inlined call's) first instruction, with
  // SymbolizeOptions::function_start_lines; 0 = unknown or not asked for.
  uint32_t start_line = 0;
  bool operator==(const SymbolizedFrame&) const = default;
  auto operator<=>(const SymbolizedFrame&) const = default;
};

struct SymbolizedStack {
  std::string comm;              // "comm", or "comm-PID" with pid_in_comm
  std::vector<uint32_t> frames;  // root first, indexes into SymbolizeResult::frames
  uint64_t count = 0;
  bool operator==(const SymbolizedStack&) const = default;
};

// The one call that reaches into a GSYM (a seam: tests count calls).
using LookupFunction = std::function<gsym::Expected<bool>(
    const gsym::Reader& reader, uint64_t unslid_addr, const gsym::LookupOptions& options,
    gsym::LookupScratch& scratch)>;

struct SymbolizeOptions {
  bool inline_frames = true;     // false (--no-inline): only the concrete function per address
  bool pid_in_comm = false;      // root "comm-PID" instead of "comm"
  bool line_information = true;  // false: names only (file "" and line 0)
  // Fill SymbolizedFrame::start_line (pprof's Function.start_line): one more
  // lookup per distinct named address, at the start of each frame's range.
  bool function_start_lines = false;
  // Where to find a module's ELF for conversion on a GSYM miss; "" = do not
  // convert. Default (empty function): the module's local_file (live), else
  // its captured path. Symbolization itself never looks at /proc: a caller
  // that has a stand-in for a module (the vDSO) says so here.
  std::function<std::string(const CaptureModule&)> local_elf_path;
  // Default (empty function): reader.lookup_into(addr, options, scratch).
  LookupFunction lookup;
  // A mapped GSYM's pages leave the resident set as soon as its last address
  // is looked up (gsym::Reader::release_pages), so a daemon holds one
  // module's pages at a time, not every module's of a window: the page
  // cache maps whole large folios (up to MBs) per fault, and the agent's
  // window touched 20-45 MB of GSYM pages.
  bool release_pages_per_module = false;
};

struct SymbolizeStats {
  uint64_t unique_stacks = 0;        // distinct frame sequences symbolized
  uint64_t unique_addresses = 0;     // distinct (reader, address) looked up
  uint64_t lookups = 0;              // GSYM lookups made
  uint64_t lookup_errors = 0;        // lookups that failed on a corrupt record
  // Per capture frame of the unique frame sequences (not weighted by count):
  uint64_t unnamed_frames = 0;       // emitted as MODULE+0xOFFSET
  uint64_t unknown_frames = 0;       // emitted as [unknown]
  uint64_t kernel_frames = 0;        // kernel frames
  uint64_t unnamed_kernel_frames = 0;  // kernel frames emitted as [kernel]
  uint64_t jit_frames = 0;           // frames named from a perf map
  uint64_t python_frames = 0;        // CPython frames
};


struct SymbolizeResult {
  // Distinct frames, sorted (operator<=>), each referenced by some stack:
  // equal ids are equal frames and id order is frame order.
  std::vector<SymbolizedFrame> frames;
  // Sorted by (comm, frame ids), i.e. by (comm, frames) field by field; no
  // two equal (comm, frames). Each frame is stored once in `frames`, not per
  // stack: a big capture has millions of frame occurrences.
  std::vector<SymbolizedStack> stacks;
  // One per distinct (path, build ID) of a module referenced by a stack,
  // sorted by (path, build ID). Lookup errors are noted here.
  std::vector<ModuleReport> modules;
  SymbolizeStats stats;
  // What the stacks' counts are (weight_unit): "samples", or "ns" for
  // off-CPU and wall-clock captures.
  std::string unit = "samples";
};

// The file `module` is converted from on a GSYM miss, by the rule
// SymbolizeOptions::local_elf_path describes.
std::string local_elf_path_for(const CaptureModule& module, const SymbolizeOptions& options);

// "STEM.QUALNAME (BASENAME:LINE)": a Python frame's name (see above).
std::string python_frame_name(const PythonFrame& frame);

// Errors (bad capture): a frame's module, JIT or Python index out of range.
// Missing symbols are never errors: they show in frames and reports.
gsym::Expected<SymbolizeResult> symbolize(const Capture& capture, GsymLocator& locator,
                                          const SymbolizeOptions& options = {});

}  // namespace gsymprof
