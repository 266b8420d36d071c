// tests/unit/inline_app_gsym.h - the GSYM the output encoders' tests name
// frames with (pprof, OTLP): an "app" module, build ID aa010203, with main
// [0x1000,0x1100) and foo [0x1100,0x1200) (mangled _Z3fooi), bar inlined in
// foo at [0x1110,0x1150) from app.c:20.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "gsym/builder/builder.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof::test {

inline const std::vector<uint8_t> kInlineAppId = {0xaa, 0x01, 0x02, 0x03};

inline std::vector<uint8_t> inline_app_gsym() {
  gsym::Builder builder;
  builder.set_build_id(kInlineAppId);
  uint32_t app_c = builder.add_file({"/src", "app.c"});
  gsym::Function main_fn;
  main_fn.range = {0x1000, 0x1100};
  main_fn.name = "main";
  main_fn.lines = {{0x1000, app_c, 10}};
  REQUIRE(builder.add_function(main_fn).ok());
  gsym::Function foo;
  foo.range = {0x1100, 0x1200};
  foo.name = "_Z3fooi";
  foo.lines = {{0x1100, app_c, 5}, {0x1110, app_c, 50}};
  gsym::InlineNode bar;
  bar.ranges = {{0x1110, 0x1150}};
  bar.name = "bar";
  bar.call_file = app_c;
  bar.call_line = 20;
  gsym::InlineNode root;
  root.ranges = {foo.range};
  root.name = foo.name;
  root.children = {bar};
  foo.inline_tree = root;
  REQUIRE(builder.add_function(foo).ok());
  auto bytes = builder.encode();
  REQUIRE(bytes.ok());
  return *bytes;
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
