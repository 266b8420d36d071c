// userspace/report/session_summary.h - stage: the summary of a sampling
// session (profile, record) on stderr: samples, losses, JIT, kernel stacks,
// the ring buffer, the side-band; and what the kernel could not do.
#pragma once

#include <string>
#include <vector>

#include "userspace/capture/capture.h"
#include "userspace/session/profile_session.h"

namespace gsymprof {

// Prints the sampling part of the end-of-run summary on stderr, the same for
// profile and record: samples taken, recorded and lost, then print_losses.
void print_sampling_summary(const Capture& capture, const SessionStats& stats);

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
