// userspace/report/progress_line.h - a progress line on stderr, shown only
// when stderr is a terminal: each line overwrites the last ("\r"), an empty
// one erases it. What symbolize's progress callbacks are given by the CLI.
#pragma once

#include "userspace/symbolize/progress.h"

namespace gsymprof {

// A ProgressFn that draws on stderr if it is a terminal, else does nothing.
ProgressFn terminal_progress();

}  // namespace gsymprof
