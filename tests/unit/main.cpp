#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <string_view>

#include "userspace/symbolize/child_conversion.h"

// The unit tests of child_conversion.h start this binary as their
// conversion child (/proc/self/exe), as gsymprof's run_program does.
int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == gsymprof::kConversionChildCommand)
    return gsymprof::run_conversion_child(argc - 1, argv + 1);
  return doctest::Context(argc, argv).run();
}
