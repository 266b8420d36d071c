// gsymprof profile: sample live processes, symbolize each unique stack once
// through GSYM files chosen by build ID, print folded stacks.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/output/flamegraph.h"
#include "userspace/report/progress_line.h"
#include "userspace/report/run_summary.h"
#include "userspace/report/session_summary.h"
#include "userspace/session/profile_session.h"
#include "userspace/symbolize/gsym_prefetcher.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Samples on-CPU stacks with eBPF (user frames, and the kernel frames leafward\n"
    "of them unless --user-callchains) and prints folded stacks (\"comm;root;...;leaf\n"
    "count\", sorted), inlined frames marked _[i], kernel frames _[k].\n"
    "Needs root (or CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN).\n";

constexpr const char* kEpilogue =
    "GSYM files missing from the dirs and the cache (/var/cache/gsymprof, or\n"
    "$GSYMPROF_CACHE) are converted from the module or its debug file and cached.\n"
    "On a terminal, a line says what is sampled and how it stops, and a live line\n"
    "counts the samples. At the end a summary goes to stderr: totals, losses,\n"
    "hints (shallow stacks, modules without names: what to do), the files written.\n"
    "With -- CMD, gsymprof exits with CMD's exit status (128 + N when signal N\n"
    "killed it); a CMD still running when -d elapses gets SIGTERM (SIGKILL 2 s\n"
    "later), the summary says it was stopped, and gsymprof exits 0.\n";

}  // namespace

int cmd_profile(int argc, char** argv) {
  SessionOptions session;
  SymbolizeFlags symbolize_flags;
  std::string output_path, stats_path;
  SvgFlags svg{"", "gsymprof profile"};
  bool verbose = false;
  OutputFormat format = OutputFormat::Folded;
  CommandLine cli("profile", kAbout, kEpilogue);
  cli.section("targets");
  add_target_flags(cli, session.targets);
  cli.section("output");
  cli.path("-o,--output", "OUT", "write the folded stacks to OUT (atomically) instead of stdout",
           output_path);
  add_symbolize_flags(cli, symbolize_flags);
  add_format_flag(cli, format);
  add_svg_flags(cli, svg);
  add_summary_flags(cli, stats_path, verbose);
  cli.example("process 1234 for 10 s, as a flame graph",
              "sudo gsymprof profile -p 1234 -d 10 --svg flame.svg")
      .example("a command from its first instruction, folded stacks to a file",
               "sudo gsymprof profile -o out.folded -- ./myprog ARGS")
      .example("every process for 5 s at 999 Hz, and the summary as JSON",
               "sudo gsymprof profile -F 999 -d 5 --svg all.svg --stats stats.json")
      .example("a program built with frame pointers, unwound by them (cheaper)",
               "sudo gsymprof profile --call-graph fp -p 1234 -d 10 -o out.folded");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return cli.usage_error(problem);
  if (std::string problem = check_format_destination(format, output_path); !problem.empty())
    return cli.usage_error(problem);
  if (std::string problem = check_svg_format(svg, format); !problem.empty())
    return cli.usage_error(problem);

  // Check the outputs and the GSYM dirs before sampling, so a typo costs no profile.
  for (const std::string& path : {output_path, svg.path, stats_path})
    if (!path.empty())
      if (auto status = check_output_directory(path); !status) return cli.failure(status.error().to_string());
  auto locator = open_locator(symbolize_flags.gsym_dirs);
  if (!locator) return cli.failure(locator.error().to_string());

  // Modules' GSYMs are located (converted when cold) while sampling runs.
  auto prefetcher = std::make_unique<GsymPrefetcher>(*locator, terminal_progress());
  session.on_module_used = [&](const ProcessModule& module) {
    if (!module.error.empty()) return;
    CaptureModule as_captured;
    as_captured.path = module.path;
    as_captured.local_file = module.identity.local_file;
    prefetcher->add(module.identity.build_id, local_elf_path_for(as_captured, symbolize_flags.options),
                    module.path);
  };
  SessionStats stats;
  auto capture = sample_with_progress(session, stats);
  prefetcher.reset();  // the locator is ours again
  if (!capture) return cli.failure(capture.error().to_string());
  RunSummary summary = summarize_run("profile", *capture);
  auto output = render(*capture, *locator, symbolize_flags.options, format, /*free_stacks=*/true);
  if (!output) return cli.failure(output.error().to_string());
  if (auto status = write_output(output->bytes, output_path); !status)
    return cli.failure(status.error().to_string());
  if (!output_path.empty()) summary.files.push_back({output_path, format_contents(format)});
  if (!svg.path.empty()) {
    if (auto status = write_flamegraph_svg(output->bytes, svg.path, svg_options(svg, capture->clock)); !status)
      return cli.failure(status.error().to_string());
    summary.files.push_back({svg.path, "flame graph"});
  }
  summary.session = &stats;
  summary.kernel_stacks = session.targets.kernel_stacks;
  summary.symbolized = true;
  summary.module_reports = std::move(output->modules);
  summary.unique_stacks = output->unique_stacks;
  if (auto status = write_stats_file(summary, stats_path); !status)
    return cli.failure(status.error().to_string());
  print_run_summary(summary, verbose);
  print_locator_notes(*locator);
  print_files_written(summary, format == OutputFormat::Folded && output_path.empty());
  print_command_end(stats);
  return command_exit_code(stats);
}

}  // namespace gsymprof
