// gsymprof flamegraph FOLDED [-o OUT.svg] [--title T]: folded stacks -> an
// interactive, self-contained SVG flame graph (flamegraph.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "gsym/file_io.h"
#include "userspace/cli/commands.h"
#include "userspace/output/flamegraph.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

// Folded text larger than this is refused before it is read.
constexpr uint64_t kMaxFoldedInputBytes = uint64_t{1} << 31;

constexpr const char* kUsage =
    "usage: gsymprof flamegraph FOLDED [-o OUT.svg] [--title TITLE]\n"
    "\n"
    "Renders folded stacks (\"frame;frame;... COUNT\" per line, e.g. the output\n"
    "of 'gsymprof profile' or 'gsymprof symbolize') as a self-contained\n"
    "interactive SVG flame graph: click a frame to zoom, Reset Zoom or Escape to\n"
    "zoom out, type a regular expression in the search box to highlight frames.\n"
    "Colours: functions red, inlined (_[i]) aqua, kernel (_[k]) orange,\n"
    "unresolved ([unknown], module+0x...) grey.\n"
    "\n"
    "  FOLDED          folded-stack file ('-' reads standard input)\n"
    "  -o, --output F  write the SVG to F atomically (default: standard output)\n"
    "  --title T       title above the graph (default: \"Flame Graph\")\n"
    "  -h, --help      show this help\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "gsymprof flamegraph: %s\n%s", message.c_str(), kUsage);
  return 2;
}

}  // namespace

int cmd_flamegraph(int argc, char** argv) {
  std::string input, output, title = "Flame Graph";
  bool have_input = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "-o" || arg == "--output") {
      if (!value(&output)) return usage_error(arg + " needs a file name");
    } else if (arg.starts_with("--output=")) {
      output = arg.substr(9);
    } else if (arg == "--title") {
      if (!value(&title)) return usage_error("--title needs a value");
    } else if (arg.starts_with("--title=")) {
      title = arg.substr(8);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option " + arg);
    } else if (have_input) {
      return usage_error("more than one input file");
    } else {
      input = arg;
      have_input = true;
    }
  }
  if (!have_input) return usage_error("missing FOLDED input file");

  std::string text;
  std::string input_name = input == "-" ? "<stdin>" : input;
  if (input == "-") {
    char buffer[65536];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
    if (std::ferror(stdin)) {
      std::fprintf(stderr, "gsymprof flamegraph: <stdin>: read failed\n");
      return 1;
    }
  } else {
    auto read = gsym::read_file_text(input, kMaxFoldedInputBytes);
    if (!read) {
      std::fprintf(stderr, "gsymprof flamegraph: %s\n", escape_control(read.error().message).c_str());
      return 1;
    }
    text = std::move(*read);
  }
  auto stacks = parse_folded(text);
  if (!stacks) {
    std::fprintf(stderr, "gsymprof flamegraph: %s: %s\n", escape_control(input_name).c_str(),
                 escape_control(stacks.error().message).c_str());
    return 1;
  }
  FlamegraphOptions options;
  options.title = title;
  auto svg = render_flamegraph_svg(*stacks, options);
  if (!svg) {
    std::fprintf(stderr, "gsymprof flamegraph: %s: %s\n", escape_control(input_name).c_str(),
                 escape_control(svg.error().message).c_str());
    return 1;
  }
  if (output.empty()) {
    if (std::fwrite(svg->data(), 1, svg->size(), stdout) != svg->size() || std::fflush(stdout) != 0) {
      std::fprintf(stderr, "gsymprof flamegraph: <stdout>: write failed\n");
      return 1;
    }
    return 0;
  }
  auto written = gsym::write_file_atomically(output, *svg);
  if (!written) {
    std::fprintf(stderr, "gsymprof flamegraph: %s\n", escape_control(written.error().message).c_str());
    return 1;
  }
  return 0;
}

}  // namespace gsymprof
