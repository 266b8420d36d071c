// userspace/session/target_options.h - the targeting flags shared by `profile` and
// `record`, defined once (target_flags) so both commands accept exactly the same:
//   -p/--pid PID[,PID...]   -F/--freq HZ   -d/--duration SECONDS
//   --call-graph fp|dwarf[,SIZE]   --max-depth N   -- CMD ARGS...
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/profile.h"
#include "userspace/capture/capture.h"

namespace gsymprof {

// The most bytes of user stack copied per sample in dwarf mode (a record
// carries only the live part, from sp to the top of the thread's stack), and
// the limits of --call-graph dwarf,SIZE (SIZE a multiple of 8; at most what a
// record carries). 256 KiB holds the deepest stacks measured (clang's parser).
inline constexpr uint32_t kDefaultStackCopyBytes = 256 * 1024;
inline constexpr uint32_t kMinStackCopyBytes = 64;
inline constexpr uint32_t kMaxStackCopyBytes = PROFILE_MAX_STACK_COPY;
// --max-depth: user frames the CFI unwinder walks at most (dwarf; the kernel
// walks frame pointers to kernel.perf_event_max_stack, 127 by default).
inline constexpr uint32_t kDefaultMaxDepth = 2048;
inline constexpr uint32_t kMaxMaxDepth = 65536;
// --off-cpu-min-us: waits shorter than this get no stack of their own; the
// kernel sums them per process (the "[short waits]" stack). 1 ms bounds the
// records to 1,000 per second per blocked thread, the rate of a 1 kHz
// sampler, so a thread that switches every few microseconds (a pipe
// ping-pong, a busy lock) costs a map update per switch, not a stack copy.
inline constexpr uint32_t kDefaultOffCpuMinUs = 1000;

struct TargetOptions {
  std::vector<uint32_t> pids;           // -p: sorted, unique
  uint32_t frequency_hz = 99;           // -F
  std::optional<double> duration_s;     // -d; none: until Ctrl-C or targets exit
  CallGraph call_graph = CallGraph::Dwarf;  // --call-graph: fp or dwarf (default: see README)
  ProfileClock clock = ProfileClock::Cpu;    // --off-cpu, --wall
  uint32_t off_cpu_min_us = kDefaultOffCpuMinUs;  // --off-cpu-min-us
  uint32_t stack_copy_bytes = kDefaultStackCopyBytes;  // --call-graph dwarf,SIZE
  std::vector<std::string> command;     // after --
  bool kernel_stacks = true;            // false: --user-callchains
  uint32_t max_depth = kDefaultMaxDepth;  // --max-depth
  bool whole_system() const { return pids.empty() && command.empty(); }
};

// One targeting flag, as the command-line table of `profile` and `record`
// lists it (userspace/cli adds these to both).
struct TargetFlag {
  const char* names;       // "-p,--pid"
  const char* value_name;  // "PID[,PID...]"; "" for a flag without a value
  const char* help;
  // Stores `value` in `options`; returns "" or the one-line usage error.
  std::string (*store)(std::string_view value, TargetOptions& options);
  // The default a command starts from, when it differs by command (the
  // agent samples at 19 Hz, profile at 99): appended to `help`.
  std::string (*current)(const TargetOptions& options) = nullptr;
};

// -p/--pid, -F/--freq, -d/--duration, --call-graph, --max-depth, --off-cpu,
// --wall, --off-cpu-min-us.
std::span<const TargetFlag> target_flags();

// --user-callchains (perf's name): user frames only.
inline constexpr const char* kUserCallchainsFlag = "--user-callchains";
inline constexpr const char* kUserCallchainsHelp =
    "user frames only: no kernel frames (_[k]) leafward of them, and no samples of kernel "
    "threads";

// The help of "-- CMD ARGS..." (the command is stored in TargetOptions::command).
inline constexpr const char* kTargetCommandHelp =
    "start CMD and profile it from its first instruction. With neither -p nor a "
    "command, every process is profiled. Children forked by the targets are profiled too.";

// Checks combinations once all arguments are read ("" = fine).
std::string validate_target_options(const TargetOptions& options);

inline constexpr uint32_t kMaxFrequencyHz = 100000;

}  // namespace gsymprof
