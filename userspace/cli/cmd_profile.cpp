// gsymprof profile: sample live processes, symbolize each unique stack once
// through GSYM files chosen by build ID, print folded stacks.
#include <cstdio>
#include <memory>
#include <string>

#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/output/flamegraph.h"
#include "userspace/report/progress_line.h"
#include "userspace/report/session_summary.h"
#include "userspace/session/profile_session.h"
#include "userspace/symbolize/gsym_prefetcher.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Samples on-CPU user stacks with eBPF and prints folded stacks\n"
    "(\"comm;root;...;leaf count\", sorted), inlined frames marked _[i].\n"
    "Needs root (or CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN).\n";

constexpr const char* kEpilogue =
    "GSYM files missing from the dirs and the cache (/var/cache/gsymprof, or\n"
    "$GSYMPROF_CACHE) are converted from the module or its debug file and cached.\n"
    "A summary (samples, losses by reason, processes, modules without symbols)\n"
    "goes to stderr at the end.\n";

void print_summary(const Capture& capture, const SessionStats& stats, const RenderedOutput& output) {
  print_sampling_summary(capture, stats);
  std::fprintf(stderr, "gsymprof: processes seen: %zu, unique stacks: %zu\n",
               capture.processes.size(), output.unique_stacks);
  size_t unresolved = 0;
  for (const ModuleReport& report : output.modules)
    if (!report.resolved()) ++unresolved;
  std::fprintf(stderr, "gsymprof: modules with no symbols: %zu of %zu\n", unresolved,
               output.modules.size());
  print_unresolved_modules(output.modules, /*and_the_rest=*/true);
  print_fallback_identities(output.modules);
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  SessionOptions session;
  SymbolizeFlags symbolize_flags;
  std::string output_path, svg_path;
  OutputFormat format = OutputFormat::Folded;
  CommandLine cli("profile", kAbout, kEpilogue);
  cli.section("targets");
  add_target_flags(cli, session.targets);
  cli.section("output");
  cli.path("-o,--output", "OUT", "write the folded stacks to OUT (atomically) instead of stdout",
           output_path);
  add_symbolize_flags(cli, symbolize_flags);
  add_format_flag(cli, format);
  cli.path("--svg", "FILE",
           "also write the stacks as an interactive SVG flame graph (as 'gsymprof flamegraph' "
           "draws it) to FILE, atomically",
           svg_path);
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return cli.usage_error(problem);
  if (std::string problem = check_format_destination(format, output_path); !problem.empty())
    return cli.usage_error(problem);
  if (!svg_path.empty() && format != OutputFormat::Folded)
    return cli.usage_error("--svg draws the folded stacks: it cannot be combined with --format " +
                           std::string(format == OutputFormat::Json ? "json" : "pprof"));

  // Check the outputs and the GSYM dirs before sampling, so a typo costs no profile.
  for (const std::string& path : {output_path, svg_path})
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
  session.on_started = print_notices;
  auto capture = run_sampling_session(session, &stats);
  prefetcher.reset();  // the locator is ours again
  if (!capture) return cli.failure(capture.error().to_string());
  auto output = render(*capture, *locator, symbolize_flags.options, format, /*free_stacks=*/false);
  if (!output) return cli.failure(output.error().to_string());
  if (auto status = write_output(output->bytes, output_path); !status)
    return cli.failure(status.error().to_string());
  if (!svg_path.empty())
    if (auto status = write_flamegraph_svg(output->bytes, svg_path, "gsymprof profile"); !status)
      return cli.failure(status.error().to_string());
  print_summary(*capture, stats, *output);
  print_locator_notes(*locator);
  print_command_end(stats);
  return command_exit_code(stats);
}

}  // namespace gsymprof
