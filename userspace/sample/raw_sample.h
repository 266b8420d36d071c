// userspace/sample/raw_sample.h - what the sampler delivers: a sample's
// frame-pointer IPs (RawSample), or its registers and a copy of the top of
// its user stack for the CFI unwinder (RawStackCopy). The unwinder turns the
// second into the first.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace gsymprof {

// One sample as the sampler delivers it (views valid during the call).
struct RawSample {
  uint32_t pid = 0, tid = 0;
  std::string_view comm;
  std::span<const uint64_t> ips;         // user frames, leaf first
  bool truncated = false;                // the unwinder stopped at its depth limit
  std::span<const uint64_t> kernel_ips;  // kernel frames, leaf first (leafward of ips)
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
};

}  // namespace gsymprof
