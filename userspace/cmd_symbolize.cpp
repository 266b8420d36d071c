// PLACEHOLDER during development: replaced by the real command.
#include <cstdio>
#include "userspace/commands.h"
namespace gsymprof {
int cmd_symbolize(int, char**) { std::fputs("gsymprof symbolize: not built yet\n", stderr); return 1; }
}  // namespace gsymprof
