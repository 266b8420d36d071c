// userspace/session/profile_session.h - stage: targeting options -> Capture. Runs the
// whole sampling side (sampler, process table, aggregation) for `profile` and
// `record` alike; nothing here symbolizes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gsym/expected.h"
#include "userspace/aggregate/stack_aggregator.h"
#include "userspace/capture/capture.h"
#include "userspace/sample/sampler.h"
#include "userspace/session/target_options.h"

namespace gsymprof {

struct SessionOptions {
  TargetOptions targets;
  size_t ring_buffer_bytes = 0;  // 0: sized from CPUs, rate and record size (sampler.h)
  // Called while sampling runs, once per module (per process image) as soon
  // as a stack uses it: work on it may start early (GSYM prefetch). The
  // module is valid during the call only.
  std::function<void(const ProcessModule& module)> on_module_used;
};

struct SessionStats {
  SamplerCounters counters;
  uint64_t unique_raw_stacks = 0;
  uint64_t maps_reads = 0;            // /proc/PID/maps reads (first sight, dlopen)
  std::string stop_reason;            // "duration", "interrupted", "targets exited"
  int command_exit_status = -1;       // wait status of the launched command, -1 if none
  JitReport jit;                      // JIT frames named from perf maps, and not
  uint64_t frame_pointer_steps = 0;   // dwarf: frames the CFI unwinder reached by frame pointer
  uint64_t frame_pointer_stacks = 0;  // dwarf: stacks with such frames
  size_t ring_buffer_bytes = 0;       // the size the sampler chose
};

// Samples until the duration elapses, SIGINT/SIGTERM arrives, or every
// target has exited. Errors (one line): bad pid, BPF unavailable, command
// cannot be started. Capture::lost holds every loss counter by name.
gsym::Expected<Capture> run_sampling_session(const SessionOptions& options,
                                             SessionStats* stats = nullptr);

// Capture::lost holds the sampler's losses by name (sample/counters.h);
// --call-graph dwarf adds "unwind_<reason>" counters (stack_copy_unwind.h):
// samples kept, but whose stack the CFI unwinder had to cut short.
inline constexpr const char* kTruncatedByUnwinderPrefix = "unwind_";

// Prints the sampling part of the end-of-run summary on stderr, the same for
// profile and record: samples taken, recorded and lost, then print_losses.
void print_sampling_summary(const Capture& capture, const SessionStats& stats);

// The losses of a capture, from Capture::lost and its stacks' truncated
// flags: taken before the stacks are freed (render's free_stacks).
struct LossSummary {
  uint64_t lost = 0;       // samples lost: every reason but unwind_* (those were kept)
  uint64_t truncated = 0;  // samples whose stack the unwinder cut short
  std::string lost_reasons, truncation_reasons;  // "REASON N, ..."
  std::string kernel_problem;  // why the kernel frames have no names ("" = named, or none)
  std::string fixes;  // truncations a flag fixes, with the flag ("" = none)
  // Samples with a process-gone frame: their process exited before its
  // maps could be read (the module-level case is a module report).
  uint64_t exited_samples = 0, exited_processes = 0;
};
LossSummary summarize_losses(const Capture& capture);

// The two loss lines of every summary (profile, record, and symbolize of a
// capture or a perf.data file):
//   gsymprof: lost by reason: REASON N, ...
//   gsymprof: truncated stacks: N (unwind_REASON N, ...)
//   gsymprof: to unwind them further: N stacks are deeper than ...: FLAG
// and, when the kernel frames could not be named:
//   gsymprof: kernel frames are not named: WHY
// and, when some process was gone before its maps were read:
//   gsymprof: N samples of P processes that exited before their maps could be read: frames [unknown]
void print_losses(const LossSummary& losses);

}  // namespace gsymprof
