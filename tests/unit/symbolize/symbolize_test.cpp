#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gsym/builder/builder.h"
#include "userspace/output/folded_output.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"
#include "tests/unit/test_files.h"

using namespace gsymprof;

namespace {

const std::vector<uint8_t> kAppId = {0xaa, 0x01, 0x02, 0x03};
const std::vector<uint8_t> kLibId = {0xbb, 0x02};
const std::vector<uint8_t> kMissingId = {0xcc, 0x03};

// app: main [0x1000,0x1100); foo(int) [0x1100,0x1200) with bar(int) inlined
// at [0x1110,0x1150) and baz inlined into bar at [0x1120,0x1130).
std::vector<uint8_t> app_gsym() {
  gsym::Builder builder;
  builder.set_build_id(kAppId);
  uint32_t app_c = builder.add_file({"/src", "app.c"});
  uint32_t inline_h = builder.add_file({"/src/include", "inline.h"});
  gsym::Function main_fn;
  main_fn.range = {0x1000, 0x1100};
  main_fn.name = "main";
  main_fn.lines = {{0x1000, app_c, 10}, {0x1040, app_c, 12}};
  REQUIRE(builder.add_function(main_fn).ok());

  gsym::Function foo;
  foo.range = {0x1100, 0x1200};
  foo.name = "_Z3fooi";
  foo.lines = {{0x1100, app_c, 5}, {0x1110, inline_h, 50}, {0x1120, inline_h, 40},
               {0x1130, inline_h, 51}, {0x1150, app_c, 7}};
  gsym::InlineNode baz;
  baz.ranges = {{0x1120, 0x1130}};
  baz.name = "baz";
  baz.call_file = inline_h;
  baz.call_line = 30;
  gsym::InlineNode bar;
  bar.ranges = {{0x1110, 0x1150}};
  bar.name = "_ZL3bari";
  bar.call_file = app_c;
  bar.call_line = 20;
  bar.children = {baz};
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

std::vector<uint8_t> lib_gsym() {
  gsym::Builder builder;
  builder.set_build_id(kLibId);
  gsym::Function fn;
  fn.range = {0x500, 0x600};
  fn.name = "b_func";
  REQUIRE(builder.add_function(fn).ok());
  auto bytes = builder.encode();
  REQUIRE(bytes.ok());
  return *bytes;
}

GsymLocator make_locator() {
  LocatorOptions options;
  options.cache_dir = "";  // nothing on disk
  GsymLocator locator(options);
  REQUIRE(locator.add_gsym_bytes(app_gsym(), "app").ok());
  REQUIRE(locator.add_gsym_bytes(lib_gsym(), "lib").ok());
  return locator;
}

CaptureFrame in(int32_t module, uint64_t address) { return {module, address, UnresolvedReason::None}; }
CaptureFrame unresolved(uint64_t runtime) { return {-1, runtime, UnresolvedReason::NoMapping}; }

constexpr int32_t kApp = 0, kLib = 1, kMissing = 2;

Capture make_capture() {
  Capture capture;
  CaptureModule app;
  app.path = "/usr/bin/app";
  app.build_id = BuildId(kAppId);
  app.load_bias = 0x555500000000;
  app.mappings = {{0x555500001000, 0x555500006000, 0x1000, "r-xp"}};
  CaptureModule lib;
  lib.path = "/lib/libb.so";
  lib.build_id = BuildId(kLibId);
  lib.load_bias = 0x7f1000000000;
  lib.mappings = {{0x7f1000000000, 0x7f1000001000, 0, "r-xp"}};
  CaptureModule missing;
  missing.path = "/nonexistent-dir/libmissing.so";
  missing.build_id = BuildId(kMissingId);
  missing.load_bias = 0x7f0000000000;
  // Unslid 0x3456 -> runtime 0x7f0000003456 -> file offset 0x2456.
  missing.mappings = {{0x7f0000001000, 0x7f0000002000, 0x0, "r--p"},
                      {0x7f0000003000, 0x7f0000004000, 0x2000, "r-xp"}};
  capture.modules = {app, lib, missing};

  // Leaf first.
  capture.stacks.push_back({42, "app", {in(kApp, 0x1125), in(kApp, 0x1050)}, false, 3});
  capture.stacks.push_back(
      {42, "app", {in(kLib, 0x510), in(kMissing, 0x3456), in(kApp, 0x1050)}, true, 2});
  capture.stacks.push_back({43, "other", {unresolved(0xdead)}, false, 1});
  capture.stacks.push_back({44, "app", {in(kApp, 0x1125), in(kApp, 0x1050)}, false, 4});
  // 0x5000: mapped but no function; 0x9000: outside every mapping.
  capture.stacks.push_back({42, "app", {in(kApp, 0x5000), in(kApp, 0x9000)}, false, 5});
  capture.stacks.push_back({42, "app", {in(kApp, 0x1050)}, false, 0});  // dropped
  return capture;
}

// A stack's frames resolved through the result's frame table.
std::vector<SymbolizedFrame> frames_of(const SymbolizeResult& result, const SymbolizedStack& stack) {
  std::vector<SymbolizedFrame> frames;
  for (uint32_t id : stack.frames) frames.push_back(result.frames.at(id));
  return frames;
}

}  // namespace

TEST_CASE("symbolize: folded output with inline frames, fallbacks, truncation, merging") {
  GsymLocator locator = make_locator();
  auto result = symbolize(make_capture(), locator);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) ==
        "app;[truncated];main;libmissing.so+0x2456;b_func 2\n"
        "app;[unknown];app+0x5000 5\n"
        "app;main;foo(int);bar(int)_[i];baz_[i] 7\n"
        "other;[unknown] 1\n");
  CHECK(result->stats.unique_stacks == 4);
  CHECK(result->stats.unique_addresses == 5);  // app 0x1050 0x1125 0x5000 0x9000, lib 0x510
  CHECK(result->stats.lookups == 5);
  CHECK(result->stats.lookup_errors == 0);
}

TEST_CASE("symbolize: frames carry file, line, inlined and module identity") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.stacks.resize(1);
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  REQUIRE(result->stacks.size() == 1);
  const SymbolizedStack& stack = result->stacks[0];
  CHECK(stack.comm == "app");
  CHECK(stack.count == 3);
  BuildId app_id(kAppId);
  std::vector<SymbolizedFrame> expected = {
      {FrameKind::Function, "main", "/src/app.c", 12, false, "/usr/bin/app", app_id, ""},
      {FrameKind::Function, "foo(int)", "/src/app.c", 20, false, "/usr/bin/app", app_id, "_Z3fooi"},
      {FrameKind::Function, "bar(int)", "/src/include/inline.h", 30, true, "/usr/bin/app", app_id, "_ZL3bari"},
      {FrameKind::Function, "baz", "/src/include/inline.h", 40, true, "/usr/bin/app", app_id, ""},
  };
  CHECK(frames_of(*result, stack) == expected);
}

TEST_CASE("symbolize: --no-inline keeps only the concrete function") {
  GsymLocator locator = make_locator();
  SymbolizeOptions options;
  options.inline_frames = false;
  Capture capture = make_capture();
  capture.stacks.resize(1);
  auto result = symbolize(capture, locator, options);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) == "app;main;foo(int) 3\n");
  std::vector<SymbolizedFrame> frames = frames_of(*result, result->stacks[0]);
  REQUIRE(frames.size() == 2);
  // Without inline frames the concrete function gets the line row itself.
  CHECK(frames[1].file == "/src/include/inline.h");
  CHECK(frames[1].line == 40);
  CHECK_FALSE(frames[1].inlined);
}

TEST_CASE("symbolize: --pid-in-comm keeps processes apart") {
  GsymLocator locator = make_locator();
  SymbolizeOptions options;
  options.pid_in_comm = true;
  auto result = symbolize(make_capture(), locator, options);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) ==
        "app-42;[truncated];main;libmissing.so+0x2456;b_func 2\n"
        "app-42;[unknown];app+0x5000 5\n"
        "app-42;main;foo(int);bar(int)_[i];baz_[i] 3\n"
        "app-44;main;foo(int);bar(int)_[i];baz_[i] 4\n"
        "other-43;[unknown] 1\n");
}

TEST_CASE("symbolize: names only without line information") {
  GsymLocator locator = make_locator();
  SymbolizeOptions options;
  options.line_information = false;
  Capture capture = make_capture();
  capture.stacks.resize(1);
  auto result = symbolize(capture, locator, options);
  REQUIRE(result.ok());
  for (const SymbolizedFrame& frame : frames_of(*result, result->stacks[0])) {
    CHECK(frame.file == "");
    CHECK(frame.line == 0);
  }
  CHECK(folded_text(*result) == "app;main;foo(int);bar(int)_[i];baz_[i] 3\n");
}

TEST_CASE("symbolize: per-module reports") {
  GsymLocator locator = make_locator();
  auto result = symbolize(make_capture(), locator);
  REQUIRE(result.ok());
  REQUIRE(result->modules.size() == 3);
  // Sorted by (path, build ID).
  CHECK(result->modules[0].path == "/lib/libb.so");
  CHECK(result->modules[0].origin == GsymOrigin::Memory);
  CHECK(result->modules[1].path == "/nonexistent-dir/libmissing.so");
  CHECK_FALSE(result->modules[1].resolved());
  CHECK(result->modules[1].reason == "no GSYM for build ID cc03; file missing");
  CHECK(describe(result->modules[1]) ==
        "/nonexistent-dir/libmissing.so (build ID cc03): no symbols: "
        "no GSYM for build ID cc03; file missing");
  CHECK(result->modules[2].path == "/usr/bin/app");
  CHECK(describe(result->modules[2]) == "/usr/bin/app (build ID aa010203): memory");
}

TEST_CASE("symbolize: each unique address is looked up once, in sorted batches") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  // The same addresses in many stacks and processes, plus a second module
  // entry (another process) for the same app build ID.
  CaptureModule app_again = capture.modules[kApp];
  app_again.load_bias = 0x560000000000;
  app_again.mappings = {{0x560000001000, 0x560000006000, 0x1000, "r-xp"}};
  capture.modules.push_back(app_again);
  int32_t app2 = 3;
  for (uint32_t pid = 100; pid < 150; ++pid) {
    capture.stacks.push_back({pid, "app", {in(kApp, 0x1125), in(kApp, 0x1050)}, false, 1});
    capture.stacks.push_back({pid, "app", {in(app2, 0x1125), in(app2, 0x1140), in(app2, 0x1050)}, pid % 2 == 0, 1});
  }
  std::map<std::pair<const gsym::Reader*, uint64_t>, int> calls;
  std::map<const gsym::Reader*, std::vector<uint64_t>> order;
  SymbolizeOptions options;
  options.lookup = [&](const gsym::Reader& reader, uint64_t addr, const gsym::LookupOptions& o,
                       gsym::LookupScratch& scratch) {
    ++calls[{&reader, addr}];
    order[&reader].push_back(addr);
    return reader.lookup_into(addr, o, scratch);
  };
  auto result = symbolize(capture, locator, options);
  REQUIRE(result.ok());
  // app: 0x1050 0x1125 0x1140 0x5000 0x9000; lib: 0x510.
  CHECK(calls.size() == 6);
  for (const auto& [key, n] : calls) CHECK(n == 1);
  CHECK(result->stats.lookups == 6);
  REQUIRE(order.size() == 2);
  for (const auto& [reader, addrs] : order) CHECK(std::is_sorted(addrs.begin(), addrs.end()));
  CHECK(folded_text(*result) ==
        "app;[truncated];main;foo(int);bar(int)_[i];foo(int);bar(int)_[i];baz_[i] 25\n"
        "app;[truncated];main;libmissing.so+0x2456;b_func 2\n"
        "app;[unknown];app+0x5000 5\n"
        "app;main;foo(int);bar(int)_[i];baz_[i] 57\n"
        "app;main;foo(int);bar(int)_[i];foo(int);bar(int)_[i];baz_[i] 25\n"
        "other;[unknown] 1\n");
}

TEST_CASE("symbolize: lookup errors fall back to module+offset and are reported") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.stacks.resize(1);
  SymbolizeOptions options;
  options.lookup = [](const gsym::Reader& reader, uint64_t addr, const gsym::LookupOptions& o,
                      gsym::LookupScratch& scratch) -> gsym::Expected<bool> {
    if (addr == 0x1125) return gsym::Error("corrupt inline info", 0x40);
    return reader.lookup_into(addr, o, scratch);
  };
  auto result = symbolize(capture, locator, options);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) == "app;main;app+0x1125 3\n");
  CHECK(result->stats.lookup_errors == 1);
  REQUIRE(result->modules.size() == 1);
  CHECK(result->modules[0].note == "lookup error at 0x1125: corrupt inline info at offset 0x40");
}

TEST_CASE("symbolize: a module index out of range is a bad capture") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.stacks[1].frames[1].module = 7;
  auto result = symbolize(capture, locator);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().message == "stack 1 frame 1: module index 7 out of range (3 modules)");
}

TEST_CASE("symbolize: modules without build ID or GSYM, and empty stacks") {
  LocatorOptions locator_options;
  locator_options.convert_missing = false;
  GsymLocator locator(locator_options);
  Capture capture;
  CaptureModule no_id;
  no_id.path = "/opt/tool";
  no_id.mappings = {{0x400000, 0x401000, 0, "r-xp"}};
  capture.modules = {no_id};
  capture.stacks.push_back({1, "tool", {in(0, 0x400123)}, false, 2});
  capture.stacks.push_back({1, "tool", {}, false, 1});
  capture.stacks.push_back({1, "tool", {}, true, 1});
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) == "tool 1\ntool;[truncated] 1\ntool;tool+0x123 2\n");
  REQUIRE(result->modules.size() == 1);
  CHECK(result->modules[0].reason == "no build ID");
  CHECK(describe(result->modules[0]) == "/opt/tool (no build ID): no symbols: no build ID");
}

TEST_CASE("symbolize: a module never read says why, not \"no build ID\"") {
  LocatorOptions locator_options;
  locator_options.convert_missing = false;
  GsymLocator locator(locator_options);
  Capture capture;
  CaptureModule unread;
  unread.path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  unread.load_bias = 0x7f0000000000;
  unread.mappings = {{0x7f0000000000, 0x7f0000001000, 0, "r-xp"}};
  unread.error = "map_files: No such file or directory";
  unread.error_kind = ModuleErrorKind::Unreadable;
  capture.modules = {unread};
  capture.stacks.push_back({7, "sh", {in(0, 0x123)}, false, 3});
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  REQUIRE(result->modules.size() == 1);
  CHECK(describe(result->modules[0]) ==
        "/usr/lib/x86_64-linux-gnu/libc.so.6 (not identified): no symbols: not identified while the "
        "process ran (3 samples): map_files: No such file or directory");
  CHECK(folded_text(*result) == "sh;libc.so.6+0x123 3\n");
}

TEST_CASE("symbolize: modules of processes that exited before they were read say so, with samples") {
  LocatorOptions locator_options;
  locator_options.convert_missing = false;
  GsymLocator locator(locator_options);
  Capture capture;
  CaptureModule unread;
  unread.path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  unread.load_bias = 0x7f0000000000;
  unread.mappings = {{0x7f0000000000, 0x7f0000001000, 0, "r-xp"}};
  unread.error = kProcessExitedError;
  unread.error_kind = ModuleErrorKind::ProcessExited;
  // The same file in a second process (another load bias): one report.
  CaptureModule second = unread;
  second.load_bias = 0x7f1000000000;
  second.mappings = {{0x7f1000000000, 0x7f1000001000, 0, "r-xp"}};
  capture.modules = {unread, second};
  // Two frames of one module in one stack count the stack's samples once.
  capture.stacks.push_back({7, "sha1sum", {in(0, 0x123), in(0, 0x456)}, false, 3});
  capture.stacks.push_back({8, "cut", {in(1, 0x123)}, false, 2});
  capture.stacks.push_back({8, "cut", {in(1, 0x124)}, false, 0});  // not counted
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  REQUIRE(result->modules.size() == 1);
  CHECK(!result->modules[0].identified);
  CHECK(describe(result->modules[0]) ==
        "/usr/lib/x86_64-linux-gnu/libc.so.6 (not identified): no symbols: 5 samples of 2 processes "
        "that exited before their modules could be read");

  capture.stacks.resize(1);
  capture.modules.resize(1);
  auto one = symbolize(capture, locator);
  REQUIRE(one.ok());
  REQUIRE(one->modules.size() == 1);
  CHECK(one->modules[0].reason == "3 samples of 1 process that exited before their modules could be read");
}

TEST_CASE("symbolize: one sorted table of distinct frames, stacks hold ids") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  // 0x1125 and 0x1128 are the same frames (same function, line and inline
  // chain): their ids must be equal so that the stacks merge.
  capture.stacks.push_back({42, "app", {in(kApp, 0x1128), in(kApp, 0x1050)}, false, 10});
  capture.stacks.push_back({42, "app", {in(kApp, 0x1125), in(kApp, 0x1050)}, true, 1});
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  const std::vector<SymbolizedFrame>& frames = result->frames;
  CHECK(std::is_sorted(frames.begin(), frames.end()));
  CHECK(std::adjacent_find(frames.begin(), frames.end()) == frames.end());
  std::vector<bool> used(frames.size(), false);
  for (const SymbolizedStack& stack : result->stacks)
    for (uint32_t id : stack.frames) used.at(id) = true;
  CHECK(std::find(used.begin(), used.end(), false) == used.end());
  for (size_t i = 1; i < result->stacks.size(); ++i) {
    const SymbolizedStack& a = result->stacks[i - 1];
    const SymbolizedStack& b = result->stacks[i];
    CHECK(std::tie(a.comm, a.frames) < std::tie(b.comm, b.frames));
    auto fa = frames_of(*result, a), fb = frames_of(*result, b);
    CHECK(std::tie(a.comm, fa) < std::tie(b.comm, fb));  // id order is frame order
  }
  CHECK(folded_text(*result) ==
        "app;[truncated];main;foo(int);bar(int)_[i];baz_[i] 1\n"
        "app;[truncated];main;libmissing.so+0x2456;b_func 2\n"
        "app;[unknown];app+0x5000 5\n"
        "app;main;foo(int);bar(int)_[i];baz_[i] 17\n"
        "other;[unknown] 1\n");
  CHECK(result->stats.unique_stacks == 5);
  // Without any truncated stack there is no [truncated] frame to refer to.
  capture = make_capture();
  capture.stacks.erase(capture.stacks.begin() + 1);
  result = symbolize(capture, locator);
  REQUIRE(result.ok());
  for (const SymbolizedFrame& frame : result->frames) CHECK(frame.kind != FrameKind::Truncated);
}

TEST_CASE("symbolize: kernel frames named from the capture's kernel symbols, suffixed _[k]") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.stacks.clear();
  CaptureFrame sys_read{-1, 0xffffffff81000210, UnresolvedReason::None, true};
  CaptureFrame entry{-1, 0xffffffff81000020, UnresolvedReason::None, true};
  CaptureFrame in_module{-1, 0xffffffffc0000010, UnresolvedReason::None, true};
  CaptureFrame nowhere{-1, 0xffffffff90000000, UnresolvedReason::None, true};
  // Leaf first: kernel frames, then the user frames.
  capture.stacks.push_back({42, "app", {sys_read, entry, in(kApp, 0x1050)}, false, 3, 42});
  capture.stacks.push_back({42, "app", {in_module, entry, in(kApp, 0x1050)}, false, 1, 43});
  capture.stacks.push_back({2, "kworker/0:1", {nowhere, entry}, false, 2, 2});
  capture.kernel.build_id = *BuildId::from_hex("abcd");
  capture.kernel.symbols = {{0xffffffff81000000, 0xffffffff81000100, "entry_SYSCALL_64", ""},
                            {0xffffffff81000200, 0xffffffff81000300, "ksys_read", ""},
                            {0xffffffffc0000000, 0xffffffffc0000100, "ext4_file_read_iter", "ext4"}};
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) ==
        "app;main;entry_SYSCALL_64_[k];ext4_file_read_iter [ext4]_[k] 1\n"
        "app;main;entry_SYSCALL_64_[k];ksys_read_[k] 3\n"
        "kworker/0:1;entry_SYSCALL_64_[k];[kernel]_[k] 2\n");
  CHECK(result->stats.kernel_frames == 6);
  CHECK(result->stats.unnamed_kernel_frames == 1);
  for (const SymbolizedFrame& frame : result->frames)
    if (frame.kind == FrameKind::Kernel) {
      CHECK(frame.module_path == "[kernel.kallsyms]");
      CHECK(frame.build_id.hex() == "abcd");
    }
  // No GSYM is looked up for kernel frames.
  CHECK(result->stats.lookups == 1);
}

TEST_CASE("symbolize: JIT frames named from the capture's perf-map entries, suffixed _[j]") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.stacks.clear();
  capture.jit_symbols = {{0x7e0000000000, 0x7e0000000100, "JS:^main /x.js:5"},
                         {0x7e0000002000, 0x7e0000002100, "JS:*fib /x.js:1"}};
  auto jit = [](uint64_t address, int32_t symbol) {
    return CaptureFrame{-1, address, UnresolvedReason::AnonymousMapping, false, symbol};
  };
  CaptureFrame anonymous{-1, 0x7e0000009000, UnresolvedReason::AnonymousMapping};
  capture.stacks.push_back({42, "app", {jit(0x7e0000002010, 1), jit(0x7e0000002080, 1), jit(0x7e0000000040, 0),
                                        in(kApp, 0x1050)}, false, 3, 42});
  capture.stacks.push_back({42, "app", {anonymous, jit(0x7e0000000040, 0), in(kApp, 0x1050)}, false, 1, 42});
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) ==
        "app;main;JS:^main /x.js:5_[j];JS:*fib /x.js:1_[j];JS:*fib /x.js:1_[j] 3\n"
        "app;main;JS:^main /x.js:5_[j];[unknown] 1\n");
  CHECK(result->stats.jit_frames == 4);
  CHECK(result->stats.unknown_frames == 1);
  for (const SymbolizedFrame& frame : result->frames)
    if (frame.kind == FrameKind::Jit) CHECK(frame.module_path.empty());
  // A JIT index out of range is a bad capture, not a crash.
  capture.stacks[0].frames[0].jit = 2;
  auto bad = symbolize(capture, locator);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "stack 0 frame 0: JIT symbol index 2 out of range (2 JIT symbols)");
}

TEST_CASE("symbolize: Python frames named STEM.QUALNAME (BASENAME:LINE)") {
  auto named = [](std::string qualname, std::string file, uint32_t line) {
    return python_frame_name({std::move(qualname), std::move(file), line});
  };
  CHECK(named("fib", "/app/fib.py", 3) == "fib.fib (fib.py:3)");
  CHECK(named("Worker.run", "/usr/lib/python3.12/threading.py", 1012) == "threading.Worker.run (threading.py:1012)");
  CHECK(named("<module>", "main.py", 1) == "main.<module> (main.py:1)");
  // Line 0 is unknown: no ":0".
  CHECK(named("fib", "/app/fib.py", 0) == "fib.fib (fib.py)");
  // Only ".py" is a suffix to drop; a file without a directory is its own basename.
  CHECK(named("run", "/app/tool.pyw", 7) == "tool.pyw.run (tool.pyw:7)");
  CHECK(named("run", "/app/tool", 7) == "tool.run (tool:7)");
  CHECK(named("_find_and_load", "<frozen importlib._bootstrap>", 1360) ==
        "<frozen importlib._bootstrap>._find_and_load (<frozen importlib._bootstrap>:1360)");
  CHECK(named("<module>", "<string>", 1) == "<string>.<module> (<string>:1)");
  CHECK(named("f", ".py", 2) == ".py.f (.py:2)");
  // No basename at all: the file as given, or nothing.
  CHECK(named("f", "/app/", 2) == "/app/.f (/app/:2)");
  CHECK(named("f", "", 2) == "f (:2)");
  CHECK(named("f", "", 0) == "f");
}

TEST_CASE("symbolize: Python frames carry their file and line, suffixed _[p], no module") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.stacks.clear();
  capture.python_frames = {{"<module>", "/app/fib.py", 9}, {"fib", "/app/fib.py", 3}};
  auto python = [](int32_t index) {
    CaptureFrame frame;
    frame.python = index;
    return frame;
  };
  // The interpreter's native frames around its Python frames, leaf first.
  capture.stacks.push_back(
      {42, "app", {in(kLib, 0x510), python(1), python(1), python(0), in(kApp, 0x1050)}, false, 3, 42});
  capture.stacks.push_back({42, "app", {python(0), in(kApp, 0x1050)}, false, 2, 42});
  auto result = symbolize(capture, locator);
  REQUIRE(result.ok());
  CHECK(folded_text(*result) ==
        "app;main;fib.<module> (fib.py:9)_[p] 2\n"
        "app;main;fib.<module> (fib.py:9)_[p];fib.fib (fib.py:3)_[p];fib.fib (fib.py:3)_[p];b_func 3\n");
  CHECK(result->stats.python_frames == 4);
  CHECK(result->stats.unknown_frames == 0);
  size_t python_frames = 0;
  for (const SymbolizedFrame& frame : result->frames) {
    if (frame.kind != FrameKind::Python) continue;
    ++python_frames;
    CHECK(frame.file == "/app/fib.py");
    CHECK(frame.line == (frame.name.starts_with("fib.fib") ? 3u : 9u));
    CHECK(frame.module_path.empty());
    CHECK(frame.build_id.empty());
    CHECK_FALSE(frame.inlined);
  }
  CHECK(python_frames == 2);
  // No GSYM is looked up for Python frames.
  CHECK(result->stats.lookups == 2);
  // A Python index out of range is a bad capture, not a crash.
  capture.stacks[0].frames[1].python = 2;
  auto bad = symbolize(capture, locator);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "stack 0 frame 1: Python frame index 2 out of range (2 Python frames)");
}

namespace {

// Pages of `bytes` mapped in this process's page tables (/proc/self/pagemap
// bit 63), whatever the page cache holds.
size_t resident_pages(std::span<const uint8_t> bytes) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) / page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size() + page - 1) / page;
  size_t resident = 0;
  for (uintptr_t p = begin; p < end; ++p) {
    uint64_t entry = 0;
    REQUIRE(::pread(fd, &entry, sizeof entry, static_cast<off_t>(p * sizeof entry)) == sizeof entry);
    resident += entry >> 63;
  }
  ::close(fd);
  return resident;
}

}  // namespace

TEST_CASE("symbolize: release_pages_per_module drops each mapped GSYM's pages after its lookups") {
  test_files::TempDir dir;
  test_files::write_file(dir / "app.gsym", app_gsym());
  test_files::write_file(dir / "lib.gsym", lib_gsym());
  LocatorOptions options;
  options.cache_dir = "";
  GsymLocator locator(options);
  REQUIRE(locator.add_gsym_dir(dir.path).ok());
  ModuleReport report;
  const gsym::Reader* app = locator.locate(BuildId(kAppId), "", report);
  const gsym::Reader* lib = locator.locate(BuildId(kLibId), "", report);
  REQUIRE(app);
  REQUIRE(lib);

  const Capture capture = make_capture();
  auto kept = symbolize(capture, locator);
  REQUIRE(kept.ok());
  CHECK(resident_pages(app->bytes()) > 0);  // mapped, read by the lookups
  CHECK(resident_pages(lib->bytes()) > 0);

  SymbolizeOptions release;
  release.release_pages_per_module = true;
  auto released = symbolize(capture, locator, release);
  REQUIRE(released.ok());
  CHECK(resident_pages(app->bytes()) == 0);
  CHECK(resident_pages(lib->bytes()) == 0);
  CHECK(released->frames == kept->frames);  // the same names
  CHECK(released->stacks == kept->stacks);
}
