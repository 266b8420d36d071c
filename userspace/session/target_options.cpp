#include "userspace/session/target_options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

namespace gsymprof {
namespace {

bool parse_u32(std::string_view text, uint32_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 10);
  return ec == std::errc() && ptr == text.data() + text.size();
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

}  // namespace

ArgResult parse_target_arg(int argc, char** argv, int& index, TargetOptions& options,
                           std::string& error) {
  std::string_view arg = argv[index];
  auto value = [&](const char* flag) -> const char* {
    if (index + 1 >= argc) {
      error = std::string(flag) + " needs a value";
      return nullptr;
    }
    return argv[++index];
  };
  if (arg == "--") {
    if (index + 1 >= argc) {
      error = "-- needs a command";
      return ArgResult::UsageError;
    }
    options.command.assign(argv + index + 1, argv + argc);
    index = argc;
    return ArgResult::Consumed;
  }
  if (arg == "-p") {
    const char* v = value("-p");
    if (!v) return ArgResult::UsageError;
    if (!parse_pids(v, options.pids)) {
      error = std::string("-p: bad process id list '") + v + "'";
      return ArgResult::UsageError;
    }
    std::sort(options.pids.begin(), options.pids.end());
    options.pids.erase(std::unique(options.pids.begin(), options.pids.end()), options.pids.end());
    return ArgResult::Consumed;
  }
  if (arg == "-F") {
    const char* v = value("-F");
    if (!v) return ArgResult::UsageError;
    if (!parse_u32(v, options.frequency_hz) || options.frequency_hz == 0 ||
        options.frequency_hz > kMaxFrequencyHz) {
      error = std::string("-F: frequency must be 1..") + std::to_string(kMaxFrequencyHz) +
              " Hz, not '" + v + "'";
      return ArgResult::UsageError;
    }
    return ArgResult::Consumed;
  }
  if (arg == "-d") {
    const char* v = value("-d");
    if (!v) return ArgResult::UsageError;
    double seconds = 0;
    if (!parse_seconds(v, seconds)) {
      error = std::string("-d: duration must be a positive number of seconds, not '") + v + "'";
      return ArgResult::UsageError;
    }
    options.duration_s = seconds;
    return ArgResult::Consumed;
  }
  if (arg == "--call-graph") {
    const char* v = value("--call-graph");
    if (!v) return ArgResult::UsageError;
    std::string_view mode(v);
    if (mode == "fp" || mode == "dwarf") {
      options.call_graph = mode;
      return ArgResult::Consumed;
    }
    uint32_t bytes = 0;
    if (mode.substr(0, 6) == "dwarf,") {
      if (!parse_u32(mode.substr(6), bytes) || bytes % 8 != 0 || bytes < kMinStackCopyBytes ||
          bytes > kMaxStackCopyBytes) {
        error = std::string("--call-graph: stack copy size must be a multiple of 8 from ") +
                std::to_string(kMinStackCopyBytes) + " to " + std::to_string(kMaxStackCopyBytes) +
                ", not '" + std::string(mode.substr(6)) + "'";
        return ArgResult::UsageError;
      }
      options.call_graph = "dwarf";
      options.stack_copy_bytes = bytes;
      return ArgResult::Consumed;
    }
    error = std::string("--call-graph: unsupported mode '") + v + "' (supported: fp, dwarf[,SIZE])";
    return ArgResult::UsageError;
  }
  return ArgResult::NotMine;
}

std::string validate_target_options(const TargetOptions& options) {
  if (!options.pids.empty() && !options.command.empty())
    return "-p and a command (-- CMD) cannot be combined";
  return "";
}

const char* target_options_help() {
  return "  -p PID[,PID...]   profile these processes (all their threads)\n"
         "  -F HZ             samples per second per CPU (default 99, max 100000)\n"
         "  -d SECONDS        stop after this long (default: Ctrl-C or all targets exit)\n"
         "  --call-graph MODE how user stacks are unwound: fp (frame pointers) or\n"
         "                    dwarf[,SIZE] (copy SIZE bytes of stack, default 8192, and\n"
         "                    unwind with the modules' CFI)\n"
         "  -- CMD ARGS...    start CMD and profile it from its first instruction\n"
         "  With neither -p nor a command, every process is profiled.\n"
         "  Children forked by the targets are profiled too.\n";
}

}  // namespace gsymprof
