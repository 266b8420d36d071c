// read_capture - test tool for tests/bench/capture_memory.sh: reads a capture
// file with read_capture_file alone, as `symbolize` calls it, so that its
// memory and time can be measured without symbolizing.
//
//   read_capture CAPTURE   prints "N modules, N processes, N stacks"
#include <cstdio>

#include "userspace/capture/capture_file.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: read_capture CAPTURE\n", stderr);
    return 2;
  }
  auto capture = gsymprof::read_capture_file(argv[1]);
  if (!capture) {
    std::fprintf(stderr, "%s\n", capture.error().message.c_str());
    return 1;
  }
  std::printf("%zu modules, %zu processes, %zu stacks\n", capture->modules.size(),
              capture->processes.size(), capture->stacks.size());
  return 0;
}
