#include "userspace/report/session_summary.h"

#include <sys/wait.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "userspace/base/text_escape.h"
#include "userspace/report/loss_summary.h"

namespace gsymprof {

namespace {

// Kernel stacks the sampler had to cut or could not read, with what it means.
void print_kernel_stack_counters(const SamplerCounters& counters) {
  const uint64_t kernel_truncated = counters[PROFILE_COUNTER_KERNEL_TRUNCATED];
  const uint64_t kernel_errors = counters[PROFILE_COUNTER_KERNEL_STACK_ERROR];
  if (kernel_truncated || kernel_errors)
    std::fprintf(stderr,
                 "gsymprof: kernel stacks: %" PRIu64 " cut at %d frames, %" PRIu64
                 " unreadable (those samples keep their user frames)\n",
                 kernel_truncated, PROFILE_MAX_KERNEL_FRAMES, kernel_errors);
}

// JIT code: how much a perf map named, and where one was missing, with the
// flag that writes one.
void print_jit_summary(const Capture& capture, const SessionStats& stats) {
  const JitReport& jit = stats.jit;
  if (jit.named_samples)
    std::fprintf(stderr, "gsymprof: JIT code: %" PRIu64 " samples named from perf maps (%zu symbols)\n",
                 jit.named_samples, capture.jit_symbols.size());
  if (!jit.unnamed_samples) return;
  // The processes with most such samples first, a few per line.
  std::vector<std::pair<uint64_t, uint32_t>> by_samples;
  for (const auto& [pid, samples] : jit.unnamed_by_pid) by_samples.emplace_back(samples, pid);
  std::sort(by_samples.begin(), by_samples.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  constexpr size_t kShown = 8;
  std::string without, partial;
  size_t without_count = 0, partial_count = 0;
  for (const auto& [samples, pid] : by_samples) {
    auto has = jit.has_map.find(pid);
    const bool has_map = has != jit.has_map.end() && has->second;
    std::string& list = has_map ? partial : without;
    size_t& count = has_map ? partial_count : without_count;
    if (++count <= kShown)
      list += (list.empty() ? "" : ", ") + std::to_string(pid) + " (" + std::to_string(samples) + ")";
  }
  if (without_count > kShown) without += " and " + std::to_string(without_count - kShown) + " more";
  if (partial_count > kShown) partial += " and " + std::to_string(partial_count - kShown) + " more";
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples in anonymous executable memory (JIT code?) that no perf map names\n",
               jit.unnamed_samples);
  if (!without.empty())
    std::fprintf(stderr,
                 "gsymprof:   no /tmp/perf-PID.map for pid (samples): %s; have the runtime write one "
                 "(node --perf-basic-prof, python -X perf, a Java perf-map agent)\n",
                 without.c_str());
  if (!partial.empty())
    std::fprintf(stderr, "gsymprof:   perf map covers not all of it, pid (samples): %s\n", partial.c_str());
}

}  // namespace

void print_sampling_summary(const Capture& capture, const SessionStats& stats) {
  const LossSummary losses = summarize_losses(capture);
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples taken, %" PRIu64 " recorded, %" PRIu64
               " lost (%.2f s at %u Hz, stopped: %s)\n",
               stats.counters.samples(), capture.samples, losses.lost,
               static_cast<double>(capture.duration_ns) / 1e9, capture.frequency_hz,
               stats.stop_reason.c_str());
  print_losses(losses);
  if (stats.frame_pointer_stacks)
    std::fprintf(stderr,
                 "gsymprof: frame-pointer fallback: %" PRIu64 " frames in %" PRIu64
                 " stacks where no CFI covered the code (JIT code, assembly)\n",
                 stats.frame_pointer_steps, stats.frame_pointer_stacks);
  print_jit_summary(capture, stats);
  print_kernel_stack_counters(stats.counters);
  if (stats.counters.sample_records)
    std::fprintf(stderr, "gsymprof: ring buffer: %zu KiB, %" PRIu64 " bytes per sample record\n",
                 stats.ring_buffer_bytes >> 10,
                 stats.counters.sample_record_bytes / stats.counters.sample_records);
  if (const uint64_t lost = stats.counters[PROFILE_COUNTER_SIDEBAND_LOST])
    std::fprintf(stderr,
                 "gsymprof: side-band events lost: %" PRIu64
                 " (ring buffer full); mappings were read from /proc/PID/maps instead, too late "
                 "for processes that had exited (a larger -F interval or fewer targets help)\n",
                 lost);
}

void print_command_end(const SessionStats& stats) {
  const int status = stats.command_exit_status;
  if (status < 0) return;
  const std::string name = escape_control(stats.command_name);
  if (WIFEXITED(status)) {
    std::fprintf(stderr, "gsymprof: %s exited %d\n", name.c_str(), WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    const char* signal_name = sigabbrev_np(WTERMSIG(status));
    const std::string signal = signal_name ? std::string("SIG") + signal_name : std::to_string(WTERMSIG(status));
    if (stats.command_stopped)
      std::fprintf(stderr, "gsymprof: %s was stopped (%s) when sampling ended\n", name.c_str(), signal.c_str());
    else
      std::fprintf(stderr, "gsymprof: %s was killed by %s\n", name.c_str(), signal.c_str());
  }
}

int command_exit_code(const SessionStats& stats) {
  const int status = stats.command_exit_status;
  if (status < 0 || stats.command_stopped) return 0;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 0;
}

void print_notices(const std::vector<std::string>& notices) {
  for (const std::string& notice : notices) std::fprintf(stderr, "gsymprof: %s\n", notice.c_str());
}

}  // namespace gsymprof
