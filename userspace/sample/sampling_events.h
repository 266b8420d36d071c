// userspace/sample/sampling_events.h - job: the cpu-clock perf events the
// sampling program runs on.
//
// An event per online CPU, or an event per thread of a process, which the
// threads and processes it starts inherit: then a CPU is interrupted only
// while the process runs on it. An event per CPU interrupts every CPU at the
// rate, idle or running anything else; a sampling interrupt costs the CPU
// about 20 us on this project's VMs, so at 9999 Hz a loop on another CPU ran
// 1.26x slower while a sleeping process was profiled (tests/bench/README.md,
// Bystanders). But an inherited event starts a whole period at each new
// process, so processes that run less than a period are never sampled: the
// sampler uses events per thread for -p targets only until one starts a
// process (sampler.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gsym/base/expected.h"

struct bpf_link;
struct bpf_program;

namespace gsymprof {

// Above this many threads in the targets, an event per CPU costs less than
// one per thread (each holds two descriptors, a perf event and a BPF link).
inline constexpr size_t kMaxThreadEvents = 256;

class SamplingEvents {
 public:
  SamplingEvents(bpf_program* program, uint32_t frequency_hz);
  ~SamplingEvents();
  SamplingEvents(const SamplingEvents&) = delete;
  SamplingEvents& operator=(const SamplingEvents&) = delete;

  // An event per CPU in `cpus` (a CPU gone offline meanwhile is skipped);
  // with `enabled` false they wait for enable().
  gsym::Status attach_cpus(const std::vector<int>& cpus, bool enabled = true);
  gsym::Status enable();
  // An event per thread of `tgid` (its /proc/TGID/task now), inherited by
  // every thread and process it starts from then on. A thread that exits
  // meanwhile is skipped; a process with none left is an error (NotFound).
  gsym::Status attach_process(uint32_t tgid);
  size_t size() const { return links_.size(); }

 private:
  gsym::Status attach(int fd, const std::string& what);
  bpf_program* program_;
  uint32_t frequency_hz_;
  std::vector<int> fds_;
  std::vector<bpf_link*> links_;
};

// The thread ids of `tgid` (/proc/TGID/task), sorted; NotFound when the
// process is gone.
gsym::Expected<std::vector<uint32_t>> process_threads(uint32_t tgid);

}  // namespace gsymprof
