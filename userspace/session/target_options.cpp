#include "userspace/session/target_options.h"

#include "userspace/base/parse_number.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

namespace gsymprof {
namespace {

bool parse_u32(std::string_view text, uint32_t& out) {
  std::optional<uint32_t> value = parse_unsigned<uint32_t>(text);
  if (value) out = *value;
  return value.has_value();
}

bool parse_pids(std::string_view text, std::vector<uint32_t>& pids) {
  while (true) {
    size_t comma = text.find(',');
    uint32_t pid = 0;
    if (!parse_u32(text.substr(0, comma), pid) || pid == 0 || pid > (1u << 22)) return false;
    pids.push_back(pid);
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

bool parse_seconds(std::string_view text, double& out) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(out) &&
         out > 0 && out <= 365.0 * 24 * 3600;
}

std::string store_pids(std::string_view value, TargetOptions& options) {
  if (!parse_pids(value, options.pids))
    return "-p: bad process id list '" + std::string(value) + "'";
  std::sort(options.pids.begin(), options.pids.end());
  options.pids.erase(std::unique(options.pids.begin(), options.pids.end()), options.pids.end());
  return "";
}

std::string store_frequency(std::string_view value, TargetOptions& options) {
  if (!parse_u32(value, options.frequency_hz) || options.frequency_hz == 0 ||
      options.frequency_hz > kMaxFrequencyHz)
    return "-F: frequency must be 1.." + std::to_string(kMaxFrequencyHz) + " Hz, not '" +
           std::string(value) + "'";
  return "";
}

std::string store_duration(std::string_view value, TargetOptions& options) {
  double seconds = 0;
  if (!parse_seconds(value, seconds))
    return "-d: duration must be a positive number of seconds, not '" + std::string(value) + "'";
  options.duration_s = seconds;
  return "";
}

std::string store_max_depth(std::string_view value, TargetOptions& options) {
  std::optional<uint32_t> depth = parse_unsigned<uint32_t>(value);
  if (!depth || *depth < 1 || *depth > kMaxMaxDepth)
    return "--max-depth: a number of frames from 1 to " + std::to_string(kMaxMaxDepth) + ", not '" +
           std::string(value) + "'";
  options.max_depth = *depth;
  return "";
}

std::string store_call_graph(std::string_view mode, TargetOptions& options) {
  if (mode == "fp" || mode == "dwarf") {
    options.call_graph = mode == "fp" ? CallGraph::FramePointer : CallGraph::Dwarf;
    return "";
  }
  if (mode.substr(0, 6) != "dwarf,")
    return "--call-graph: unsupported mode '" + std::string(mode) + "' (supported: fp, dwarf[,SIZE])";
  uint32_t bytes = 0;
  if (!parse_u32(mode.substr(6), bytes) || bytes % 8 != 0 || bytes < kMinStackCopyBytes ||
      bytes > kMaxStackCopyBytes)
    return "--call-graph: stack copy size must be a multiple of 8 from " +
           std::to_string(kMinStackCopyBytes) + " to " + std::to_string(kMaxStackCopyBytes) +
           ", not '" + std::string(mode.substr(6)) + "'";
  options.call_graph = CallGraph::Dwarf;
  options.stack_copy_bytes = bytes;
  return "";
}

std::string store_clock(ProfileClock clock, TargetOptions& options) {
  if (options.clock != ProfileClock::Cpu && options.clock != clock) return "--off-cpu and --wall cannot be combined";
  options.clock = clock;
  return "";
}

std::string store_off_cpu_min_us(std::string_view value, TargetOptions& options) {
  std::optional<uint32_t> us = parse_unsigned<uint32_t>(value);
  if (!us || *us > 60'000'000)
    return "--off-cpu-min-us: microseconds from 0 to 60000000, not '" + std::string(value) + "'";
  options.off_cpu_min_us = *us;
  return "";
}

constexpr TargetFlag kTargetFlags[] = {
    {"-p,--pid", "PID[,PID...]", "profile these processes (all their threads)", store_pids},
    {"-F,--freq", "HZ", "samples per second per CPU (max 100000)", store_frequency,
     [](const TargetOptions& options) { return std::to_string(options.frequency_hz); }},
    {"-d,--duration", "SECONDS",
     "stop after this long (default: Ctrl-C or all targets exit). With -- CMD, a command "
     "still running then gets SIGTERM (SIGKILL 2 s later), the summary says it was stopped, "
     "and gsymprof exits 0; a command that ends first gives gsymprof its exit status",
     store_duration},
    {"--call-graph", "fp|dwarf[,SIZE]",
     "how user stacks are unwound: fp (frame pointers) or dwarf (copy the live user stack, "
     "at most SIZE bytes, default 262144, and unwind with the modules' CFI)",
     store_call_graph},
    {"--max-depth", "N",
     "user frames walked at most per stack by --call-graph dwarf (default 2048); deeper "
     "stacks are cut there, counted as unwind_depth_limit",
     store_max_depth},
    {"--off-cpu", "",
     "profile time off the CPU instead: each wait of a target thread (sleep, lock, I/O, "
     "pipe) with the stack where it blocked, the kernel's (schedule, futex_wait, ...) too, "
     "weighted by the nanoseconds it waited and ending in its reason ([off-cpu S], "
     "[off-cpu D], ...)",
     [](std::string_view, TargetOptions& options) { return store_clock(ProfileClock::OffCpu, options); }},
    {"--wall", "",
     "wall-clock time: CPU samples (each weighs 1/HZ s) and waits off the CPU together, in "
     "nanoseconds, with time runnable but waiting for a CPU as [runqueue]",
     [](std::string_view, TargetOptions& options) { return store_clock(ProfileClock::Wall, options); }},
    {"--off-cpu-min-us", "US",
     "with --off-cpu or --wall: waits shorter than US microseconds (default 1000) are summed "
     "per process as one [short waits] stack instead of each getting its own",
     store_off_cpu_min_us},
};

}  // namespace

std::span<const TargetFlag> target_flags() { return kTargetFlags; }

std::string validate_target_options(const TargetOptions& options) {
  if (!options.pids.empty() && !options.command.empty())
    return "-p and a command (-- CMD) cannot be combined";
  return "";
}

}  // namespace gsymprof
