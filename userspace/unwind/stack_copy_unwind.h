// userspace/unwind/stack_copy_unwind.h - stage (--call-graph dwarf): a copied user
// stack (RawStackCopy, from the sampler) -> the IP list the frame-pointer path
// produces (RawSample), unwound with CFI (cfi_unwinder.h) while the process's
// modules are known. Everything after it (aggregation, normalization, capture)
// is the same for both call-graph modes.
//
// A walk that reaches an address outside every known mapping (a library
// mapped after the maps were last read, e.g. while the dynamic loader ran)
// is held, with a copy of its stack, until the process's maps are read again
// (ProcessTable rate-limits re-reads), then unwound again; flush() settles
// whatever is still held at the end of a session.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "userspace/unwind/cfi_unwinder.h"
#include "userspace/unwind/epilogue.h"
#include "userspace/process/perf_map.h"
#include "userspace/process/process_image.h"
#include "userspace/events/events.h"
#include "userspace/unwind/stack_snapshot.h"

namespace gsymprof {

// The Capture::lost key of a stack the CFI unwinder cut short for `stop`
// ("unwind_stack_copy_too_small"), for live profiles and perf.data alike.
std::string unwind_stop_loss_key(UnwindStop stop);

class StackCopyUnwinder {
 public:
  // `jit_code` (optional, outlives this): where JIT code's CFI is found.
  explicit StackCopyUnwinder(ProcessTable& processes, UnwindOptions options = {}, PerfMaps* jit_code = nullptr);

  // Unwinds `copy` with the modules of its process's current image and
  // passes the sample to `emit` (now, or later from a call of unwind() or
  // flush()). Views passed to `emit` are valid during the call only.
  void unwind(const RawStackCopy& copy, const SampleCallback& emit);
  // Retries every held walk one last time and emits it, finished or not.
  void flush(const SampleCallback& emit);

  // Stacks that ended early, by reason: "unwind_stack_copy_too_small", ...
  // (the UnwindStop names, '_'-joined, lower case); complete ones not counted.
  std::map<std::string, uint64_t> truncations() const;
  uint64_t stacks() const { return stacks_; }
  // The agent's next window: counts start again (truncations, stacks).
  void reset_counts();
  // After ProcessTable::compact (image ids renumbered): forgets the modules
  // found per image. Nothing may be held (flush first).
  void forget_images() {
    last_ = {};
    modules_.clear();
    code_.clear();
    jit_modules_.clear();
    jit_module_bytes_ = 0;
    unwinder_.forget_modules();
  }
  // `pid` exec'd or exited: the CFI of its JIT code is dropped (read again
  // from its dump if a later walk needs it).
  void forget_jit_code(uint32_t pid);
  // Frames reached by the frame-pointer fallback (cfi_unwinder.h), and the
  // stacks that have any.
  uint64_t frame_pointer_steps() const { return frame_pointer_steps_; }
  uint64_t frame_pointer_stacks() const { return frame_pointer_stacks_; }
  // Frames reached by decoding how the code without CFI returns (epilogue.h).
  uint64_t epilogue_steps() const { return epilogue_steps_; }
  // Frames reached by the CFI a JIT runtime wrote (jitdump unwinding info).
  uint64_t jit_cfi_steps() const { return jit_cfi_steps_; }
  // JIT code whose CFI was read, or refused (and why the first was).
  CfiCacheStats cfi_stats() const { return unwinder_.stats(); }
  uint64_t retried() const { return retried_; }

  // Most walks held at once, and most stack bytes they hold (a copy is up
  // to 1 MiB); beyond either, a walk is emitted as is (counted by its stop).
  static constexpr size_t kMaxHeld = 256;
  static constexpr size_t kMaxHeldBytes = size_t{16} << 20;
  // JIT code whose CFI is kept at most, and its bytes; past either, all of
  // it is dropped before the next walk (and read again as walks need it).
  static constexpr size_t kMaxJitModules = 4096;
  static constexpr size_t kMaxJitModuleBytes = size_t{64} << 20;
  size_t held_bytes() const { return held_bytes_; }

 private:
  struct Held {
    uint32_t image = 0, pid = 0, tid = 0;
    std::string comm;
    UserRegisters regs;
    uint64_t stack_start = 0;
    std::vector<uint8_t> stack;
    std::vector<uint64_t> kernel_ips;
    bool copy_short = false;
    OffCpuWait off_cpu;
    uint64_t time_ns = 0;  // when it was taken: a held walk is emitted later
    std::vector<PythonFrameRef> python;
    bool python_truncated = false, python_unreadable = false;
  };
  // Unwinds into result_; returns whether it stopped at an address outside
  // every mapping of the image (worth another try after a maps re-read).
  bool walk(uint32_t image, const StackView& stack, bool copy_short);
  // The sample of result_, with the fields of the copy it was unwound from.
  struct Origin {
    uint32_t image = 0, pid = 0, tid = 0;
    std::string_view comm;
    std::span<const uint64_t> kernel_ips;
    OffCpuWait off_cpu;
    uint64_t time_ns = 0;
    PythonStackRef python{};
  };
  void emit_result(const Origin& origin, const SampleCallback& emit);
  void retry_held(const SampleCallback& emit, bool final);
  // The module at `addr`; a file's module also gives its mapping's range in
  // `map_range` (left alone for JIT code and misses).
  const UnwindModule* find_module(uint32_t image, uint64_t addr, std::pair<uint64_t, uint64_t>& map_range);
  // The JIT code at `addr` with its runtime's CFI, or nullptr.
  const UnwindModule* jit_module(uint32_t image, uint64_t addr);
  void forget_jit_modules_over_bounds();
  // The code of image `image` at `addr` (CodeReader), read from the process
  // once per address and kept (a CPython trampoline returns to the same
  // places all session long); bounded by kMaxCodeEntries.
  std::span<const uint8_t> read_code(uint32_t image, uint64_t addr);

  ProcessTable& processes_;
  CfiUnwinder unwinder_;
  UnwindResult result_;
  std::vector<uint64_t> ips_;  // result_.ips in RawSample's form (emit_result)
  // (image id, module index) -> how to read that module's CFI.
  std::map<std::pair<uint32_t, int32_t>, UnwindModule> modules_;
  // The file mapping the last walk found a module in (walk).
  struct LastModule {
    uint32_t image = 0;
    std::pair<uint64_t, uint64_t> range{0, 0};
    const UnwindModule* module = nullptr;  // into modules_
    uint64_t map_reads = 0;
  } last_;
  struct Code {
    std::array<uint8_t, kEpilogueCodeBytes> bytes{};
    uint8_t size = 0;
  };
  static constexpr size_t kMaxCodeEntries = 4096;
  std::map<std::pair<uint32_t, uint64_t>, Code> code_;  // (image id, address)
  PerfMaps* jit_code_ = nullptr;
  // A piece of JIT code as the dump describes it where it is now.
  struct JitKey {
    uint32_t pid = 0, image = 0;
    uint64_t start = 0, end = 0, code_index = 0, moved_by = 0, unwind_bytes = 0;
    auto operator<=>(const JitKey&) const = default;
  };
  std::map<JitKey, UnwindModule> jit_modules_;
  size_t jit_module_bytes_ = 0;
  uint64_t next_jit_serial_ = 1;
  std::vector<Held> held_;
  size_t held_bytes_ = 0;  // stack bytes of held_
  bool can_hold(size_t stack_bytes) const {
    return held_.size() < kMaxHeld && held_bytes_ + stack_bytes <= kMaxHeldBytes;
  }
  uint64_t maps_reads_at_hold_ = 0;
  std::array<uint64_t, kUnwindStopCount> stops_{};
  uint64_t stacks_ = 0, retried_ = 0;
  uint64_t frame_pointer_steps_ = 0, frame_pointer_stacks_ = 0, epilogue_steps_ = 0, jit_cfi_steps_ = 0;
};

}  // namespace gsymprof
