// gsymprof record: sample like `profile` (same targeting flags, same
// session) but symbolize nothing: write the capture file for `symbolize`.
#include <signal.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "userspace/capture/capture_file.h"
#include "userspace/cli/commands.h"
#include "userspace/session/profile_session.h"
#include "userspace/session/target_options.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr const char* kUsageLine =
    "usage: gsymprof record [-p PID[,PID...]] [-F HZ] [-d SECONDS] [--call-graph fp|dwarf[,SIZE]]\n"
    "                       -o CAPTURE [-- CMD ARGS...]\n";

void print_help() {
  std::fputs(kUsageLine, stdout);
  std::fputs(
      "\nSamples on-CPU user stacks exactly as 'gsymprof profile' does and writes\n"
      "them, normalized (module + ELF address, by build ID) but not symbolized,\n"
      "to a capture file. 'gsymprof symbolize CAPTURE' turns it into folded stacks\n"
      "later, on any machine that has the modules' GSYM files. Ctrl-C stops\n"
      "sampling and still writes a complete capture.\n"
      "Needs root (or CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN).\n\n"
      "targets:\n",
      stdout);
  std::fputs(target_options_help(), stdout);
  std::fputs(
      "\noutput:\n"
      "  -o CAPTURE        the capture file to write (atomically; JSON, see\n"
      "                    userspace/capture/capture-format.md)\n"
      "  -h, --help        this text\n",
      stdout);
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "gsymprof record: %s\n%s", message.c_str(), kUsageLine);
  return 2;
}

// Holds SIGINT/SIGTERM while the capture is written, so a second Ctrl-C
// cannot leave a stray temporary file; they are delivered afterwards.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalsHeld() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

void print_summary(const Capture& capture, const SessionStats& stats, const std::string& path) {
  print_sampling_summary(capture, stats);
  std::fprintf(stderr, "gsymprof: wrote %s: %zu processes, %zu modules, %zu unique stacks\n",
               escape_control(path).c_str(), capture.processes.size(), capture.modules.size(),
               capture.stacks.size());
}

}  // namespace

int cmd_record(int argc, char** argv) {
  SessionOptions session;
  std::string output_path;
  for (int i = 1; i < argc; ++i) {
    std::string error;
    switch (parse_target_arg(argc, argv, i, session.targets, error)) {
      case ArgResult::Consumed: continue;
      case ArgResult::UsageError: return usage_error(error);
      case ArgResult::NotMine: break;
    }
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      return 0;
    } else if (arg == "-o") {
      if (i + 1 >= argc || !*argv[i + 1]) return usage_error("-o needs a file name");
      output_path = argv[++i];
    } else {
      return usage_error("unknown option '" + arg + "'");
    }
  }
  if (output_path.empty()) return usage_error("missing -o CAPTURE");
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return usage_error(problem);

  // Fail before sampling, not after, when the capture cannot be written.
  std::string dir = output_path.find('/') == std::string::npos
                        ? "."
                        : output_path.substr(0, output_path.rfind('/') + 1);
  if (access(dir.c_str(), W_OK) != 0) {
    std::fprintf(stderr, "gsymprof record: %s: directory %s is not writable\n", output_path.c_str(),
                 dir.c_str());
    return 1;
  }

  SessionStats stats;
  auto capture = run_sampling_session(session, &stats);
  if (!capture) {
    // Session errors can name a target's files: escaped like the summary.
    std::fprintf(stderr, "gsymprof record: %s\n", escape_control(capture.error().to_string()).c_str());
    return 1;
  }
  {
    SignalsHeld held;
    if (auto status = write_capture_file(*capture, output_path); !status) {
      std::fprintf(stderr, "gsymprof record: %s\n", escape_control(status.error().message).c_str());
      return 1;
    }
  }
  print_summary(*capture, stats, output_path);
  return 0;
}

}  // namespace gsymprof
