// PLACEHOLDER during development: replaced by the real command.
#include <cstdio>
#include "userspace/commands.h"
namespace gsymprof {
int cmd_record(int, char**) { std::fputs("gsymprof record: not built yet\n", stderr); return 1; }
}  // namespace gsymprof
