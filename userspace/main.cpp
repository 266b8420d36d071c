// gsymprof: eBPF CPU profiler and GSYM symbolizer. Dispatches to subcommands.
#include <signal.h>

#include "gsym/base/file_io.h"
#include "userspace/cli/command_line.h"
#include "userspace/cli/commands.h"

namespace {

constexpr gsymprof::Subcommand kCommands[] = {
    {"profile", "sample on-CPU stacks and print folded stacks", gsymprof::cmd_profile},
    {"record", "sample and write a capture file (symbolize later)", gsymprof::cmd_record},
    {"agent", "profile continuously: pprof files, a pprof/Prometheus endpoint", gsymprof::cmd_agent},
    {"serve", "a symbolization service: names other agents' OTLP and pprof frames", gsymprof::cmd_serve},
    {"symbolize", "turn a capture into folded stacks using GSYM files", gsymprof::cmd_symbolize},
    {"flamegraph", "render folded stacks as an interactive SVG", gsymprof::cmd_flamegraph},
    {"heatmap", "a capture's samples over time: heatmap and flame graphs of ranges (HTML)", gsymprof::cmd_heatmap},
    {"diff", "compare two profiles: differential flame graph, changed functions", gsymprof::cmd_diff},
    {"gsym", "GSYM files: convert, lookup, dump, verify", gsymprof::cmd_gsym},
    {"doctor", "check what this kernel and machine let gsymprof do", gsymprof::cmd_doctor},
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
  install_cleanup_handlers();
  return gsymprof::run_program(kCommands, argc, argv);
}
