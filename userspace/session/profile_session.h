// userspace/session/profile_session.h - stage: targeting options -> Capture. Runs the
// whole sampling side (sampler, process table, aggregation) for `profile` and
// `record` alike; nothing here symbolizes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/assemble/stack_aggregator.h"
#include "userspace/capture/capture.h"
#include "userspace/sample/sampler.h"
#include "userspace/session/target_options.h"

namespace gsymprof {

struct SessionOptions {
  TargetOptions targets;
  size_t ring_buffer_bytes = 0;  // 0: sized from CPUs, rate and record size (sampler.h)
  // Keep each sample's time in the capture (CaptureStack::times_us): the
  // heatmap's input.
  bool sample_times = false;
  // Called while sampling runs, once per module (per process image) as soon
  // as a stack uses it: work on it may start early (GSYM prefetch). The
  // module is valid during the call only.
  std::function<void(const ProcessModule& module)> on_module_used;
  // Called once sampling started, before the first sample, with what this
  // kernel cannot do and what is lost (Sampler::notices; may be empty).
  std::function<void(const std::vector<std::string>& notices)> on_started;
  // Called about twice a second while sampling runs, with the samples
  // received so far and the seconds since sampling started (a live line).
  std::function<void(uint64_t samples, double elapsed_s)> on_progress;
};

struct SessionStats {
  SamplerCounters counters;
  uint64_t unique_raw_stacks = 0;
  uint64_t maps_reads = 0;            // /proc/PID/maps reads (first sight, dlopen)
  std::string stop_reason;            // "duration", "interrupted", "targets exited"
  int command_exit_status = -1;       // wait status of the launched command, -1 if none
  bool command_stopped = false;       // gsymprof ended it (-d elapsed, Ctrl-C): SIGTERM, then SIGKILL
  std::string command_name;           // the launched command's argv[0]
  JitReport jit;                      // JIT frames named from perf maps, and not
  PythonReport python;                // CPython processes' frames: merged, kept native
  uint64_t frame_pointer_steps = 0;   // dwarf: frames the CFI unwinder reached by frame pointer
  uint64_t frame_pointer_stacks = 0;  // dwarf: stacks with such frames
  uint64_t epilogue_steps = 0;        // dwarf: frames reached by decoding how code without CFI returns
  uint64_t jit_cfi_steps = 0;         // dwarf: frames reached by the CFI a JIT runtime wrote (jitdump)
  uint64_t jit_cfi_rejected = 0;      // dwarf: pieces of JIT code whose .eh_frame was refused
  std::string jit_cfi_rejection;      // why the first was
  size_t ring_buffer_bytes = 0;       // the size the sampler chose
  std::vector<uint32_t> kernel_threads;  // the -p targets that are kernel threads (no user stack)
  // What this kernel cannot do and what is lost, a line each
  // (Sampler::notices): the features turned off for this session.
  std::vector<std::string> features_off;
};

// Samples until the duration elapses, SIGINT/SIGTERM arrives, or every
// target has exited. Errors (one line): bad pid, BPF unavailable, command
// cannot be started. Capture::lost holds every loss counter by name.
gsym::Expected<Capture> run_sampling_session(const SessionOptions& options,
                                             SessionStats* stats = nullptr);

}  // namespace gsymprof
