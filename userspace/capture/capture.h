// userspace/capture/capture.h - a capture: normalized, aggregated stacks plus the
// module table needed to symbolize them anywhere. It is the hand-off between
// sampling (live, /proc) and symbolization (no /proc): `profile` builds one in
// memory and symbolizes it; `record` writes it (capture_file.h); `symbolize`
// reads it back. The on-disk format is documented in capture-format.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/base/build_id.h"

namespace gsymprof {

// Why a frame could not be normalized to {module, unslid_addr}.
enum class UnresolvedReason : uint8_t {
  None = 0,
  NoMapping,         // runtime_addr lies in no mapping of the process
  AnonymousMapping,  // JIT, heap, stack, ... (the vDSO is a module: vdso_file.h)
  ModuleUnreadable,  // mapping has a file but its ELF could not be read
  NoSegment,         // file offset lies in no PT_LOAD segment
  ProcessGone,       // maps could not be read at all
  NotExecutable,     // in a mapping without execute permission: no code runs
                     // there, so the unwinder recovered a wrong return address
};
const char* to_string(UnresolvedReason reason);

struct ModuleMapping {
  uint64_t start = 0, end = 0;  // runtime address range
  uint64_t file_offset = 0;
  std::string perms;            // "r-xp"
};

// CaptureModule::error (and ProcessModule::error) when the process exited
// before its module files could be opened, so nothing is known of them:
// symbolize reports such modules with the samples that needed them.
inline constexpr const char* kProcessExitedError = "process exited before its modules could be read";

// One module (ELF file) of one process.
struct CaptureModule {
  std::string path;             // as in /proc/PID/maps ("(deleted)" stripped)
  BuildId build_id;             // identity (build_id.h: GNU, Go or SHA-256); empty = none
  uint64_t load_bias = 0;       // runtime_addr - unslid_addr
  std::vector<ModuleMapping> mappings;
  std::string error;            // why identity could not be read ("" = fine)
  // Live profiles only, never in capture files: a path that opens this very
  // file (module_identity.h, ModuleIdentity::local_file); "" = use `path`.
  std::string local_file;
};

struct CaptureFrame {
  // module >= 0: index into Capture::modules, address = unslid_addr (already
  // adjusted by -1 for return addresses). kernel: a kernel frame, address =
  // the kernel address to look up (the sampled IP for the stack's leaf,
  // return address - 1 for the others), named from Capture::kernel.
  // Otherwise (module < 0): address = runtime_addr, reason says why it is
  // unresolved. jit >= 0 (only with reason AnonymousMapping): JIT code named
  // by Capture::jit_symbols[jit], read from the process's perf map.
  int32_t module = -1;
  uint64_t address = 0;
  UnresolvedReason reason = UnresolvedReason::None;
  bool kernel = false;
  int32_t jit = -1;
  bool operator==(const CaptureFrame&) const = default;
  auto operator<=>(const CaptureFrame&) const = default;
};

struct CaptureStack {
  uint32_t pid = 0;
  std::string comm;
  std::vector<CaptureFrame> frames;  // leaf first: kernel frames, then user frames
  bool truncated = false;            // the user-stack unwinder stopped early
  uint64_t count = 0;
  uint32_t tid = 0;                  // the sampled thread (0: unknown, version 1)
};

// A kernel symbol some kernel frame falls in, from the recording machine's
// /proc/kallsyms: [start, end) (end = the next symbol's start).
struct KernelSymbol {
  uint64_t start = 0, end = 0;
  std::string name;
  std::string module;  // "" for the kernel image, else the module ("ext4")
  bool operator==(const KernelSymbol&) const = default;
};

// The module path kernel frames carry: perf's name for the kernel image.
inline constexpr const char* kKernelModulePath = "[kernel.kallsyms]";

// What names kernel frames: the recording kernel's symbols, only those some
// frame needs (a capture does not carry all of kallsyms).
struct CaptureKernel {
  BuildId build_id;                   // the recording kernel's GNU build ID
  std::vector<KernelSymbol> symbols;  // sorted by start, disjoint
  std::string error;                  // why frames have no names ("" = fine)
};

// A JIT-compiled function from a process's perf map (/tmp/perf-PID.map,
// perf_map.h): the runtime range [start, end) it held when recorded.
struct JitSymbol {
  uint64_t start = 0, end = 0;
  std::string name;
  bool operator==(const JitSymbol&) const = default;
  auto operator<=>(const JitSymbol&) const = default;
};

struct CaptureProcess {
  uint32_t pid = 0;
  std::string comm;
  std::vector<uint32_t> modules;  // indexes into Capture::modules
};

struct Capture {
  std::string host, kernel_release;
  uint32_t frequency_hz = 0;
  uint64_t start_time_unix_ns = 0;
  uint64_t duration_ns = 0;
  std::string call_graph = "fp";          // how stacks were unwound
  std::map<std::string, uint64_t> lost;   // loss counters by reason
  uint64_t samples = 0;                   // samples taken (stacks' counts sum)
  std::vector<CaptureModule> modules;
  std::vector<CaptureProcess> processes;
  std::vector<CaptureStack> stacks;
  CaptureKernel kernel;
  // What names JIT frames (CaptureFrame::jit): only the perf-map entries some
  // frame needs; a perf map lives in the recording machine's /tmp.
  std::vector<JitSymbol> jit_symbols;
};

// Whether any stack of `capture` has a kernel frame.
bool has_kernel_frames(const Capture& capture);

// The symbol holding kernel address `address`, or nullptr.
const KernelSymbol* find_kernel_symbol(const CaptureKernel& kernel, uint64_t address);

// Puts a capture in canonical order so equal captures serialize to equal
// bytes: modules sorted by (path, build ID, load bias, mappings) with frame and
// process indexes remapped, processes sorted by pid, identical stacks merged
// (counts added) and stacks sorted by (pid, tid, comm, frames, truncated);
// kernel symbols sorted by start, duplicates dropped; JIT symbols sorted,
// duplicates merged, unused ones dropped (frames' jit indexes remapped).
void canonicalize(Capture& capture);

// The stable names used for UnresolvedReason in capture files and reports
// ("no-mapping", "anonymous-mapping", ...); parse returns false on unknown.
const char* unresolved_reason_name(UnresolvedReason reason);
bool parse_unresolved_reason(std::string_view name, UnresolvedReason* reason);

}  // namespace gsymprof
