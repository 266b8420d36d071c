#include "userspace/session/live_session.h"

#include <sys/utsname.h>

#include <chrono>

namespace gsymprof {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) { g_stop_signal = signal; }

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

bool stop_requested() { return g_stop_signal != 0; }

uint64_t unix_time_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

SamplerOptions sampler_options_for(const TargetOptions& targets, size_t ring_buffer_bytes) {
  SamplerOptions sampler_options;
  sampler_options.frequency_hz = targets.frequency_hz;
  sampler_options.filter_by_tgid = !targets.whole_system();
  sampler_options.target_tgids = targets.pids;
  sampler_options.per_thread_events = !targets.pids.empty() && targets.command.empty();
  sampler_options.ring_buffer_bytes = ring_buffer_bytes;
  if (targets.call_graph == CallGraph::Dwarf) sampler_options.stack_copy_bytes = targets.stack_copy_bytes;
  sampler_options.kernel_stacks = targets.kernel_stacks;
  sampler_options.cpu_samples = targets.clock != ProfileClock::OffCpu;
  sampler_options.off_cpu = targets.clock != ProfileClock::Cpu;
  sampler_options.off_cpu_runqueue = targets.clock == ProfileClock::Wall;
  sampler_options.off_cpu_min_ns = uint64_t{targets.off_cpu_min_us} * 1000;
  return sampler_options;
}

Capture new_capture(const TargetOptions& targets) {
  Capture capture;
  capture.frequency_hz = targets.frequency_hz;
  capture.call_graph = targets.call_graph;
  capture.clock = targets.clock;
  struct utsname host {};
  if (uname(&host) == 0) {
    capture.host = host.nodename;
    capture.kernel_release = host.release;
  }
  return capture;
}

void report_losses(const SamplerCounters& counters, EventSink& sink, const SamplerCounters& before) {
  for (uint32_t c = 0; c < PROFILE_COUNTER_COUNT; ++c) {
    const CounterInfo info = counter_info(static_cast<enum profile_counter>(c));
    if (info.kind == CounterKind::Lost) sink.on_lost(info.name, counters.kernel[c] - before.kernel[c]);
  }
  sink.on_lost(kLostBadRecords, counters.bad_records - before.bad_records);
}

void read_python_frames(CaptureAssembler& assembler, Sampler* sampler) {
  PythonStacks& python = assembler.python();
  if (!sampler) {
    python.on_found = nullptr;
    python.on_gone = nullptr;
    return;
  }
  // A process the sampler cannot take stays native; its stacks say so
  // (no Python frames), nothing is misnamed.
  python.on_found = [sampler](uint32_t pid, const PythonWalk& walk) { (void)sampler->set_python_process(pid, walk); };
  python.on_gone = [sampler](uint32_t pid) { sampler->forget_python_process(pid); };
}

void snapshot_processes(CaptureAssembler& assembler, const std::vector<uint32_t>& pids) {
  for (uint32_t pid : pids) assembler.python().note_image(assembler.processes().current_image(pid));
}

}  // namespace gsymprof
