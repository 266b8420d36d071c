// gsym/expected.cpp - Error formatting.
#include "gsym/expected.h"

#include <cinttypes>
#include <cstdio>

namespace gsym {

std::string Error::to_string() const {
  if (offset == kNoOffset) return message;
  char buf[40];
  std::snprintf(buf, sizeof buf, " at offset 0x%" PRIx64, offset);
  return message + buf;
}

}  // namespace gsym
