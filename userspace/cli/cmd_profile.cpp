// gsymprof profile: sample live processes, symbolize each unique stack once
// through GSYM files chosen by build ID, print folded stacks.
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gsym/file_io.h"
#include "userspace/cli/commands.h"
#include "userspace/output/flamegraph.h"
#include "userspace/output/folded_output.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/session/profile_session.h"
#include "userspace/symbolize/symbolize.h"
#include "userspace/session/target_options.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr const char* kUsageLine =
    "usage: gsymprof profile [-p PID[,PID...]] [-F HZ] [-d SECONDS] [-o OUT]\n"
    "                        [--call-graph fp|dwarf[,SIZE]] [--gsym-dir DIR]...\n"
    "                        [--no-inline] [--pid-in-comm] [--svg FILE] [-- CMD ARGS...]\n";

void print_help() {
  std::fputs(kUsageLine, stdout);
  std::fputs(
      "\nSamples on-CPU user stacks with eBPF and prints folded stacks\n"
      "(\"comm;root;...;leaf count\", sorted), inlined frames marked _[i].\n"
      "Needs root (or CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN).\n\n"
      "targets:\n",
      stdout);
  std::fputs(target_options_help(), stdout);
  std::fputs(
      "\noutput:\n"
      "  -o OUT            write the folded stacks to OUT (atomically) instead of stdout\n"
      "  --gsym-dir DIR    look for GSYM files (*.gsym, any name, matched by build ID)\n"
      "                    in DIR; repeatable, searched in order before the cache\n"
      "  --no-inline       only the concrete function per address, no inlined frames\n"
      "  --pid-in-comm     root frame is comm-PID instead of comm\n"
      "  --svg FILE        also write the stacks as an interactive SVG flame graph\n"
      "                    (as 'gsymprof flamegraph' draws it) to FILE, atomically\n"
      "  -h, --help        this text\n"
      "\nGSYM files missing from the dirs and the cache (/var/cache/gsymprof, or\n"
      "$GSYMPROF_CACHE) are converted from the module or its debug file and cached.\n"
      "A summary (samples, losses by reason, processes, modules without symbols)\n"
      "goes to stderr at the end.\n",
      stdout);
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "gsymprof profile: %s\n%s", message.c_str(), kUsageLine);
  return 2;
}

void print_summary(const Capture& capture, const SessionStats& stats,
                   const SymbolizeResult& symbolized) {
  print_sampling_summary(capture, stats);
  std::fprintf(stderr, "gsymprof: processes seen: %zu, unique stacks: %zu\n",
               capture.processes.size(), symbolized.stacks.size());
  size_t unresolved = 0;
  for (const ModuleReport& report : symbolized.modules)
    if (!report.resolved()) ++unresolved;
  std::fprintf(stderr, "gsymprof: modules with no symbols: %zu of %zu\n", unresolved,
               symbolized.modules.size());
  // Paths, reasons and notes hold file names anyone can choose: escaped.
  for (const ModuleReport& report : symbolized.modules)
    if (!report.resolved())
      std::fprintf(stderr, "  %s\n", escape_control(describe(report)).c_str());
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  SessionOptions session;
  std::string output_path, svg_path;
  std::vector<std::string> gsym_dirs;
  SymbolizeOptions symbolize_options;

  for (int i = 1; i < argc; ++i) {
    std::string error;
    switch (parse_target_arg(argc, argv, i, session.targets, error)) {
      case ArgResult::Consumed: continue;
      case ArgResult::UsageError: return usage_error(error);
      case ArgResult::NotMine: break;
    }
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      return 0;
    } else if (arg == "-o" || arg == "--gsym-dir" || arg == "--svg") {
      if (i + 1 >= argc) return usage_error(std::string(arg) + " needs a value");
      std::string value = argv[++i];
      if (value.empty()) return usage_error(std::string(arg) + " needs a non-empty value");
      if (arg == "-o")
        output_path = value;
      else if (arg == "--svg")
        svg_path = value;
      else
        gsym_dirs.push_back(value);
    } else if (arg == "--no-inline") {
      symbolize_options.inline_frames = false;
    } else if (arg == "--pid-in-comm") {
      symbolize_options.pid_in_comm = true;
    } else {
      return usage_error("unknown option '" + std::string(arg) + "'");
    }
  }
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return usage_error(problem);

  // Check -o and the GSYM dirs before sampling, so a typo costs no profile.
  for (const std::string& path : {output_path, svg_path}) {
    if (path.empty()) continue;
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    if (::access(dir.c_str(), W_OK) != 0) {
      std::fprintf(stderr, "gsymprof profile: %s: cannot write there: %s\n", escape_control(path).c_str(),
                   std::strerror(errno));
      return 1;
    }
  }
  LocatorOptions locator_options;
  locator_options.cache_dir = default_cache_dir();
  GsymLocator locator(locator_options);
  for (const std::string& dir : gsym_dirs) {
    if (auto status = locator.add_gsym_dir(dir); !status) {
      std::fprintf(stderr, "gsymprof profile: %s\n", escape_control(status.error().to_string()).c_str());
      return 1;
    }
  }

  SessionStats stats;
  auto capture = run_sampling_session(session, &stats);
  if (!capture) {
    std::fprintf(stderr, "gsymprof profile: %s\n", escape_control(capture.error().to_string()).c_str());
    return 1;
  }
  auto symbolized = symbolize(*capture, locator, symbolize_options);
  if (!symbolized) {
    std::fprintf(stderr, "gsymprof profile: %s\n", escape_control(symbolized.error().to_string()).c_str());
    return 1;
  }
  const std::string text = folded_text(*symbolized);
  if (output_path.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout)) {
      std::fprintf(stderr, "gsymprof profile: cannot write to stdout: %s\n", std::strerror(errno));
      return 1;
    }
  } else if (auto status = gsym::write_file_atomically(output_path, text); !status) {
    std::fprintf(stderr, "gsymprof profile: %s\n", escape_control(status.error().to_string()).c_str());
    return 1;
  }
  if (!svg_path.empty()) {
    if (auto status = write_flamegraph_svg(text, svg_path, "gsymprof profile"); !status) {
      std::fprintf(stderr, "gsymprof profile: %s\n", escape_control(status.error().to_string()).c_str());
      return 1;
    }
  }
  print_summary(*capture, stats, *symbolized);
  for (const std::string& note : locator.notes())
    std::fprintf(stderr, "gsymprof: note: %s\n", escape_control(note).c_str());
  return 0;
}

}  // namespace gsymprof
