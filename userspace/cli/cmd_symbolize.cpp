// gsymprof symbolize CAPTURE: a capture file (written by `record`) -> folded
// stacks or JSON, through the same symbolize() + folded_text() as `profile`,
// so the output for the same stacks is the same. Never touches /proc.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "userspace/base/text_escape.h"
#include "userspace/capture/capture_file.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/perf_data/profile_file.h"
#include "userspace/process/vdso_file.h"

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
    "module+0xOFFSET. At the end, stderr lists every module: resolved (from\n"
    "where) or why not.\n";

void print_report(const Capture& capture, const RenderedOutput& output,
                  const std::string& kernel_problem) {
  size_t resolved = 0;
  for (const ModuleReport& report : output.modules)
    if (report.resolved()) ++resolved;
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples, %zu unique stacks; modules resolved: %zu of %zu\n",
               capture.samples, output.unique_stacks, resolved, output.modules.size());
  for (const ModuleReport& report : output.modules) print_module_report(report);
  if (!kernel_problem.empty())
    std::fprintf(stderr, "gsymprof: kernel frames are not named: %s\n",
                 escape_control(kernel_problem).c_str());
}

}  // namespace

int cmd_symbolize(int argc, char** argv) {
  std::string capture_path, output_path;
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
  add_symbolize_flags(cli, symbolize_flags);
  add_format_flag(cli, format);
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (std::string problem = check_format_destination(format, output_path); !problem.empty())
    return cli.usage_error(problem);

  // Capture errors can quote the capture's strings: failure() escapes them.
  auto capture = read_profile_file(capture_path);
  if (!capture) return cli.failure(capture.error().message);
  auto locator = open_locator(symbolize_flags.gsym_dirs);
  if (!locator) return cli.failure(locator.error().to_string());

  // Taken before render frees the stacks.
  const std::string kernel_problem = has_kernel_frames(*capture) ? capture->kernel.error : "";
  auto output = render(*capture, *locator, symbolize_flags.options, format, /*free_stacks=*/true);
  if (!output) return cli.failure(capture_path + ": " + output.error().to_string());
  if (auto status = write_output(output->bytes, output_path); !status)
    return cli.failure(status.error().message);
  print_locator_notes(*locator);
  print_report(*capture, *output, kernel_problem);
  return 0;
}

}  // namespace gsymprof
