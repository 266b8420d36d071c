#include "tests/support/inline_app_gsym.h"

#include "gsym/builder/builder.h"

namespace gsymprof::test {

std::vector<uint8_t> inline_app_gsym_bytes() {
  gsym::Builder builder;
  builder.set_build_id(kInlineAppId);
  uint32_t app_c = builder.add_file({"/src", "app.c"});
  gsym::Function main_fn;
  main_fn.range = {0x1000, 0x1100};
  main_fn.name = "main";
  main_fn.lines = {{0x1000, app_c, 10}};
  if (!builder.add_function(main_fn).ok()) return {};
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
  if (!builder.add_function(foo).ok()) return {};
  auto bytes = builder.encode();
  return bytes ? std::move(*bytes) : std::vector<uint8_t>{};
}

}  // namespace gsymprof::test
