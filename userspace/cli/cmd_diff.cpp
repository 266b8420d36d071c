// gsymprof diff BASE NEW: two profiles compared (profile_diff.h). Each is
// folded stacks, a pprof file (gzipped profile.proto, as gsymprof and Go
// write it) or a capture / perf.data file, symbolized on the way exactly as
// `gsymprof symbolize` does (read_profile_file, the GSYM locator by build
// ID, symbolize, fold_stacks).
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gsym/base/file_io.h"
#include "userspace/base/text_escape.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/output/flamegraph.h"
#include "userspace/output/folded_output.h"
#include "userspace/output/pprof_input.h"
#include "userspace/output/profile_diff.h"
#include "userspace/process/vdso_file.h"
#include "userspace/report/run_summary.h"
#include "userspace/session/profile_file.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Compares two profiles of the same program: BASE (before) and NEW (after).\n"
    "Each is folded stacks, a pprof file (gzipped profile.proto, as\n"
    "'--format pprof' and Go write it), or a capture or perf.data file,\n"
    "symbolized on the way as 'gsymprof symbolize' does (GSYM files by build ID).\n"
    "BASE's counts are scaled to NEW's total first, so changes are changes of\n"
    "share; every output says so (--no-normalize compares raw counts).\n";

constexpr const char* kEpilogue =
    "svg (default): a differential flame graph, FlameGraph's convention: widths\n"
    "from NEW, each frame coloured by the change of its own samples, red grew,\n"
    "blue shrank, white unchanged, the deeper the larger the change; tooltips\n"
    "give both profiles' samples and the change. --negate draws BASE's widths\n"
    "(same colours), so that frames NEW no longer has show, blue.\n"
    "text and json: every function with its self and total share in BASE and\n"
    "NEW, the largest change of self samples first (pprof -top's order).\n";

enum class DiffFormat { Svg, Json, Text };

class InputReader {
 public:
  explicit InputReader(const SymbolizeFlags& flags) : flags_(flags) {}

  // A profile file's stacks, folded as the folded output names frames.
  // `role`: "BASE" or "NEW", for the summary lines. Errors name the file.
  gsym::Expected<std::vector<FoldedLine>> read(const std::string& path, const char* role) {
    auto file = gsym::open_regular_file(path);
    if (!file) return file.error();
    char head[512];
    const ssize_t got = ::pread(file->fd.get(), head, sizeof head, 0);
    if (got < 0) return gsym::Error(path + ": cannot read");
    const std::string_view start(head, static_cast<size_t>(got));
    auto perf_data = is_perf_data_file(path);
    if (!perf_data) return perf_data.error();
    const size_t text_start = start.find_first_not_of(" \t\r\n");
    if (*perf_data || (text_start != std::string_view::npos && start[text_start] == '{'))
      return read_capture(path, role);

    auto bytes = gsym::read_file_text(path, kMaxStackFileBytes);
    if (!bytes) return bytes.error();
    if (is_gzip(*bytes)) return read_pprof(path, *bytes, role);
    auto folded = parse_folded(*bytes);
    if (folded) return folded;
    // A pprof profile that was not gzipped: a protobuf message starting with
    // its sample types (field 1).
    if (!bytes->empty() && (*bytes)[0] == '\x0a')
      if (auto pprof = read_pprof(path, *bytes, role)) return pprof;
    return gsym::Error(path + ": not folded stacks (" + folded.error().message +
                       "), nor pprof, a capture or perf.data");
  }

 private:
  gsym::Expected<std::vector<FoldedLine>> read_pprof(const std::string& path, const std::string& bytes, const char* role) {
    auto pprof = folded_from_pprof(bytes);
    if (!pprof) return gsym::Error(path + ": " + pprof.error().message);
    if (pprof->sample_type != "samples/count")
      std::fprintf(stderr, "gsymprof: %s %s: comparing the pprof values %s\n", role,
                   escape_control(path).c_str(), pprof->sample_type.c_str());
    return std::move(pprof->stacks);
  }

  gsym::Expected<std::vector<FoldedLine>> read_capture(const std::string& path, const char* role) {
    auto capture = read_profile_file(path);
    if (!capture) return capture.error();
    if (!locator_) {
      auto locator = open_locator(flags_.gsym_dirs);
      if (!locator) return locator.error();
      locator_.emplace(std::move(*locator));
    }
    SymbolizeOptions options = flags_.options;
    // The [vdso] of the recording machine: this machine's own image stands
    // in when its build ID matches, as `symbolize` does.
    options.local_elf_path = [](const CaptureModule& module) { return openable_module_path(module.path); };
    auto result = symbolize(*capture, *locator_, options);
    if (!result) return gsym::Error(path + ": " + result.error().to_string());
    size_t resolved = 0;
    for (const ModuleReport& report : result->modules)
      if (report.resolved()) ++resolved;
    std::fprintf(stderr, "gsymprof: %s %s: %llu samples; modules resolved: %zu of %zu\n", role,
                 escape_control(path).c_str(), static_cast<unsigned long long>(capture->samples), resolved,
                 result->modules.size());
    // Modules without names, with what to do, as `profile` lists them.
    print_unresolved_modules(result->modules, /*and_the_rest=*/true);
    return fold_stacks(*result);
  }

  const SymbolizeFlags& flags_;
  std::optional<GsymLocator> locator_;  // opened for the first capture
};

}  // namespace

int cmd_diff(int argc, char** argv) {
  std::string base_path, new_path, output_path;
  DiffFormat format = DiffFormat::Svg;
  bool negate = false, normalize = true;
  SymbolizeFlags symbolize_flags;
  CommandLine cli("diff", kAbout, kEpilogue);
  cli.section("arguments");
  cli.argument("BASE", "profile",
               "the profile before: folded stacks, pprof (.pb.gz), a capture or perf.data", base_path);
  cli.argument("NEW", "profile", "the profile after, of any of the same kinds", new_path);
  cli.section("options");
  cli.path("-o,--output", "OUT", "write the output to OUT (atomically) instead of stdout", output_path);
  cli.value("--format", "svg|json|text",
            "svg (default): a differential flame graph; text: a table of the functions whose "
            "share changed, the largest self change first; json: the same for scripts",
            [&format](const std::string& value) {
              if (value == "svg") format = DiffFormat::Svg;
              else if (value == "json") format = DiffFormat::Json;
              else if (value == "text") format = DiffFormat::Text;
              else throw UsageError("--format must be svg, json or text, not '" + value + "'");
            });
  cli.flag("--negate", "svg: draw BASE's widths (frames gone from NEW show, blue)", [&negate] { negate = true; });
  cli.flag("--no-normalize", "compare raw counts (default: BASE scaled to NEW's total samples)",
           [&normalize] { normalize = false; });
  cli.section("captures and perf.data");
  add_symbolize_flags(cli, symbolize_flags);
  cli.example("two folded profiles, as a differential flame graph",
              "gsymprof diff before.folded after.folded -o diff.svg")
      .example("the functions whose share changed most, of two captures",
               "gsymprof diff before.json after.json --format text");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (negate && format != DiffFormat::Svg)
    return cli.usage_error("--negate changes the flame graph: it cannot be combined with --format " +
                           std::string(format == DiffFormat::Json ? "json" : "text"));
  if (!output_path.empty())
    if (auto status = check_output_directory(output_path); !status) return cli.failure(status.error().to_string());

  InputReader reader(symbolize_flags);
  auto base = reader.read(base_path, "BASE");
  if (!base) return cli.failure(base.error().message);
  auto after = reader.read(new_path, "NEW");
  if (!after) return cli.failure(after.error().message);
  auto diff = diff_profiles(base_path, std::move(*base), new_path, std::move(*after), normalize);
  if (!diff) return cli.failure(diff.error().message);

  std::string bytes;
  if (format == DiffFormat::Text) {
    bytes = diff_text(*diff);
  } else if (format == DiffFormat::Json) {
    bytes = diff_json(*diff);
  } else {
    auto svg = diff_flamegraph_svg(*diff, negate);
    if (!svg) return cli.failure(svg.error().message);
    bytes = std::move(*svg);
  }
  if (auto status = write_output(bytes, output_path); !status) return cli.failure(status.error().message);
  return 0;
}

}  // namespace gsymprof
