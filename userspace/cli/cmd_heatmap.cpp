// gsymprof heatmap CAPTURE -o FILE.html [--slice-ms N]: a capture's samples
// over time as a sub-second heatmap in one self-contained HTML page, where a
// selected range becomes a flame graph (output/heatmap.h). Symbolized as
// `symbolize` symbolizes, so frames are named as in the folded output.
#include <cstdio>
#include <string>

#include "userspace/base/parse_number.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/output/heatmap.h"
#include "userspace/process/vdso_file.h"
#include "userspace/report/run_summary.h"
#include "userspace/session/profile_file.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Draws a capture written by 'gsymprof record' as a heatmap of its samples\n"
    "over time, in one self-contained HTML page (no network access when viewed):\n"
    "columns are seconds, rows are slices of a second, colour is samples. Drag\n"
    "over cells to see the flame graph of that time range; shift+drag a second\n"
    "range to compare it with the first; choose a process or thread; search\n"
    "frames by regular expression. Frames are named as 'gsymprof symbolize'\n"
    "names them in folded output.\n";

constexpr const char* kEpilogue =
    "Sample times are kept by 'gsymprof record' (and 'profile'): captures\n"
    "from the agent or from perf.data files have none and are refused.\n";

}  // namespace

int cmd_heatmap(int argc, char** argv) {
  std::string capture_path, output_path, stats_path;
  bool verbose = false;
  HeatmapOptions options;
  SymbolizeFlags symbolize_flags;
  symbolize_flags.options.local_elf_path = [](const CaptureModule& module) {
    return openable_module_path(module.path);  // as symbolize: this machine's [vdso] when its build ID matches
  };
  CommandLine cli("heatmap", kAbout, kEpilogue);
  cli.section("arguments");
  cli.argument("CAPTURE", "file", "the capture file, written by 'gsymprof record'", capture_path);
  cli.section("options");
  cli.path("-o,--output", "FILE.html", "write the page to FILE.html (atomically)", output_path).required();
  cli.value("--slice-ms", "N",
            "a row is N milliseconds of each second, 1 to " + std::to_string(kMaxHeatmapSliceMs) +
                " (default 50: 20 rows)",
            [&](const std::string& value) {
              auto ms = parse_unsigned<uint32_t>(value);
              if (!ms || *ms == 0 || *ms > kMaxHeatmapSliceMs)
                throw UsageError("--slice-ms must be 1 to " + std::to_string(kMaxHeatmapSliceMs) + ", not '" +
                                 value + "'");
              options.slice_ms = *ms;
            });
  cli.value("--title", "TITLE", "the page's title (default: \"gsymprof heatmap\")",
            [&options](const std::string& title) { options.title = title; });
  add_symbolize_flags(cli, symbolize_flags);
  add_summary_flags(cli, stats_path, verbose);
  cli.example("record a process for 60 s...", "sudo gsymprof record -p 1234 -d 60 -o cap.json")
      .example("...then look at it second by second (open heat.html in a browser)",
               "gsymprof heatmap cap.json -o heat.html")
      .example("rows of 20 ms, for short stalls", "gsymprof heatmap cap.json -o heat.html --slice-ms 20");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  for (const std::string& path : {output_path, stats_path})
    if (!path.empty())
      if (auto status = check_output_directory(path); !status) return cli.failure(status.error().to_string());

  auto capture = read_profile_file(capture_path, {});
  if (!capture) return cli.failure(capture.error().message);
  auto locator = open_locator(symbolize_flags.gsym_dirs);
  if (!locator) return cli.failure(locator.error().to_string());

  RunSummary summary = summarize_run("heatmap", *capture);
  auto page = heatmap_page(*capture, *locator, symbolize_flags.options, options);
  if (!page) return cli.failure(capture_path + ": " + page.error().to_string());
  if (auto status = write_output(page->html, output_path); !status) return cli.failure(status.error().message);
  summary.files.push_back({output_path, "heatmap"});
  summary.symbolized = true;
  summary.module_reports = std::move(page->symbolized.modules);
  summary.unique_stacks = page->stacks;
  if (auto status = write_stats_file(summary, stats_path); !status)
    return cli.failure(status.error().to_string());
  print_locator_notes(*locator);
  if (page->untimed_samples)
    std::fprintf(stderr, "gsymprof: %llu samples without a time left out of the heatmap\n",
                 static_cast<unsigned long long>(page->untimed_samples));
  print_run_summary(summary, verbose);
  print_files_written(summary, /*folded_to_stdout=*/false);
  return 0;
}

}  // namespace gsymprof
