// userspace/events/events.h - stage: the one event contract between the
// sources (the live sampler, a perf.data file) and the capture assembler.
//
// A source turns what it reads into these plain values, in time order, and
// hands them to an EventSink: a sample's IPs (RawSample), or its registers
// and a copy of the top of its user stack for the CFI unwinder
// (RawStackCopy); and the side-band that explains them: exec, mapping, fork,
// exit; and what was lost, by reason. The assembler is the only sink that
// builds captures (assemble/capture_assembler.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "userspace/base/build_id.h"
#include "userspace/base/off_cpu_reason.h"

namespace gsymprof {

// One CPython interpreter frame as the sampler read it at sample time: its
// code object and instruction (bytes past co_code_adaptive) in the
// process's memory, named later from there (python_runtime.h).
struct PythonFrameRef {
  uint64_t code = 0;
  int32_t instr_offset = 0;
  // The eval loop was entered at this frame: the last (outermost) frame of
  // the run one native _PyEval_EvalFrameDefault call executed.
  bool entry = false;
  bool operator==(const PythonFrameRef&) const = default;
};

// What a source needs to read a CPython process's frames at sample time
// (bpf/profile.h's profile_python_process): where _PyRuntime is and the
// offsets of the version it runs (UINT32_MAX: a member it does not have). The assembler finds them; the live source
// walks with them.
struct PythonWalk {
  uint64_t runtime = 0;
  uint32_t runtime_tstate_current = 0, runtime_interpreters_head = 0, interp_threads_head = 0,
           tstate_next = 0, tstate_native_thread_id = 0, tstate_cframe = 0,
           cframe_current_frame = 0, frame_code = 0, frame_previous = 0, frame_prev_instr = 0,
           frame_is_entry = 0, frame_owner = 0, owned_by_cstack = 0, code_adaptive = 0;
  bool operator==(const PythonWalk&) const = default;
};

// The Python frames of a sample, leaf first (empty: none read).
struct PythonStackRef {
  std::span<const PythonFrameRef> frames;
  bool truncated = false;  // deeper than the sampler keeps: outermost frames missing
  bool unreadable = false;  // the walk stopped at a frame it could not read
};

// One sample as the sampler delivers it (views valid during the call).
struct RawSample {
  uint32_t pid = 0, tid = 0;
  std::string_view comm;
  // User frames, leaf first: frame 0's address is exact, the others are
  // return addresses (looked up at address - 1, inside the call). A frame
  // whose address is exact too (a signal trampoline, and the code a signal
  // interrupted) is given as address + 1.
  std::span<const uint64_t> ips;
  bool truncated = false;                // the unwinder stopped at its depth limit
  std::span<const uint64_t> kernel_ips;  // kernel frames, leaf first (leafward of ips)
  // The process image (ProcessTable id) the IPs were unwound against;
  // kNoImage: the pid's current one.
  uint32_t image = kNoImage;
  static constexpr uint32_t kNoImage = UINT32_MAX;
  // An off-CPU sample (--off-cpu, --wall): the stack the thread blocked in,
  // how long and why; reason None for a CPU sample.
  OffCpuWait off_cpu{};
  // When it was taken: live, CLOCK_MONOTONIC ns (the BPF record's
  // bpf_ktime_get_ns); perf.data, the sample's time in perf's clock
  // (CLOCK_MONOTONIC with perf record -k mono); 0: not told.
  uint64_t time_ns = 0;
  // A CPython process's interpreter frames at that moment (live only).
  PythonStackRef python{};
};

using SampleCallback = std::function<void(const RawSample&)>;

// The registers an x86-64 unwind needs at the sampled instruction.
struct UserRegisters {
  uint64_t ip = 0;
  uint64_t sp = 0;
  uint64_t bp = 0;
  bool operator==(const UserRegisters&) const = default;
};

// Borrowed view of one sample: registers plus the copied stack bytes, which
// hold the memory [stack_start, stack_start + stack.size()) of the process.
struct StackView {
  UserRegisters regs;
  uint64_t stack_start = 0;  // runtime address of stack[0] (normally regs.sp)
  std::span<const uint8_t> stack;
};

// One stack-copy sample as the sampler delivers it (--call-graph dwarf);
// views valid during the call.
struct RawStackCopy {
  uint32_t pid = 0, tid = 0;
  std::string_view comm;
  StackView stack;
  // The kernel stopped at an unreadable page of the live stack (not at the
  // size cap): the unwinder then reports unreadable memory, not a copy too small.
  bool copy_short = false;
  std::span<const uint64_t> kernel_ips;  // kernel frames, leaf first
  OffCpuWait off_cpu{};                  // as RawSample::off_cpu
  uint64_t time_ns = 0;                  // as RawSample::time_ns
  PythonStackRef python{};               // as RawSample::python
};

// Off-CPU waits too short for a stack of their own, summed by the kernel
// per thread and reason (--off-cpu-min-us).
struct RawShortWaits {
  uint32_t pid = 0, tid = 0;
  std::string_view comm;
  OffCpuReason reason = OffCpuReason::None;
  uint64_t ns = 0, count = 0;
};

// Side-band: a process mapped executable memory (mmap, or mprotect adding
// PROT_EXEC), as the kernel reported it; views valid during the call.
struct RawMapping {
  uint32_t pid = 0;
  uint64_t mm = 0;  // the address space, an opaque id (0: not told; exec is)
  uint64_t start = 0, end = 0, file_offset = 0;
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;  // 0: anonymous memory (JIT code) or the vDSO
  // When it was mapped (CLOCK_MONOTONIC ns): a file whose ctime is older was
  // not written since, so the file opened later is the one mapped.
  uint64_t time_ns = 0;
  bool readable = false, writable = false, shared = false;
  // Without execute permission (a recording's data mapping): a frame in it
  // is not code, whatever the file is.
  bool executable = true;
  bool vdso = false;
  // Mapped by the kernel's ELF loader at exec: the file's other code
  // segments were mapped with it (program headers).
  bool elf_loader = false;
  // The file's path in the mapping process's mount tree; complete only when
  // path_complete (else "" or its last components).
  std::string_view path;
  bool path_complete = false;
  bool deleted = false;  // unlinked before it was mapped (" (deleted)")
  // The file's build ID as a recording noted it (perf.data: MMAP2 with a
  // build ID, or its header's build-ID table); empty: not recorded.
  BuildId build_id;
};

// Where a source delivers events, in the order they happened. Handlers must
// be quick: the live sampler calls them inside its ring-buffer read.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_sample(const RawSample& sample) = 0;
  virtual void on_stack_copy(const RawStackCopy& copy) = 0;  // --call-graph dwarf
  virtual void on_short_waits(const RawShortWaits& waits) = 0;  // --off-cpu, --wall
  // `tgid` exec'd into address space `mm` (0: not told); its new mappings follow.
  virtual void on_exec(uint32_t tgid, uint64_t mm) = 0;
  // `tgid` mapped executable memory.
  virtual void on_mapping(const RawMapping& mapping) = 0;
  // `parent_tgid` forked a process (not a thread) that shares its image.
  virtual void on_fork(uint32_t parent_tgid, uint32_t child_tgid, uint64_t child_mm) = 0;
  // `tgid`'s main thread exited (its pid may be reused from now on).
  virtual void on_exit(uint32_t tgid) = 0;
  // `count` samples were lost for `reason` (a Capture::lost key).
  virtual void on_lost(std::string_view reason, uint64_t count) = 0;
};

}  // namespace gsymprof
