// gsymprof symbolize CAPTURE: a capture file (written by `record`) -> folded
// stacks or JSON, through the same symbolize() + folded_text() as `profile`,
// so the output for the same stacks is the same. Never touches /proc.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gsym/file_io.h"
#include "userspace/process/vdso_file.h"
#include "userspace/capture/capture_file.h"
#include "userspace/cli/commands.h"
#include "userspace/output/folded_output.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/output/json_output.h"
#include "userspace/symbolize/symbolize.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr const char* kUsageLine =
    "usage: gsymprof symbolize CAPTURE [--gsym-dir DIR]... [-o OUT] [--no-inline]\n"
    "                          [--pid-in-comm] [--format folded|json]\n";

void print_help() {
  std::fputs(kUsageLine, stdout);
  std::fputs(
      "\nSymbolizes a capture written by 'gsymprof record' (possibly on another\n"
      "machine) and prints the same folded stacks 'gsymprof profile' would have\n"
      "printed for those stacks.\n\n"
      "  CAPTURE           the capture file (format: userspace/capture/capture-format.md)\n"
      "  --gsym-dir DIR    look for GSYM files (*.gsym, any name, matched by the\n"
      "                    build ID in their header) in DIR; repeatable, searched\n"
      "                    in order before the cache\n"
      "  -o OUT            write the output to OUT (atomically) instead of stdout\n"
      "  --no-inline       only the concrete function per address, no inlined frames\n"
      "  --pid-in-comm     root frame is comm-PID instead of comm\n"
      "  --format F        folded (default): \"comm;root;...;leaf count\" lines;\n"
      "                    json: per stack its frames with name, file, line,\n"
      "                    inlined, module and build ID\n"
      "  -h, --help        this text\n"
      "\nA module's GSYM comes from the --gsym-dirs, then the cache\n"
      "(/var/cache/gsymprof, or $GSYMPROF_CACHE), then by converting the file at\n"
      "the module's captured path if it is still there with the same build ID.\n"
      "A GSYM with another build ID is never used: such frames print as\n"
      "module+0xOFFSET. At the end, stderr lists every module: resolved (from\n"
      "where) or why not.\n",
      stdout);
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "gsymprof symbolize: %s\n%s", message.c_str(), kUsageLine);
  return 2;
}

// Capture errors can quote the capture's strings: escaped for the terminal.
int failure(const std::string& message) {
  std::fprintf(stderr, "gsymprof symbolize: %s\n", escape_control(message).c_str());
  return 1;
}

void print_report(const Capture& capture, const SymbolizeResult& result) {
  size_t resolved = 0;
  for (const ModuleReport& report : result.modules)
    if (report.resolved()) ++resolved;
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples, %zu unique stacks; modules resolved: %zu of %zu\n",
               capture.samples, result.stacks.size(), resolved, result.modules.size());
  // Paths, reasons and notes come from the capture and the file system.
  for (const ModuleReport& report : result.modules)
    std::fprintf(stderr, "  %s\n", escape_control(describe(report)).c_str());
}

}  // namespace

int cmd_symbolize(int argc, char** argv) {
  std::string capture_path, output_path, format = "folded";
  bool have_capture = false;
  std::vector<std::string> gsym_dirs;
  SymbolizeOptions options;
  // The [vdso] of the recording machine: this machine's own image stands in
  // when its build ID matches (the locator checks), like any local file.
  options.local_elf_path = [](const CaptureModule& module) { return openable_module_path(module.path); };

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      return 0;
    } else if (arg == "-o" || arg == "--gsym-dir" || arg == "--format") {
      if (i + 1 >= argc) return usage_error(arg + " needs a value");
      std::string value = argv[++i];
      if (value.empty()) return usage_error(arg + " needs a non-empty value");
      if (arg == "-o") output_path = value;
      else if (arg == "--gsym-dir") gsym_dirs.push_back(value);
      else format = value;
    } else if (arg == "--no-inline") {
      options.inline_frames = false;
    } else if (arg == "--pid-in-comm") {
      options.pid_in_comm = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (have_capture) {
      return usage_error("more than one capture file given");
    } else {
      capture_path = arg;
      have_capture = true;
    }
  }
  if (!have_capture) return usage_error("missing CAPTURE file");
  if (format != "folded" && format != "json")
    return usage_error("--format must be folded or json, not '" + format + "'");

  auto capture = read_capture_file(capture_path);
  if (!capture) return failure(capture.error().message);

  LocatorOptions locator_options;
  locator_options.cache_dir = default_cache_dir();
  GsymLocator locator(locator_options);
  for (const std::string& dir : gsym_dirs)
    if (auto status = locator.add_gsym_dir(dir); !status) return failure(status.error().to_string());

  auto result = symbolize(*capture, locator, options);
  if (!result) return failure(capture_path + ": " + result.error().to_string());
  // The result no longer needs the capture's stacks (the biggest part of
  // it): free them before the output text is built.
  std::vector<CaptureStack>().swap(capture->stacks);

  const std::string text = format == "json" ? symbolized_json(*result) : folded_text(*result);
  if (output_path.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      return failure(std::string("cannot write to stdout: ") + std::strerror(errno));
  } else if (auto status = gsym::write_file_atomically(output_path, text); !status) {
    return failure(status.error().message);
  }
  for (const std::string& note : locator.notes())
    std::fprintf(stderr, "gsymprof: note: %s\n", escape_control(note).c_str());
  print_report(*capture, *result);
  return 0;
}

}  // namespace gsymprof
