// userspace/unwind/epilogue.h - how a frame returns, read from its code: the
// x86-64 instructions at a return address, decoded forward up to `ret`.
//
// For code that has neither CFI nor a frame pointer (CPython 3.12+'s -X perf
// trampolines: sub $8,%rsp; call *%rcx; add $8,%rsp; ret), what the code
// does to return is exact where a frame-pointer guess is not: decoding
// forward is unambiguous, and only straight-line instructions whose effect on
// the stack pointer and the callee-saved registers is known are accepted
// (stack adjustments, pops, leave, register moves, nops). Anything else (a
// branch, a memory access, a call) means "not an epilogue": nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace gsymprof {

struct EpilogueStep {
  // What the stack addresses below are relative to: the stack pointer at the
  // return address, or (after `leave` / `mov %rbp,%rsp`) the frame pointer.
  enum class Base : uint8_t { Rsp, Rbp };
  struct Pop {
    int reg = 0;  // DWARF x86-64 register number (rbx 3, rbp 6, r12..r15 12..15)
    Base base = Base::Rsp;
    int64_t offset = 0;  // the register's saved value is at base + offset
  };
  Base base = Base::Rsp;
  int64_t return_slot = 0;  // the return address is at base + return_slot
  std::vector<Pop> pops;    // registers restored on the way, in order
  size_t instructions = 0;  // decoded, `ret` included
};

// The longest epilogue decoded, in instructions; and the code bytes worth
// reading for one.
inline constexpr size_t kMaxEpilogueInstructions = 16;
inline constexpr size_t kEpilogueCodeBytes = 64;

// Decodes `code`, the bytes at a return address, up to the `ret` that ends
// the frame; nullopt when they are not a plain epilogue, or run out first.
std::optional<EpilogueStep> decode_epilogue(std::span<const uint8_t> code);

}  // namespace gsymprof
