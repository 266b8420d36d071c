// userspace/report/session_summary.h - stage: what a sampling session
// (profile, record) says on stderr besides the summary (run_summary.h):
// what the kernel cannot do, and how the launched command ended.
#pragma once

#include <string>
#include <vector>

#include "userspace/session/profile_session.h"

namespace gsymprof {

// How the launched command (-- CMD) ended, as the summary's last line:
// "gsymprof: CMD exited 3", "... was killed by SIGSEGV", "... was stopped
// (SIGTERM) when sampling ended"; nothing without a command.
void print_command_end(const SessionStats& stats);
// The exit code profile and record end with, as perf record does: the
// command's status (128 + N for a death by signal N), 0 when gsymprof ended
// it or there was none.
int command_exit_code(const SessionStats& stats);

// What the kernel cannot do and what is lost (Sampler::notices), a line each.
void print_notices(const std::vector<std::string>& notices);

}  // namespace gsymprof
