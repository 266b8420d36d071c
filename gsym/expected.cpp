// gsym/expected.cpp - Error formatting.
#include "gsym/expected.h"

namespace gsym {

std::string Error::to_string() const {
  if (offset == kNoOffset) return message;
  return message + " at offset " + hex_number(offset);
}

}  // namespace gsym
