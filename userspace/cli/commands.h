// userspace/cli/commands.h - the gsymprof subcommands. Each takes the arguments
// after its own name (argv[0] is the command name) and returns the exit code:
// 0 ok, 1 bad input or failure (one line on stderr), 2 usage error.
#pragma once

#include <span>

#include "userspace/cli/command_line.h"

namespace gsymprof {

// program.cpp: gsymprof's own options (--version; --man, hidden: the manual
// page), then the command argv[1] names (run_subcommand).
int run_program(std::span<const Subcommand> commands, int argc, char** argv);

int cmd_gsym(int argc, char** argv);        // cmd_gsym.cpp: lookup, dump, verify, convert
int cmd_gsym_convert(int argc, char** argv);  // cmd_gsym_convert.cpp: gsym convert
int cmd_profile(int argc, char** argv);     // cmd_profile.cpp
int cmd_record(int argc, char** argv);      // cmd_record.cpp
int cmd_symbolize(int argc, char** argv);   // cmd_symbolize.cpp
int cmd_flamegraph(int argc, char** argv);  // cmd_flamegraph.cpp
int cmd_heatmap(int argc, char** argv);     // cmd_heatmap.cpp
int cmd_diff(int argc, char** argv);        // cmd_diff.cpp
int cmd_doctor(int argc, char** argv);      // cmd_doctor.cpp
int cmd_agent(int argc, char** argv);       // cmd_agent.cpp
int cmd_serve(int argc, char** argv);       // cmd_serve.cpp

}  // namespace gsymprof
