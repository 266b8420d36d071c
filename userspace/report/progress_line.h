// userspace/report/progress_line.h - a progress line on stderr, shown only
// when stderr is a terminal: each line overwrites the last ("\r"), an empty
// one erases it. What symbolize's progress callbacks are given by the CLI,
// and the lines a sampling session shows while it runs.
#pragma once

#include <cstdint>
#include <string>

#include "userspace/session/target_options.h"
#include "userspace/symbolize/progress.h"

namespace gsymprof {

// A ProgressFn that draws on stderr if it is a terminal, else does nothing.
ProgressFn terminal_progress();

// The terminal lines of a sampling session (profile, record), on stderr and
// only when it is a terminal (nothing in logs and pipes):
//   gsymprof: sampling pid 1234 at 99 Hz, call graph dwarf; stops on Ctrl-C or after 10 s
//   gsymprof: 1234 samples, 3.5 s of 10 s                   (redrawn, twice a second)
class SamplingProgress {
 public:
  explicit SamplingProgress(const TargetOptions& targets);
  // The start line, once sampling runs.
  void start() const;
  // The live line (SessionOptions::on_progress).
  void update(uint64_t samples, double elapsed_s) const;
  // Erases the live line, before the summary.
  void finish() const;

 private:
  ProgressFn line_;
  std::string start_line_;
  std::string of_duration_;  // " of 10 s", or "" without -d
};

}  // namespace gsymprof
