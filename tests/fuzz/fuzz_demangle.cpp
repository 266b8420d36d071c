// libFuzzer target: demangle() on any name. It must return, bounded (a
// crafted name can expand exponentially), and leave unmangled names as they
// are.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/symbolize/demangle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view name(reinterpret_cast<const char*>(data), size);
  const std::string out = gsymprof::demangle(name);
  if (out.size() > (size_t{1} << 20) + size) std::abort();
  if (!name.starts_with("_Z") && !name.starts_with("_R") && out != name) std::abort();
  return 0;
}
