// userspace/symbolize/progress.h - how long work tells how far it got,
// without printing: the caller (report/progress_line.h on a terminal)
// decides whether and where. A line replaces the previous one; "" ends it.
#pragma once

#include <functional>
#include <string>

namespace gsymprof {

using ProgressFn = std::function<void(const std::string& line)>;

}  // namespace gsymprof
