// tests/support/leaf_fixup.h - frame-pointer mode's leaf fix-up, kept as a
// test of the CFI row lookup at frame 0. Does the return address still sit on
// the stack at frame 0 (function entry, prologue before `mov %rsp,%rbp`,
// epilogue after `pop %rbp`, or a leaf that sets up no frame)? Then a
// frame-pointer walk skips the leaf's caller, and `caller_ip` is that missing
// frame. The profiler does not use it: `--call-graph fp` copies no stack to
// read the slot from, and `dwarf` unwinds such leaves by CFI anyway.
#pragma once

#include <cstdint>

#include "userspace/unwind/cfi_unwinder.h"

namespace gsymprof {

struct LeafFixup {
  enum class Kind : uint8_t {
    FramePointerFrame,  // CFA is %rbp-based: the frame-pointer walk is right
    ReturnAddressOnStack,  // CFA is %rsp-based: caller_ip is the missing caller
    Unknown,            // no module/CFI, or the slot is outside the copied bytes
  };
  Kind kind = Kind::Unknown;
  uint64_t caller_ip = 0;
};

// The kind comes from the module's .eh_frame row at the sampled IP; the caller
// is what `unwinder` recovers as frame 1.
LeafFixup leaf_fixup(CfiUnwinder& unwinder, const StackView& stack, const ModuleFinder& find_module);

}  // namespace gsymprof
