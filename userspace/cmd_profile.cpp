// PLACEHOLDER during development: replaced by the real command.
#include <cstdio>
#include "userspace/commands.h"
namespace gsymprof {
int cmd_profile(int, char**) { std::fputs("gsymprof profile: not built yet\n", stderr); return 1; }
}  // namespace gsymprof
