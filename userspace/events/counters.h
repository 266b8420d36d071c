// userspace/events/counters.h - the sampler's counters: bpf/profile.h's enum
// profile_counter is the one list; this is its one name table, and the names
// are the keys of Capture::lost (capture-format.md).
#pragma once

#include <array>
#include <cstdint>

#include "bpf/profile.h"

namespace gsymprof {

enum class CounterKind {
  Total,  // every sample of a target task, before any loss
  Lost,   // samples that never reached user space: a Capture::lost entry
  Kept,   // samples kept, with a stack cut short (reported with the stacks)
  Info,   // samples kept whole, counted for the summary (kernel threads)
  Sideband,  // side-band events (mmap/fork/exec/exit) lost: not samples, but
             // mappings then learnt by re-reading /proc (summary line)
};

struct CounterInfo {
  const char* name;
  CounterKind kind;
};

// A switch without default: a counter added to the enum without a name here
// fails to compile (-Wswitch under -Werror).
constexpr CounterInfo counter_info(enum profile_counter counter) {
  switch (counter) {
    case PROFILE_COUNTER_SAMPLES: return {"samples", CounterKind::Total};
    case PROFILE_COUNTER_RINGBUF_FULL: return {"ringbuf_full", CounterKind::Lost};
    case PROFILE_COUNTER_STACK_ERROR: return {"stack_error", CounterKind::Lost};
    case PROFILE_COUNTER_NO_USER_STACK: return {"no_user_stack", CounterKind::Lost};
    case PROFILE_COUNTER_TRUNCATED: return {"truncated", CounterKind::Kept};
    case PROFILE_COUNTER_SIDEBAND_LOST: return {"sideband_events", CounterKind::Sideband};
    case PROFILE_COUNTER_STACK_COPY_SHORT: return {"stack_copy_short", CounterKind::Kept};
    case PROFILE_COUNTER_KERNEL_STACK_ERROR: return {"kernel_stack_error", CounterKind::Kept};
    case PROFILE_COUNTER_KERNEL_TRUNCATED: return {"kernel_stack_truncated", CounterKind::Kept};
    case PROFILE_COUNTER_KERNEL_THREAD: return {"kernel_thread_samples", CounterKind::Info};
    case PROFILE_COUNTER_OFF_CPU_UNTRACKED: return {"off_cpu_untracked", CounterKind::Lost};
    case PROFILE_COUNTER_SHORT_WAITS: return {"short_waits", CounterKind::Info};
    case PROFILE_COUNTER_SHORT_WAITS_LOST: return {"short_waits_lost", CounterKind::Lost};
    case PROFILE_COUNTER_PYTHON_NO_THREAD: return {"python_no_thread_state", CounterKind::Kept};
    case PROFILE_COUNTER_PYTHON_LOST: return {"python_frames_lost", CounterKind::Kept};
    case PROFILE_COUNTER_COUNT: break;
  }
  return {"?", CounterKind::Kept};
}

// Records user space could not decode: lost, counted beside the kernel's.
inline constexpr const char* kLostBadRecords = "bad_records";

// The kernel's counters summed over CPUs, plus user space's own.
struct SamplerCounters {
  std::array<uint64_t, PROFILE_COUNTER_COUNT> kernel{};  // indexed by enum profile_counter
  uint64_t bad_records = 0;
  // Sample records read from the ring buffer and their bytes (headers
  // included): what the kernel side costs the buffer per sample.
  uint64_t sample_records = 0, sample_record_bytes = 0;
  uint64_t operator[](enum profile_counter counter) const { return kernel[counter]; }
  uint64_t samples() const { return kernel[PROFILE_COUNTER_SAMPLES]; }
};

}  // namespace gsymprof
