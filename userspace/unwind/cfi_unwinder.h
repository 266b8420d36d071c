// userspace/unwind/cfi_unwinder.h - unwinds a copied user stack with the modules'
// DWARF CFI (.eh_frame, else .debug_frame), for code built without frame
// pointers. x86-64 only.
//
// Input: a StackView (raw_sample.h: registers IP/SP/BP + a copy of the top of
// the stack) and a ModuleFinder (stack_snapshot.h). Output: the IP list the
// frame-pointer path produces (leaf first: the sampled IP, then return
// addresses, all runtime addresses, not yet adjusted by -1) and why the walk
// stopped.
//
// Safety on garbage: memory is read ONLY from the copied bytes, CFA and
// register expressions run on a bounded stack with a bounded op count, the
// depth is bounded, and the stack pointer must strictly increase from frame
// to frame (else: Loop). A module's file is used only if its build ID matches.
// JIT code may come with the CFI its runtime wrote (UnwindModule::jit),
// read from memory once placed and checked (jit_eh_frame.h); where that CFI
// takes no step, the code is treated as having none.
// Where no CFI covers a PC, the code there may say how its frame returns
// (epilogue.h: read through a CodeReader, when one is given), else the frame
// pointer may take one step (UnwindOptions::frame_pointer_fallback); the stop
// reasons NoModule and NoCfi then mean that none worked.
//
// Thread safety: CfiUnwinder may be shared by threads; its CFI cache is
// guarded by one mutex held for each whole unwind (libdw's CFI caches are
// filled lazily and are not thread-safe).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "userspace/events/events.h"
#include "userspace/unwind/stack_snapshot.h"

namespace gsymprof {

enum class UnwindStop : uint8_t {
  Complete,           // reached the outermost frame (return address undefined or
                      // 0, or code without CFI at and after the ELF entry point)
  StackCopyTooSmall,  // needed bytes above the end of the copied stack
  NoCfi,              // the module has no CFI, or none covers the address
  NoModule,           // the address lies in no known module (JIT, anonymous, garbage)
  UnreadableMemory,   // needed bytes below the copy, or a register not recovered
  BadCfi,             // a CFI rule the unwinder cannot evaluate
  DepthLimit,         // max_frames reached
  Loop,               // the stack pointer did not increase
};
inline constexpr size_t kUnwindStopCount = 8;
// Stable lower-case names, used as loss-counter keys: "stack copy too small", ...
const char* to_string(UnwindStop stop);

struct UnwindOptions {
  // Deep enough for any stack a full copy holds in practice (a 256 KiB copy
  // of 1 KiB frames is 256 frames; clang's parser recursion passes 400).
  size_t max_frames = 2048;
  // Where no CFI covers a PC (JIT code, assembly), step to the caller by the
  // frame pointer when rbp looks like a frame of the copied stack, as
  // `perf -g` does; counted in UnwindResult::frame_pointer_steps.
  bool frame_pointer_fallback = true;
};

struct UnwindResult {
  std::vector<uint64_t> ips;  // leaf first, runtime addresses
  // Per frame: 1 when its address is exact (frame 0, a signal trampoline,
  // and the frame a signal interrupted), 0 for a return address.
  std::vector<uint8_t> exact;
  UnwindStop stop = UnwindStop::Complete;
  uint32_t frame_pointer_steps = 0;  // callers found by the frame-pointer fallback
  uint32_t epilogue_steps = 0;       // callers found by decoding a frame's return
  uint32_t jit_cfi_steps = 0;        // callers found by the CFI a JIT runtime wrote for its code
  bool truncated() const { return stop != UnwindStop::Complete; }
};

struct CfiCacheStats {
  uint64_t modules_opened = 0;  // distinct modules whose CFI was loaded
  uint64_t modules_failed = 0;  // distinct modules with no usable CFI
  uint64_t jit_code_loaded = 0;    // JIT code whose runtime's .eh_frame was placed and read
  uint64_t jit_code_rejected = 0;  // JIT code whose .eh_frame was refused (jit_eh_frame.h)
  std::string jit_code_rejection;  // why the first was refused
};

class CfiUnwinder {
 public:
  explicit CfiUnwinder(UnwindOptions options = {});
  ~CfiUnwinder();
  CfiUnwinder(const CfiUnwinder&) = delete;
  CfiUnwinder& operator=(const CfiUnwinder&) = delete;

  // Unwinds into `out` (its vector's capacity is reused across calls).
  // `read_code`, when given, reads the code at an address without CFI.
  void unwind(const StackView& stack, const ModuleFinder& find_module, UnwindResult& out,
              const CodeReader& read_code = {});
  UnwindResult unwind(const StackView& stack, const ModuleFinder& find_module);

  // Why a module's CFI could not be used ("" when it loaded or was never tried).
  std::string module_error(const UnwindModule& module);
  CfiCacheStats stats() const;
  // Drops every module's parsed CFI (the agent, once a minute: modules of
  // processes gone must not stay loaded for the uptime).
  void forget_modules();
  // Drops one module's CFI (JIT code its runtime freed or its process left).
  void forget_module(const UnwindModule& module);

  struct ModuleCfi;  // parsed CFI of one module (cfi_unwinder.cpp)

 private:
  ModuleCfi* cfi_for(const UnwindModule& module);  // caller holds mutex_
  ModuleCfi* cfi_for_key(const UnwindModule& module);  // the same, without recent_cfi_

  UnwindOptions options_;
  mutable std::mutex mutex_;
  // Loaded CFI keyed by build ID bytes (by path for modules without one);
  // failures keyed by build ID and path.
  std::map<std::string, std::unique_ptr<ModuleCfi>> cache_;
  CfiCacheStats stats_;
  // Decoded CFI rows cached over all modules (a few hundred bytes each);
  // past the bound every module's rows are dropped and decoded again.
  static constexpr size_t kMaxCachedRows = 32768;
  size_t rows_cached_ = 0;
  // The last modules whose CFI loaded, copied (cfi_for).
  std::array<std::pair<UnwindModule, ModuleCfi*>, 4> recent_cfi_{};
  size_t recent_cfi_next_ = 0;
};

}  // namespace gsymprof
