// userspace/session/live_session.h - what every live session shares, the
// one-shot `profile`/`record` (profile_session.h) and the `agent`
// (agent_session.h): stopping on a signal, the sampler's options from the
// targeting flags, a capture's header, and the sampler's losses handed to
// the assembler.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "userspace/assemble/capture_assembler.h"
#include "userspace/capture/capture.h"
#include "userspace/events/counters.h"
#include "userspace/events/events.h"
#include "userspace/sample/sampler.h"
#include "userspace/session/target_options.h"

namespace gsymprof {

// Installs SIGINT/SIGTERM handlers for its lifetime, without SA_RESTART so a
// blocking poll returns early; stop_requested() says whether one came.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};
bool stop_requested();

uint64_t unix_time_ns();

// The sampler's options for `targets` (ring_buffer_bytes 0: sized by the sampler).
SamplerOptions sampler_options_for(const TargetOptions& targets, size_t ring_buffer_bytes);

// A capture with the facts known before sampling: host, kernel, settings.
Capture new_capture(const TargetOptions& targets);

// Capture::lost: the sampler's losses by name, `counters` less `before`
// (a window's share of counters that only grow); the CFI unwinder's cut
// stacks go to Capture::truncations (CaptureAssembler::build).
void report_losses(const SamplerCounters& counters, EventSink& sink, const SamplerCounters& before = {});

// CPython processes' frames: the assembler finds which processes run a
// CPython it knows the layout of, and the sampler reads their frames from
// then on; with `sampler` nullptr (it is gone), that stops.
void read_python_frames(CaptureAssembler& assembler, Sampler* sampler);
// The images of processes that exist before sampling: read now (they may
// exit first), and their CPython runtimes found before their first sample.
void snapshot_processes(CaptureAssembler& assembler, const std::vector<uint32_t>& pids);

}  // namespace gsymprof
