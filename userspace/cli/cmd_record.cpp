// gsymprof record: sample like `profile` (same targeting flags, same
// session) but symbolize nothing: write the capture file for `symbolize`.
#include <signal.h>

#include <cstdio>
#include <string>

#include "userspace/capture/capture_file.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/report/session_summary.h"
#include "userspace/session/profile_session.h"
#include "userspace/symbolize/keep_module_gsyms.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Samples on-CPU user stacks exactly as 'gsymprof profile' does and writes\n"
    "them, normalized (module + ELF address, by build ID) but not symbolized,\n"
    "to a capture file. 'gsymprof symbolize CAPTURE' turns it into folded stacks\n"
    "later, on any machine that has the modules' GSYM files. Ctrl-C stops\n"
    "sampling and still writes a complete capture.\n"
    "Needs root (or CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN).\n";

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
  CommandLine cli("record", kAbout);
  cli.section("targets");
  add_target_flags(cli, session.targets);
  cli.section("output");
  cli.path("-o,--output", "CAPTURE",
           "the capture file to write (atomically; JSON, see userspace/capture/capture-format.md)",
           output_path)
      .required();
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return cli.usage_error(problem);
  if (auto status = check_output_directory(output_path); !status)
    return cli.failure(status.error().to_string());

  SessionStats stats;
  session.on_started = print_notices;
  auto capture = run_sampling_session(session, &stats);
  if (!capture) return cli.failure(capture.error().to_string());
  // Files only this process can still open (another mount namespace,
  // deleted, replaced): their GSYMs go to the cache now, for `symbolize`.
  KeptModuleGsyms kept;
  if (auto locator = open_locator({})) {
    kept = keep_module_gsyms(*capture, *locator);
    print_locator_notes(*locator);
  }
  {
    SignalsHeld held;
    if (auto status = write_capture_file(*capture, output_path); !status)
      return cli.failure(status.error().message);
  }
  print_summary(*capture, stats, output_path);
  if (!kept.reports.empty())
    std::fprintf(stderr,
                 "gsymprof: modules whose path on this host is not the file mapped (container, "
                 "deleted or replaced), made ready for symbolize now:\n");
  for (const ModuleReport& report : kept.reports) print_module_report(report);
  print_command_end(stats);
  return command_exit_code(stats);
}

}  // namespace gsymprof
