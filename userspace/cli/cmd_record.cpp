// gsymprof record: sample like `profile` (same targeting flags, same
// session) but symbolize nothing: write the capture file for `symbolize`.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "userspace/capture/capture_file.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/report/progress_line.h"
#include "userspace/report/run_summary.h"
#include "userspace/report/session_summary.h"
#include "userspace/session/profile_session.h"
#include "userspace/symbolize/keep_module_gsyms.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Samples on-CPU stacks exactly as 'gsymprof profile' does and writes\n"
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

}  // namespace

int cmd_record(int argc, char** argv) {
  SessionOptions session;
  session.sample_times = true;  // a capture's times: gsymprof heatmap
  std::string output_path, stats_path;
  bool verbose = false;
  CommandLine cli("record", kAbout);
  cli.section("targets");
  add_target_flags(cli, session.targets);
  cli.section("output");
  cli.path("-o,--output", "CAPTURE",
           "the capture file to write (atomically; JSON, see userspace/capture/capture-format.md)",
           output_path)
      .required();
  add_summary_flags(cli, stats_path, verbose);
  cli.example("process 1234 for 30 s; symbolize it here or on another machine",
              "sudo gsymprof record -p 1234 -d 30 -o cap.json")
      .example("then, where the modules or their GSYM files are",
               "gsymprof symbolize cap.json --svg flame.svg")
      .example("a command from its start, with frame pointers",
               "sudo gsymprof record --call-graph fp -o cap.json -- ./myprog ARGS");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return cli.usage_error(problem);
  for (const std::string& path : {output_path, stats_path})
    if (!path.empty())
      if (auto status = check_output_directory(path); !status) return cli.failure(status.error().to_string());

  SessionStats stats;
  auto capture = sample_with_progress(session, stats);
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
  RunSummary summary = summarize_run("record", *capture);
  summary.session = &stats;
  summary.kernel_stacks = session.targets.kernel_stacks;
  summary.files.push_back({output_path, "capture, for 'gsymprof symbolize'"});
  if (auto status = write_stats_file(summary, stats_path); !status)
    return cli.failure(status.error().to_string());
  print_run_summary(summary, verbose);
  if (!kept.reports.empty())
    std::fprintf(stderr,
                 "gsymprof: modules whose path on this host is not the file mapped (container, "
                 "deleted or replaced), made ready for symbolize now:\n");
  for (const ModuleReport& report : kept.reports) print_module_report(report);
  print_files_written(summary, /*folded_to_stdout=*/false);
  print_command_end(stats);
  return command_exit_code(stats);
}

}  // namespace gsymprof
