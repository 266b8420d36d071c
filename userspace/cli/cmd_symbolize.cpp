// gsymprof symbolize FILE: a capture file (written by `record`) or a perf.data
// file (perf record) -> folded stacks, JSON or pprof, through the same
// symbolize() + folded_text() as `profile`, so the output for the same stacks
// is the same. Never touches /proc.
#include <cstdio>
#include <string>
#include <vector>

#include "userspace/base/text_escape.h"
#include "userspace/capture/capture_file.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/session/profile_file.h"
#include "userspace/process/vdso_file.h"
#include "userspace/output/flamegraph.h"
#include "userspace/report/run_summary.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Symbolizes a capture written by 'gsymprof record' (possibly on another\n"
    "machine) and prints the same folded stacks 'gsymprof profile' would have\n"
    "printed for those stacks.\n";

constexpr const char* kEpilogue =
    "A module's GSYM comes from the --gsym-dirs, then the cache\n"
    "(/var/cache/gsymprof, or $GSYMPROF_CACHE), then by converting the file at\n"
    "the module's captured path if it is still there with the same build ID.\n"
    "A GSYM with another build ID is never used: such frames print as\n"
    "module+0xOFFSET. At the end, stderr gives the totals, the losses by reason\n"
    "and the truncated stacks (as 'gsymprof profile' prints them; for perf.data:\n"
    "LOST records as ringbuf_full, LOST_SAMPLES as lost_samples, samples without\n"
    "user frames as no_user_stack), hints, then every module: resolved (from\n"
    "where) or why not.\n";

}  // namespace

int cmd_symbolize(int argc, char** argv) {
  std::string capture_path, output_path, stats_path;
  SvgFlags svg{"", "gsymprof symbolize"};
  bool verbose = false;
  ProfileFileOptions file_options;
  OutputFormat format = OutputFormat::Folded;
  SymbolizeFlags symbolize_flags;
  // The [vdso] of the recording machine: this machine's own image stands in
  // when its build ID matches (the locator checks), like any local file.
  symbolize_flags.options.local_elf_path = [](const CaptureModule& module) {
    return openable_module_path(module.path);
  };
  CommandLine cli("symbolize", kAbout, kEpilogue);
  cli.section("arguments");
  cli.argument("CAPTURE", "file",
               "the capture file (format: userspace/capture/capture-format.md), or a perf.data "
               "file written by perf record (-g, --call-graph dwarf or leaf-only)",
               capture_path);
  cli.section("options");
  cli.path("-o,--output", "OUT", "write the output to OUT (atomically) instead of stdout", output_path);
  cli.value("--event", "NAME",
            "perf.data only: use the samples of the event perf named NAME (cycles, cpu-clock, "
            "cycles:u, ...; 'perf evlist -i FILE' lists them); default: the first event that is "
            "not perf's dummy event. A capture holds one event: --event with one is a usage error",
            [&](const std::string& value) {
              if (value.empty()) throw UsageError("--event needs an event name");
              file_options.perf_event = value;
            });
  add_symbolize_flags(cli, symbolize_flags);
  add_format_flag(cli, format);
  add_svg_flags(cli, svg);
  add_summary_flags(cli, stats_path, verbose);
  cli.example("a capture from 'gsymprof record', as a flame graph and folded stacks",
              "gsymprof symbolize cap.json --svg flame.svg -o out.folded")
      .example("a perf.data file (perf record -g, or --call-graph dwarf)",
               "gsymprof symbolize perf.data --svg flame.svg")
      .example("for go tool pprof, Pyroscope or Parca",
               "gsymprof symbolize cap.json --format pprof -o profile.pb.gz");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (!file_options.perf_event.empty()) {
    auto perf_data = is_perf_data_file(capture_path);
    if (!perf_data) return cli.failure(perf_data.error().message);
    if (!*perf_data)
      return cli.usage_error("--event selects an event of a perf.data file; " + capture_path +
                             " is a gsymprof capture (one event, cpu-clock)");
  }
  if (std::string problem = check_format_destination(format, output_path); !problem.empty())
    return cli.usage_error(problem);
  if (std::string problem = check_svg_format(svg, format); !problem.empty())
    return cli.usage_error(problem);
  for (const std::string& path : {svg.path, stats_path})
    if (!path.empty())
      if (auto status = check_output_directory(path); !status) return cli.failure(status.error().to_string());

  // Capture errors can quote the capture's strings: failure() escapes them.
  auto capture = read_profile_file(capture_path, file_options);
  if (!capture) return cli.failure(capture.error().message);
  auto locator = open_locator(symbolize_flags.gsym_dirs);
  if (!locator) return cli.failure(locator.error().to_string());

  RunSummary summary = summarize_run("symbolize", *capture);  // render frees the stacks
  auto output = render(*capture, *locator, symbolize_flags.options, format, /*free_stacks=*/true);
  if (!output) return cli.failure(capture_path + ": " + output.error().to_string());
  if (auto status = write_output(output->bytes, output_path); !status)
    return cli.failure(status.error().message);
  if (!output_path.empty()) summary.files.push_back({output_path, format_contents(format)});
  if (!svg.path.empty()) {
    if (auto status = write_flamegraph_svg(output->bytes, svg.path, svg_options(svg, capture->clock)); !status)
      return cli.failure(status.error().to_string());
    summary.files.push_back({svg.path, "flame graph"});
  }
  summary.symbolized = true;
  summary.module_reports = std::move(output->modules);
  summary.unique_stacks = output->unique_stacks;
  if (auto status = write_stats_file(summary, stats_path); !status)
    return cli.failure(status.error().to_string());
  print_locator_notes(*locator);
  print_run_summary(summary, verbose);
  print_files_written(summary, format == OutputFormat::Folded && output_path.empty());
  return 0;
}

}  // namespace gsymprof
