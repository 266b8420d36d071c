// userspace/base/off_cpu_reason.h - why a thread was off the CPU, from the
// kernel's task state when it was switched out. Shared by the events a
// source delivers and the captures built from them.
#pragma once

#include <cstdint>

namespace gsymprof {

// An on-CPU sample has None.
enum class OffCpuReason : uint8_t {
  None = 0,
  Runqueue,   // preempted or yielding, still runnable: waiting for a CPU
  Sleep,      // S: interruptible sleep (futex, poll, nanosleep, pipe, socket)
  DiskSleep,  // D: uninterruptible (I/O, some locks)
  Idle,       // I: uninterruptible without load (an idle kernel thread)
  Stopped,    // T: stopped by a signal
  Traced,     // t: stopped by a tracer
  Other,      // a state not named above (parked, ...)
};

// The reason for a switch-out in `task_state` (the kernel's TASK_* bits,
// stable since Linux 2.6: 1 interruptible, 2 uninterruptible, 4 stopped,
// 8 traced, 0x400 no-load), or Runqueue when `preempted` (or the state is
// TASK_RUNNING: it gave up the CPU without blocking).
constexpr OffCpuReason off_cpu_reason(uint32_t task_state, bool preempted) {
  if (preempted || task_state == 0) return OffCpuReason::Runqueue;
  if (task_state & 0x2) return task_state & 0x400 ? OffCpuReason::Idle : OffCpuReason::DiskSleep;
  if (task_state & 0x1) return OffCpuReason::Sleep;
  if (task_state & 0x4) return OffCpuReason::Stopped;
  if (task_state & 0x8) return OffCpuReason::Traced;
  return OffCpuReason::Other;
}

// A sample's time off the CPU: none for an on-CPU sample.
struct OffCpuWait {
  OffCpuReason reason = OffCpuReason::None;
  uint64_t ns = 0;  // how long the thread was away
  bool operator==(const OffCpuWait&) const = default;
};

}  // namespace gsymprof
