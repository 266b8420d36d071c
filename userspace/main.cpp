// gsymprof: eBPF CPU profiler and GSYM symbolizer. Dispatches to subcommands.
#include <signal.h>

#include <cstdio>
#include <cstring>

#include "gsym/file_io.h"
#include "userspace/cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: gsymprof COMMAND [ARGS...]\n"
    "\n"
    "commands:\n"
    "  profile     sample on-CPU user stacks and print folded stacks\n"
    "  record      sample and write a capture file (symbolize later)\n"
    "  symbolize   turn a capture into folded stacks using GSYM files\n"
    "  flamegraph  render folded stacks as an interactive SVG\n"
    "  gsym        GSYM files: convert, lookup, dump, verify\n"
    "\n"
    "Run 'gsymprof COMMAND --help' for a command's options.\n";

struct Command {
  const char* name;
  int (*run)(int, char**);
};

constexpr Command kCommands[] = {
    {"profile", gsymprof::cmd_profile},     {"record", gsymprof::cmd_record},
    {"symbolize", gsymprof::cmd_symbolize}, {"flamegraph", gsymprof::cmd_flamegraph},
    {"gsym", gsymprof::cmd_gsym},
};

// A signal that ends gsymprof removes the temporary file of any output still
// being written (outputs appear whole or not at all), then ends it as the
// signal would. Sampling replaces the SIGINT/SIGTERM handlers while it runs
// (there they stop sampling) and restores these.
void end_on_signal(int signal) {
  gsym::remove_pending_temporary_files();
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void install_cleanup_handlers() {
  struct sigaction action {};
  action.sa_handler = end_on_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::sigaction(signal, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  install_cleanup_handlers();
  for (const Command& c : kCommands)
    if (!std::strcmp(argv[1], c.name)) return c.run(argc - 1, argv + 1);
  std::fprintf(stderr, "gsymprof: unknown command '%s'\n%s", argv[1], kUsage);
  return 2;
}
