// userspace/capture/capture.h - a capture: normalized, aggregated stacks plus the
// module table needed to symbolize them anywhere. It is the hand-off between
// sampling (live, /proc) and symbolization (no /proc): `profile` builds one in
// memory and symbolizes it; `record` writes it (capture_file.h); `symbolize`
// reads it back. The on-disk format is documented in capture-format.md.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "userspace/base/build_id.h"
#include "userspace/base/off_cpu_reason.h"

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

// Why a module's identity is unknown (CaptureModule::error says more, for
// people). Decisions are made on the kind, never on the message.
enum class ModuleErrorKind : uint8_t {
  None = 0,
  ProcessExited,  // the process exited before its module files could be
                  // opened: symbolize reports such modules with their samples
  Unreadable,     // the file could not be opened or is not a usable ELF
};

// The message that goes with ModuleErrorKind::ProcessExited.
inline constexpr const char* kProcessExitedError = "process exited before its modules could be read";

// How user stacks were unwound.
enum class CallGraph : uint8_t {
  FramePointer = 0,  // "fp": the kernel's frame-pointer walk (perf record -g)
  Dwarf,             // "dwarf": copied stack + CFI in user space
  None,              // "none": no call chains (a perf.data without them)
};

// What a capture's stacks measure.
enum class ProfileClock : uint8_t {
  Cpu = 0,  // "cpu": timer samples of code on a CPU (CaptureStack::count)
  OffCpu,   // "off-cpu": time blocked off the CPU (CaptureStack::off_cpu_ns)
  Wall,     // "wall": both, in nanoseconds (a CPU sample weighs 1e9/frequency_hz)
};


// One module (ELF file) of one process.
struct CaptureModule {
  std::string path;             // as in /proc/PID/maps ("(deleted)" stripped)
  BuildId build_id;             // identity (build_id.h: GNU, Go or SHA-256); empty = none
  uint64_t load_bias = 0;       // runtime_addr - unslid_addr
  std::vector<ModuleMapping> mappings;
  ModuleErrorKind error_kind = ModuleErrorKind::None;
  std::string error;            // why identity could not be read ("" = fine), for people
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
  // python >= 0: a CPython function (module -1, address 0), named by
  // Capture::python_frames[python] from the process's memory when recorded.
  //
  // Laid out for size, 24 bytes instead of 32 (a profile's capture holds a
  // frame per stack level: 14 MB of frames for 20k stacks before); ordered
  // by the constructor's argument order, as captures have always sorted.
  uint64_t address = 0;
  int32_t module = -1;
  int32_t jit = -1;
  int32_t python = -1;
  UnresolvedReason reason = UnresolvedReason::None;
  bool kernel = false;

  CaptureFrame() = default;
  constexpr CaptureFrame(int32_t module_index, uint64_t address_value,
                         UnresolvedReason why = UnresolvedReason::None, bool kernel_frame = false,
                         int32_t jit_symbol = -1, int32_t python_frame = -1)
      : address(address_value), module(module_index), jit(jit_symbol), python(python_frame), reason(why),
        kernel(kernel_frame) {}
  bool operator==(const CaptureFrame&) const = default;
  std::strong_ordering operator<=>(const CaptureFrame& o) const {
    return std::tie(module, address, reason, kernel, jit, python) <=>
           std::tie(o.module, o.address, o.reason, o.kernel, o.jit, o.python);
  }
};
static_assert(sizeof(CaptureFrame) == 24);

struct CaptureStack {
  uint32_t pid = 0;
  std::string comm;
  std::vector<CaptureFrame> frames;  // leaf first: kernel frames, then user frames
  bool truncated = false;            // the user-stack unwinder stopped early
  uint64_t count = 0;                // samples (off-CPU: waits)
  uint32_t tid = 0;                  // the sampled thread (0: unknown, version 1)
  // Off-CPU stacks (None: on-CPU samples): why the thread was off the CPU
  // and for how long in all, over `count` waits. The frames are where it
  // blocked: kernel frames leafward (schedule, ...), then user frames.
  OffCpuReason off_cpu = OffCpuReason::None;
  uint64_t off_cpu_ns = 0;
  // Waits shorter than the threshold, summed in the kernel per process and
  // reason: no frames, no tid.
  bool short_waits = false;
  // When each of the `count` samples was taken, in microseconds after the
  // capture's start (Capture::start_time_unix_ns), sorted; empty: not
  // recorded (the agent, short waits, older captures). Kept only with a
  // length of `count`.
  std::vector<uint64_t> times_us{};
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

// A CPython frame: the code object's qualified name and file, and the line
// its instruction was on, read from the process while it ran
// (python_runtime.h); a code object lives only in the recording process.
struct PythonFrame {
  std::string qualname;  // co_qualname: "Worker.run", "<module>", "<lambda>"
  std::string file;      // co_filename as the code object holds it
  uint32_t line = 0;     // 0: unknown
  bool operator==(const PythonFrame&) const = default;
  auto operator<=>(const PythonFrame&) const = default;
};

struct CaptureProcess {
  uint32_t pid = 0;
  std::string comm;
  std::vector<uint32_t> modules;  // indexes into Capture::modules
  // Live only, never in capture files: the agent's labels for the
  // process's samples ("process.executable.path", "container.id", ...).
  std::vector<std::pair<std::string, std::string>> labels{};
};

struct Capture {
  std::string host, kernel_release;
  uint32_t frequency_hz = 0;
  uint64_t start_time_unix_ns = 0;
  uint64_t duration_ns = 0;
  CallGraph call_graph = CallGraph::FramePointer;  // how stacks were unwound
  ProfileClock clock = ProfileClock::Cpu;          // what the stacks measure
  std::map<std::string, uint64_t> lost;   // samples lost, by reason
  // Samples kept with a stack the unwinder cut short, by reason
  // ("unwind_stack_copy_too_small", ...): reported, never lost.
  std::map<std::string, uint64_t> truncations;
  uint64_t samples = 0;                   // samples taken (stacks' counts sum)
  std::vector<CaptureModule> modules;
  std::vector<CaptureProcess> processes;
  std::vector<CaptureStack> stacks;
  CaptureKernel kernel;
  // What names JIT frames (CaptureFrame::jit): only the perf-map entries some
  // frame needs; a perf map lives in the recording machine's /tmp.
  std::vector<JitSymbol> jit_symbols;
  // What names Python frames (CaptureFrame::python): only those some frame
  // uses, sorted, no repeats (canonicalize).
  std::vector<PythonFrame> python_frames;
};

// What a stack weighs in `capture`'s unit: samples (clock Cpu), else
// nanoseconds: its off-CPU time, or its samples times the sampling period.
uint64_t stack_weight(const Capture& capture, const CaptureStack& stack);
// The unit of stack_weight: "samples" or "ns".
const char* weight_unit(const Capture& capture);

// Adds `from` to `into`: its modules, processes, stacks, JIT symbols,
// Python frames, kernel symbols, samples, losses and truncations (frames' indexes
// remapped), and the time it covers; then canonicalizes, which merges equal
// modules and stacks. Sample times move to `into`'s start (a time before
// it becomes 0). Both must measure the same clock. `into` empty: it
// takes `from`'s header (host, kernel, frequency, call graph, start).
// How the agent makes a window of its ticks, and a pull request's profile.
void merge_capture(Capture& into, Capture from);

// The stable names of the enums above, as capture files and reports write
// them ("fp", "dwarf"; "cpu", "off-cpu", "wall"; "process-exited"; "runqueue",
// "S", "D", ...); parse returns false on an unknown name.
const char* call_graph_name(CallGraph call_graph);
bool parse_call_graph(std::string_view name, CallGraph* call_graph);
const char* clock_name(ProfileClock clock);
bool parse_clock(std::string_view name, ProfileClock* clock);
const char* module_error_kind_name(ModuleErrorKind kind);
bool parse_module_error_kind(std::string_view name, ModuleErrorKind* kind);
const char* off_cpu_reason_name(OffCpuReason reason);
bool parse_off_cpu_reason(std::string_view name, OffCpuReason* reason);
// The frame an off-CPU stack ends in: "[off-cpu S]", "[runqueue]", ...
std::string off_cpu_frame_name(OffCpuReason reason);
// The frame that stands for the frames of summed short waits.
inline constexpr const char* kShortWaitsFrame = "[short waits]";

// The index of the mapping of `module` holding runtime address `runtime`, or -1.
int32_t mapping_holding(const CaptureModule& module, uint64_t runtime);
// The address `frame` had in its process: a module frame's unslid address
// plus the module's load bias; kernel, JIT and unknown frames as recorded.
uint64_t runtime_address(const Capture& capture, const CaptureFrame& frame);

// [lowest, highest + 1) of the kernel frames' addresses: the range of the
// one kernel mapping pprof and OTLP give them ({UINT64_MAX, 0 + 1}: none).
std::pair<uint64_t, uint64_t> kernel_address_range(const Capture& capture);

// Whether any stack of `capture` has a kernel frame.
bool has_kernel_frames(const Capture& capture);

// The symbol holding kernel address `address`, or nullptr.
const KernelSymbol* find_kernel_symbol(const CaptureKernel& kernel, uint64_t address);

// Puts a capture in canonical order so equal captures serialize to equal
// bytes: modules sorted by (path, build ID, load bias, mappings) with frame and
// process indexes remapped, processes sorted by pid, identical stacks merged
// (counts and off-CPU times added; sample times merged when both have them,
// else dropped) and stacks sorted by (pid, tid, comm, frames, truncated,
// off-CPU reason, short waits); each stack's times sorted, dropped unless
// there are `count` of them;
// kernel symbols sorted by start, duplicates dropped; JIT symbols and
// Python frames sorted, duplicates merged, unused ones dropped (frames' jit
// and python indexes remapped).
void canonicalize(Capture& capture);

// The stable names used for UnresolvedReason in capture files and reports
// ("no-mapping", "anonymous-mapping", ...); parse returns false on unknown.
const char* unresolved_reason_name(UnresolvedReason reason);
bool parse_unresolved_reason(std::string_view name, UnresolvedReason* reason);

}  // namespace gsymprof
