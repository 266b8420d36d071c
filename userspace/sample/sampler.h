// userspace/sample/sampler.h - stage: the kernel side, loaded and attached.
//
// Loads bpf/profile.bpf.c (the only user of its skeleton), attaches it to one
// cpu-clock perf event per online CPU at the chosen frequency, and delivers
// ring-buffer records to a EventSink as RawSample / exec notifications.
// Handlers must be quick: they run inside the ring-buffer poll. Records are
// decoded by ring_records.h, the kernel's side-band by perf_sideband.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/events/counters.h"
#include "userspace/events/events.h"

namespace gsymprof {

// How ring_buffer_bytes_for (below) sizes the ring: kRingBufferSeconds of
// every CPU's typical records, and kRingBufferMaxRecords of the largest per CPU.
inline constexpr double kRingBufferSeconds = 0.5;
inline constexpr size_t kRingBufferMaxRecords = 8;
struct RingSizing {
  double seconds = kRingBufferSeconds;      // of every CPU's typical records
  size_t max_records = kRingBufferMaxRecords;  // of the largest, per CPU
};
// The agent's: its rates are low (19 Hz), so seconds of records cost little
// and ride out longer stalls, while room for 8 of the largest records per
// CPU was most of its ring (16 MB of its RSS at 8 MiB while libbpf's reader
// mapped it twice; bpf_ring_reader.h maps it once).
inline constexpr RingSizing kAgentRingSizing{2.0, 2};

struct SamplerOptions {
  uint32_t frequency_hz = 99;
  bool filter_by_tgid = false;         // false: every process (whole system)
  std::vector<uint32_t> target_tgids;  // with filter_by_tgid
  bool follow_forks = true;            // children of targets become targets
  // With filter_by_tgid: sample target_tgids with an event per thread,
  // inherited (sampling_events.h), instead of an event per CPU. For running
  // processes (-p); a launched command's tree (-- CMD) keeps events per CPU,
  // which sample its short-lived processes fairly.
  bool per_thread_events = false;
  // A power of two; 0: sized by ring_buffer_bytes_for from the CPUs, the
  // rate and the record size.
  size_t ring_buffer_bytes = 0;
  RingSizing ring_sizing;  // with ring_buffer_bytes 0
  // --call-graph dwarf: send user registers + this many bytes of the user
  // stack (RawStackCopy) instead of frame-pointer IPs. 0 = frame pointers.
  uint32_t stack_copy_bytes = 0;
  // Kernel frames with each sample (bpf_get_stack without BPF_F_USER_STACK),
  // and kernel threads' samples; false: --user-callchains.
  bool kernel_stacks = true;
  // Timer samples of code on the CPU (false: --off-cpu alone).
  bool cpu_samples = true;
  // --off-cpu / --wall: a sample per wait of a target thread off the CPU,
  // sent when it runs again, if it waited at least off_cpu_min_ns (shorter
  // ones are summed: RawShortWaits); with off_cpu_runqueue (--wall), time
  // runnable but waiting for a CPU counts as a wait too.
  bool off_cpu = false;
  bool off_cpu_runqueue = false;
  uint64_t off_cpu_min_ns = 1000000;
  // Read CPython processes' interpreter frames with their samples (for the
  // processes set_python_process names).
  bool python_frames = true;
};

class Sampler {
 public:
  // Opens, configures, loads and attaches. Errors are one line.
  static gsym::Expected<std::unique_ptr<Sampler>> start(const SamplerOptions& options,
                                                        EventSink& sink);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Adds a target process (only meaningful with filter_by_tgid).
  gsym::Status add_target(uint32_t tgid);
  // The target processes now: those added and (following forks) their
  // descendants, including ones reparented when their parent exited.
  std::vector<uint32_t> targets() const;
  // Samples of `tgid` carry its Python frames, read as `walk` says;
  // forget_python_process stops that (exec, exit).
  gsym::Status set_python_process(uint32_t tgid, const PythonWalk& walk);
  void forget_python_process(uint32_t tgid);
  // Delivers pending records, waiting up to timeout_ms for the first one.
  // Returns the number of records delivered; EINTR counts as 0.
  gsym::Expected<int> poll(int timeout_ms);
  // Delivers everything still queued without waiting, and the short
  // off-CPU waits summed so far (RawShortWaits).
  gsym::Expected<int> drain();
  SamplerCounters counters() const;
  // Side-band events lost (one counter of counters()); 1 without a side-band.
  uint64_t sideband_lost() const;
  // What this kernel cannot do and what is lost, a line each (empty: all);
  // a line is added if sampling cannot change its events mid-session.
  const std::vector<std::string>& notices() const;
  // Whether the kernel's side-band records are read (false: /proc only).
  bool sideband_on() const;
  size_t ring_buffer_bytes() const;

  struct State;  // sampler.cpp's: the skeleton, rings, side-band

 private:
  gsym::Expected<int> drain_rings();
  void sample_every_cpu_once_targets_fork();
  explicit Sampler(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The ring buffer's size (a power of two) for `cpus` CPUs sampling at
// `frequency_hz` with records of `typical_record_bytes` on average and at
// most `max_record_bytes`: room for kRingBufferSeconds of every CPU's samples
// (the reader drains it every 10 ms, but on a busy machine it waits for a CPU
// and falls behind: 0.1-0.4 s stalls, once 1.8 s, were seen system-wide
// during a 2-job compile, where a quarter second of buffer dropped samples) and for kRingBufferMaxRecords of the largest
// records per CPU, within [kMinRingBufferBytes, kMaxRingBufferBytes].
inline constexpr size_t kMinRingBufferBytes = size_t{1} << 20;
inline constexpr size_t kMaxRingBufferBytes = size_t{256} << 20;
size_t ring_buffer_bytes_for(size_t cpus, uint32_t frequency_hz, size_t typical_record_bytes,
                             size_t max_record_bytes, RingSizing sizing = {});

// The record sizes `options` makes the kernel side send: {typical, largest}.
// A stack-copy record carries the live stack only; most are a few KiB (the
// tests/bench/README.md's Results have the measured means), so the typical size
// assumes 16 KiB, or the cap if smaller.
std::pair<size_t, size_t> record_bytes_for(const SamplerOptions& options);

// One BPF program as the verifier saw it under one configuration.
struct ProgramCost {
  std::string program;        // "sample_stack"
  std::string configuration;  // "frame pointers", "stack copy, -p filter", ...
  bool loaded = false;
  uint64_t verified_insns = 0;  // instructions the verifier processed (Linux 5.16+; 0: unknown)
  std::string error;            // why it did not load
};

// Loads (never attaches) every program in every configuration the sampler
// uses on this kernel, and reports what the verifier spent on each: what
// `gsymprof doctor` shows and the verifier-budget test checks.
std::vector<ProgramCost> measure_programs();

// Online CPUs from the text of /sys/devices/system/cpu/online ("0-3,6").
gsym::Expected<std::vector<int>> parse_cpu_list(const std::string& text);

}  // namespace gsymprof
