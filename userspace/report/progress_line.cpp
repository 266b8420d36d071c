#include "userspace/report/progress_line.h"

#include <unistd.h>

#include <cstdio>

#include "userspace/base/text_escape.h"

namespace gsymprof {

ProgressFn terminal_progress() {
  if (::isatty(STDERR_FILENO) != 1) return {};
  return [](const std::string& line) {
    if (line.empty())
      std::fputs("\r\033[K", stderr);
    else
      std::fprintf(stderr, "\r\033[Kgsymprof: %s", escape_control(line).c_str());
    std::fflush(stderr);
  };
}

}  // namespace gsymprof
