// gsymprof flamegraph FOLDED [-o OUT.svg] [--title T]: folded stacks -> an
// interactive, self-contained SVG flame graph (flamegraph.h).
#include <cstdio>
#include <string>

#include "gsym/base/file_io.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/output/flamegraph.h"
#include "userspace/session/profile_file.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Renders folded stacks (\"frame;frame;... COUNT\" per line, e.g. the output\n"
    "of 'gsymprof profile' or 'gsymprof symbolize') as a self-contained\n"
    "interactive SVG flame graph: click a frame to zoom, Reset Zoom or Escape to\n"
    "zoom out, type a regular expression in the search box to highlight frames.\n"
    "Colours: functions red, inlined (_[i]) aqua, kernel (_[k]) orange,\n"
    "unresolved ([unknown], module+0x...) grey.\n";

gsym::Expected<std::string> read_stdin() {
  std::string text;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
  if (std::ferror(stdin)) return gsym::Error("<stdin>: read failed");
  return text;
}

}  // namespace

int cmd_flamegraph(int argc, char** argv) {
  std::string input, output;
  FlamegraphOptions options;
  options.title = "Flame Graph";
  CommandLine cli("flamegraph", kAbout);
  cli.section("arguments");
  cli.argument("FOLDED", "input file", "folded-stack file ('-' reads standard input)", input);
  cli.section("options");
  cli.path("-o,--output", "OUT.svg", "write the SVG to OUT.svg atomically (default: standard output)",
           output);
  cli.value("--title", "TITLE", "title above the graph (default: \"Flame Graph\")",
            [&options](const std::string& title) { options.title = title; });
  cli.unquoted_unknown_options();
  cli.example("folded stacks from 'gsymprof profile -o' or 'gsymprof symbolize -o'",
              "gsymprof flamegraph out.folded -o flame.svg --title 'my service'")
      .example("straight from a profile",
               "sudo gsymprof profile -d 10 | gsymprof flamegraph - -o flame.svg");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;

  auto text = input == "-" ? read_stdin() : gsym::read_file_text(input, kMaxStackFileBytes);
  if (!text) return cli.failure(text.error().message);
  const std::string input_name = input == "-" ? "<stdin>" : input;
  auto stacks = parse_folded(*text);
  if (!stacks) {
    // A capture or a perf.data file needs symbolizing first: say with what.
    if (const std::string kind = profile_file_kind(*text); !kind.empty())
      return cli.failure(input_name + " is " + kind + ", not folded stacks: run 'gsymprof symbolize --svg OUT.svg " +
                         (input == "-" ? std::string("FILE") : input) + "' to draw its flame graph");
    return cli.failure(input_name + ": " + stacks.error().message);
  }
  auto svg = render_flamegraph_svg(*stacks, options);
  if (!svg) return cli.failure(input_name + ": " + svg.error().message);
  if (auto status = write_output(*svg, output); !status) return cli.failure(status.error().message);
  return 0;
}

}  // namespace gsymprof
