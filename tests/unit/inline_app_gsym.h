// tests/unit/inline_app_gsym.h - the GSYM the output encoders' and the
// service's tests name frames with (tests/support/inline_app_gsym.h), and a
// locator of it.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tests/support/inline_app_gsym.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof::test {

inline std::vector<uint8_t> inline_app_gsym() {
  std::vector<uint8_t> bytes = inline_app_gsym_bytes();
  REQUIRE(!bytes.empty());
  return bytes;
}

// A locator that knows only that GSYM (no cache, no conversion).
inline GsymLocator inline_app_locator() {
  LocatorOptions options;
  options.cache_dir = "";
  GsymLocator locator(options);
  REQUIRE(locator.add_gsym_bytes(inline_app_gsym(), "app").ok());
  return locator;
}

}  // namespace gsymprof::test
