// pprof output: the gzipped profile.proto decoded again and checked field by
// field against a capture symbolized from synthetic GSYM files.
#include <doctest/doctest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "tests/unit/inline_app_gsym.h"
#include "userspace/output/pprof_output.h"
#include "userspace/output/profile.pb.h"

using namespace gsymprof;
namespace pb = perftools::profiles;

namespace {

const std::vector<uint8_t>& kAppId = test::kInlineAppId;

GsymLocator make_locator() { return test::inline_app_locator(); }

constexpr uint64_t kBias = 0x555500000000;

Capture make_capture() {
  Capture capture;
  capture.frequency_hz = 100;
  capture.start_time_unix_ns = 1700000000000000000;
  capture.duration_ns = 2000000000;
  capture.call_graph = CallGraph::FramePointer;
  CaptureModule app;
  app.path = "/usr/bin/app";
  app.build_id = BuildId(kAppId);
  app.load_bias = kBias;
  app.mappings = {{kBias + 0x1000, kBias + 0x2000, 0x1000, "r-xp"}};
  capture.modules = {app};
  const CaptureFrame in_bar{0, 0x1120, UnresolvedReason::None}, in_main{0, 0x1050, UnresolvedReason::None};
  capture.stacks.push_back({42, "app", {in_bar, in_main}, false, 3});
  capture.stacks.push_back({43, "app", {in_main}, true, 2});
  capture.stacks.push_back({44, "other", {{-1, 0xdead, UnresolvedReason::NoMapping}}, false, 1});
  capture.samples = 6;
  return capture;
}

pb::Profile decode(const std::string& gzipped) {
  z_stream stream{};
  REQUIRE(inflateInit2(&stream, 15 + 16) == Z_OK);
  std::string bytes(1 << 20, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gzipped.data()));
  stream.avail_in = static_cast<uInt>(gzipped.size());
  stream.next_out = reinterpret_cast<Bytef*>(bytes.data());
  stream.avail_out = static_cast<uInt>(bytes.size());
  REQUIRE(inflate(&stream, Z_FINISH) == Z_STREAM_END);
  bytes.resize(stream.total_out);
  inflateEnd(&stream);
  pb::Profile profile;
  REQUIRE(profile.ParseFromString(bytes));
  return profile;
}

// The function names of a location's lines, innermost first.
std::vector<std::string> names_of(const pb::Profile& profile, uint64_t location_id) {
  std::vector<std::string> names;
  const pb::Location& location = profile.location(static_cast<int>(location_id - 1));
  REQUIRE(location.id() == location_id);
  for (const pb::Line& line : location.line())
    names.push_back(profile.string_table(profile.function(static_cast<int>(line.function_id() - 1)).name()));
  return names;
}

}  // namespace

TEST_CASE("pprof: samples, locations with inline chains, mappings, labels") {
  GsymLocator locator = make_locator();
  auto result = pprof_profile(make_capture(), locator, {});
  REQUIRE(result.ok());
  const pb::Profile profile = decode(result->gzipped);
  auto str = [&](int64_t index) { return profile.string_table(static_cast<int>(index)); };

  REQUIRE(profile.string_table_size() > 0);
  CHECK(profile.string_table(0).empty());
  REQUIRE(profile.sample_type_size() == 2);
  CHECK(str(profile.sample_type(0).type()) == "samples");
  CHECK(str(profile.sample_type(0).unit()) == "count");
  CHECK(str(profile.sample_type(1).type()) == "cpu");
  CHECK(str(profile.sample_type(1).unit()) == "nanoseconds");
  CHECK(str(profile.period_type().type()) == "cpu");
  CHECK(profile.period() == 10000000);
  CHECK(profile.time_nanos() == 1700000000000000000);
  CHECK(profile.duration_nanos() == 2000000000);

  REQUIRE(profile.sample_size() == 3);
  const pb::Sample& first = profile.sample(0);
  REQUIRE(first.location_id_size() == 2);  // leaf first
  CHECK(names_of(profile, first.location_id(0)) == std::vector<std::string>{"bar", "foo(int)"});
  CHECK(names_of(profile, first.location_id(1)) == std::vector<std::string>{"main"});
  CHECK(first.value(0) == 3);
  CHECK(first.value(1) == 30000000);
  REQUIRE(first.label_size() == 2);
  CHECK(str(first.label(0).key()) == "comm");
  CHECK(str(first.label(0).str()) == "app");
  CHECK(str(first.label(1).key()) == "pid");
  CHECK(first.label(1).num() == 42);

  // The same frame is the same location; a truncated stack ends in [truncated].
  const pb::Sample& second = profile.sample(1);
  REQUIRE(second.location_id_size() == 2);
  CHECK(second.location_id(0) == first.location_id(1));
  CHECK(names_of(profile, second.location_id(1)) == std::vector<std::string>{"[truncated]"});

  const pb::Sample& third = profile.sample(2);
  REQUIRE(third.location_id_size() == 1);
  CHECK(names_of(profile, third.location_id(0)) == std::vector<std::string>{"[unknown]"});
  const pb::Location& unknown = profile.location(static_cast<int>(third.location_id(0) - 1));
  CHECK(unknown.mapping_id() == 0);
  CHECK(unknown.address() == 0xdead);

  const pb::Location& bar = profile.location(static_cast<int>(first.location_id(0) - 1));
  CHECK(bar.address() == kBias + 0x1120);
  CHECK(bar.line(0).line() == 50);  // innermost line first
  CHECK(bar.line(1).line() == 20);  // the call site of bar in foo
  REQUIRE(profile.mapping_size() == 1);
  const pb::Mapping& mapping = profile.mapping(0);
  CHECK(bar.mapping_id() == mapping.id());
  CHECK(mapping.memory_start() == kBias + 0x1000);
  CHECK(mapping.memory_limit() == kBias + 0x2000);
  CHECK(mapping.file_offset() == 0x1000);
  CHECK(str(mapping.filename()) == "/usr/bin/app");
  CHECK(str(mapping.build_id()) == "aa010203");
  CHECK(mapping.has_functions());
  CHECK(mapping.has_filenames());
  CHECK(mapping.has_line_numbers());
  CHECK(mapping.has_inline_frames());

  // Function.start_line: the line of the first address of the function's
  // range (foo, main) or of the inlined call's range (bar).
  auto start_line_of = [&](const pb::Line& line) {
    return profile.function(static_cast<int>(line.function_id() - 1)).start_line();
  };
  CHECK(start_line_of(bar.line(0)) == 50);
  CHECK(start_line_of(bar.line(1)) == 5);
  const pb::Location& main_location = profile.location(static_cast<int>(first.location_id(1) - 1));
  CHECK(start_line_of(main_location.line(0)) == 10);
}

TEST_CASE("pprof: mapping 1 is the module of the most common root frame (pprof's main binary)") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  CaptureModule lib;
  lib.path = "/lib/libx.so";
  lib.build_id = *BuildId::from_hex("bb02");
  lib.load_bias = 0x7f0000000000;
  lib.mappings = {{0x7f0000001000, 0x7f0000002000, 0x1000, "r-xp"}};
  capture.modules.push_back(lib);
  // First a stack only in the library, then the application's root
  // (main at 0x1050) under more samples.
  capture.stacks.insert(capture.stacks.begin(), {45, "app", {{1, 0x1100, UnresolvedReason::None}}, false, 1});
  auto result = pprof_profile(capture, locator, {});
  REQUIRE(result.ok());
  const pb::Profile profile = decode(result->gzipped);
  REQUIRE(profile.mapping_size() == 2);
  CHECK(profile.string_table(static_cast<int>(profile.mapping(0).filename())) == "/usr/bin/app");
  CHECK(profile.string_table(static_cast<int>(profile.mapping(1).filename())) == "/lib/libx.so");
}

TEST_CASE("pprof: the same capture gives the same bytes; no GSYM, no has_functions") {
  GsymLocator locator = make_locator();
  auto a = pprof_profile(make_capture(), locator, {});
  auto b = pprof_profile(make_capture(), locator, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->gzipped == b->gzipped);

  LocatorOptions options;
  options.cache_dir = "";
  GsymLocator empty(options);
  auto unnamed = pprof_profile(make_capture(), empty, {});
  REQUIRE(unnamed.ok());
  const pb::Profile profile = decode(unnamed->gzipped);
  REQUIRE(profile.mapping_size() == 1);
  CHECK_FALSE(profile.mapping(0).has_functions());
  CHECK(names_of(profile, profile.sample(0).location_id(0)) == std::vector<std::string>{"app+0x1120"});
}

TEST_CASE("pprof: raw names as system_name, thread_id labels, kernel frames on a kernel mapping") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  const CaptureFrame in_bar{0, 0x1120, UnresolvedReason::None}, in_main{0, 0x1050, UnresolvedReason::None};
  const CaptureFrame sys_read{-1, 0xffffffff81000210, UnresolvedReason::None, true};
  const CaptureFrame entry{-1, 0xffffffff81000020, UnresolvedReason::None, true};
  capture.stacks = {{42, "app", {sys_read, entry, in_main}, false, 4, 45}, {42, "app", {in_bar, in_main}, false, 1, 0}};
  capture.samples = 5;
  capture.kernel.build_id = *BuildId::from_hex("abcd");
  capture.kernel.symbols = {{0xffffffff81000000, 0xffffffff81000100, "entry_SYSCALL_64", ""},
                            {0xffffffff81000200, 0xffffffff81000300, "ksys_read", ""}};
  auto result = pprof_profile(capture, locator, {});
  REQUIRE(result.ok());
  const pb::Profile profile = decode(result->gzipped);
  auto str = [&](int64_t index) { return profile.string_table(static_cast<int>(index)); };

  // foo(int) keeps its mangled name as system_name; main is not mangled.
  bool saw_foo = false;
  for (const pb::Function& function : profile.function()) {
    if (str(function.name()) == "foo(int)") {
      saw_foo = true;
      CHECK(str(function.system_name()) == "_Z3fooi");
    } else {
      CHECK(str(function.system_name()) == str(function.name()));
    }
  }
  CHECK(saw_foo);

  REQUIRE(profile.sample_size() == 2);
  const pb::Sample* kernel_sample = nullptr;
  for (const pb::Sample& sample : profile.sample())
    if (sample.value(0) == 4) kernel_sample = &sample;
  REQUIRE(kernel_sample);
  REQUIRE(kernel_sample->label_size() == 3);
  CHECK(str(kernel_sample->label(2).key()) == "thread_id");
  CHECK(kernel_sample->label(2).num() == 45);
  REQUIRE(kernel_sample->location_id_size() == 3);
  CHECK(names_of(profile, kernel_sample->location_id(0)) == std::vector<std::string>{"ksys_read"});
  CHECK(names_of(profile, kernel_sample->location_id(1)) == std::vector<std::string>{"entry_SYSCALL_64"});
  const pb::Location& leaf = profile.location(static_cast<int>(kernel_sample->location_id(0) - 1));
  CHECK(leaf.address() == 0xffffffff81000210);
  REQUIRE(profile.mapping_size() == 2);
  const pb::Mapping* kernel = nullptr;
  for (const pb::Mapping& mapping : profile.mapping())
    if (str(mapping.filename()) == "[kernel.kallsyms]") kernel = &mapping;
  REQUIRE(kernel);
  CHECK(leaf.mapping_id() == kernel->id());
  CHECK(str(kernel->build_id()) == "abcd");
  CHECK(kernel->memory_start() == 0xffffffff81000020);
  CHECK(kernel->memory_limit() == 0xffffffff81000211);
  CHECK(kernel->has_functions());
  CHECK(!kernel->has_line_numbers());
  CHECK(!kernel->has_inline_frames());
  // A version-1 stack (tid 0) has no thread_id label.
  for (const pb::Sample& sample : profile.sample())
    if (sample.value(0) == 1) CHECK(sample.label_size() == 2);
}

TEST_CASE("pprof: JIT frames named from the capture's perf-map entries, on no mapping") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  const CaptureFrame in_main{0, 0x1050, UnresolvedReason::None};
  const CaptureFrame fib{-1, 0x7e0000002010, UnresolvedReason::AnonymousMapping, false, 0};
  capture.stacks = {{42, "node", {fib, in_main}, false, 4, 42}};
  capture.samples = 4;
  capture.jit_symbols = {{0x7e0000002000, 0x7e0000002100, "JS:*fib /x.js:1"}};
  auto result = pprof_profile(capture, locator, {});
  REQUIRE(result.ok());
  const pb::Profile profile = decode(result->gzipped);
  REQUIRE(profile.sample_size() == 1);
  REQUIRE(profile.sample(0).location_id_size() == 2);
  CHECK(names_of(profile, profile.sample(0).location_id(0)) == std::vector<std::string>{"JS:*fib /x.js:1"});
  const pb::Location& leaf = profile.location(static_cast<int>(profile.sample(0).location_id(0) - 1));
  CHECK(leaf.address() == 0x7e0000002010);
  CHECK(leaf.mapping_id() == 0);
  REQUIRE(profile.mapping_size() == 1);  // the app's only
}

TEST_CASE("pprof: Python frames are functions with their file, the line on the location, no mapping") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  const CaptureFrame in_main{0, 0x1050, UnresolvedReason::None};
  CaptureFrame fib, module;
  fib.python = 1;
  module.python = 0;
  capture.stacks = {{42, "python3", {fib, fib, module, in_main}, false, 4, 42}};
  capture.samples = 4;
  capture.python_frames = {{"<module>", "/app/fib.py", 9}, {"fib", "/app/fib.py", 3}};
  auto result = pprof_profile(capture, locator, {});
  REQUIRE(result.ok());
  const pb::Profile profile = decode(result->gzipped);
  REQUIRE(profile.sample_size() == 1);
  const pb::Sample& sample = profile.sample(0);
  REQUIRE(sample.location_id_size() == 4);
  // Leaf first; one location per distinct capture frame.
  CHECK(sample.location_id(0) == sample.location_id(1));
  CHECK(names_of(profile, sample.location_id(0)) == std::vector<std::string>{"fib.fib (fib.py:3)"});
  CHECK(names_of(profile, sample.location_id(2)) == std::vector<std::string>{"fib.<module> (fib.py:9)"});
  const pb::Location& leaf = profile.location(static_cast<int>(sample.location_id(0) - 1));
  CHECK(leaf.mapping_id() == 0);
  CHECK(leaf.address() == 0);
  REQUIRE(leaf.line_size() == 1);
  CHECK(leaf.line(0).line() == 3);
  const pb::Function& function = profile.function(static_cast<int>(leaf.line(0).function_id() - 1));
  CHECK(profile.string_table(function.name()) == "fib.fib (fib.py:3)");
  CHECK(profile.string_table(function.system_name()) == "fib.fib (fib.py:3)");
  CHECK(profile.string_table(function.filename()) == "/app/fib.py");
  CHECK(function.start_line() == 0);
  REQUIRE(profile.mapping_size() == 1);  // the app's only
  CHECK(profile.mapping(0).has_functions());
}

TEST_CASE("pprof: wall-clock captures weigh CPU and off-CPU time in nanoseconds, the reason at the leaf") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();  // 100 Hz: a CPU sample weighs 10 ms
  capture.clock = ProfileClock::Wall;
  CaptureStack blocked = capture.stacks[0];
  blocked.off_cpu = OffCpuReason::Sleep;
  blocked.count = 2;
  blocked.off_cpu_ns = 250000000;
  CaptureStack runnable;
  runnable.pid = blocked.pid;
  runnable.comm = blocked.comm;
  runnable.off_cpu = OffCpuReason::Runqueue;
  runnable.short_waits = true;
  runnable.count = 40;
  runnable.off_cpu_ns = 3000000;
  capture.stacks.push_back(blocked);
  capture.stacks.push_back(runnable);
  auto result = pprof_profile(capture, locator, {});
  REQUIRE(result.ok());
  const pb::Profile profile = decode(result->gzipped);
  auto str = [&](int64_t index) { return profile.string_table(static_cast<int>(index)); };
  REQUIRE(profile.sample_type_size() == 3);
  CHECK(str(profile.sample_type(0).type()) == "cpu");
  CHECK(str(profile.sample_type(1).type()) == "off_cpu");
  CHECK(str(profile.sample_type(1).unit()) == "nanoseconds");
  CHECK(str(profile.sample_type(2).type()) == "wall");
  uint64_t cpu = 0, off = 0, wall = 0;
  bool saw_sleep = false, saw_runqueue = false;
  for (const pb::Sample& sample : profile.sample()) {
    cpu += static_cast<uint64_t>(sample.value(0));
    off += static_cast<uint64_t>(sample.value(1));
    wall += static_cast<uint64_t>(sample.value(2));
    const std::vector<std::string> leaf = names_of(profile, sample.location_id(0));
    if (leaf == std::vector<std::string>{"[off-cpu S]"}) {
      saw_sleep = true;
      CHECK(sample.value(1) == 250000000);
      CHECK(names_of(profile, sample.location_id(1)) == std::vector<std::string>{"bar", "foo(int)"});
    }
    if (leaf == std::vector<std::string>{"[runqueue]"}) {
      saw_runqueue = true;
      REQUIRE(sample.location_id_size() == 2);
      CHECK(names_of(profile, sample.location_id(1)) == std::vector<std::string>{"[short waits]"});
    }
  }
  CHECK(saw_sleep);
  CHECK(saw_runqueue);
  CHECK(off == 253000000);
  CHECK(cpu == capture.samples * 10000000);
  CHECK(wall == cpu + off);
}
