// userspace/session/target_options.h - the targeting flags shared by `profile` and
// `record`, parsed by one function so both commands accept exactly the same:
//   -p PID[,PID...]   -F HZ   -d SECONDS   --call-graph fp|dwarf[,SIZE]   -- CMD ARGS...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gsymprof {

// Bytes of user stack copied per sample in dwarf mode, and the limits of
// --call-graph dwarf,SIZE (SIZE a multiple of 8; bpf/profile.h's maximum).
inline constexpr uint32_t kDefaultStackCopyBytes = 8192;
inline constexpr uint32_t kMinStackCopyBytes = 64;
inline constexpr uint32_t kMaxStackCopyBytes = 65528;

struct TargetOptions {
  std::vector<uint32_t> pids;           // -p: sorted, unique
  uint32_t frequency_hz = 99;           // -F
  std::optional<double> duration_s;     // -d; none: until Ctrl-C or targets exit
  std::string call_graph = "dwarf";     // --call-graph: "fp" or "dwarf" (default: see README)
  uint32_t stack_copy_bytes = kDefaultStackCopyBytes;  // --call-graph dwarf,SIZE
  std::vector<std::string> command;     // after --
  bool whole_system() const { return pids.empty() && command.empty(); }
};

enum class ArgResult { NotMine, Consumed, UsageError };

// Looks at argv[index]. If it is a targeting flag, stores it (advancing
// `index` past any value it consumed, or to argc for "--") and returns
// Consumed; NotMine leaves everything untouched; UsageError sets `error` to a
// one-line message.
ArgResult parse_target_arg(int argc, char** argv, int& index, TargetOptions& options,
                           std::string& error);

// Checks combinations once all arguments are read ("" = fine).
std::string validate_target_options(const TargetOptions& options);

// The --help lines describing the targeting flags.
const char* target_options_help();

inline constexpr uint32_t kMaxFrequencyHz = 100000;

}  // namespace gsymprof
