#include "userspace/report/session_summary.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "userspace/base/text_escape.h"

namespace gsymprof {

void print_command_end(const SessionStats& stats) {
  const int status = stats.command_exit_status;
  if (status < 0) return;
  const std::string name = escape_control(stats.command_name);
  if (WIFEXITED(status)) {
    std::fprintf(stderr, "gsymprof: %s exited %d\n", name.c_str(), WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    const char* signal_name = sigabbrev_np(WTERMSIG(status));
    const std::string signal = signal_name ? std::string("SIG") + signal_name : std::to_string(WTERMSIG(status));
    if (stats.command_stopped)
      std::fprintf(stderr, "gsymprof: %s was stopped (%s) when sampling ended\n", name.c_str(), signal.c_str());
    else
      std::fprintf(stderr, "gsymprof: %s was killed by %s\n", name.c_str(), signal.c_str());
  }
}

int command_exit_code(const SessionStats& stats) {
  const int status = stats.command_exit_status;
  if (status < 0 || stats.command_stopped) return 0;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 0;
}

void print_notices(const std::vector<std::string>& notices) {
  for (const std::string& notice : notices) std::fprintf(stderr, "gsymprof: %s\n", notice.c_str());
}

}  // namespace gsymprof
