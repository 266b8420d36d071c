// OTLP Profiles: the ExportProfilesServiceRequest parsed back with the
// generated classes and checked against the capture: the stacks (as
// folded text, equal to gsymprof's own folded output), the inline chains,
// the attributes, the build IDs and the values of each profile.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gsym/builder/builder.h"
#include "tests/unit/inline_app_gsym.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "userspace/export/otlp_profiles.h"
#include "userspace/output/folded_output.h"

using namespace gsymprof;
namespace otlp = opentelemetry::proto::profiles::v1development;
using opentelemetry::proto::collector::profiles::v1development::ExportProfilesServiceRequest;

namespace {

const std::vector<uint8_t>& kAppId = test::kInlineAppId;
constexpr uint64_t kBias = 0x555500000000;

GsymLocator make_locator() { return test::inline_app_locator(); }

const CaptureFrame kInBar{0, 0x1120, UnresolvedReason::None}, kInMain{0, 0x1050, UnresolvedReason::None};
const CaptureFrame kKsysRead{-1, 0xffffffff81000210, UnresolvedReason::None, true};

// Two processes: 42 (app, in container "c0ffee", threads 42 and 45) and 44
// (other, in no container, an unknown frame).
Capture make_capture() {
  Capture capture;
  capture.host = "testhost";
  capture.frequency_hz = 100;
  capture.start_time_unix_ns = 1700000000000000000;
  capture.duration_ns = 2000000000;
  CaptureModule app;
  app.path = "/usr/bin/app";
  app.build_id = BuildId(kAppId);
  app.load_bias = kBias;
  app.mappings = {{kBias + 0x1000, kBias + 0x2000, 0x1000, "r-xp"}};
  capture.modules = {app};
  capture.processes.push_back({42, "app", {0}, {{"process.executable.name", "app"},
                                                {"process.executable.path", "/usr/bin/app"},
                                                {"cgroup", "/docker/c0ffee"},
                                                {"container.id", "c0ffee"},
                                                {"service.name", "shop"}}});
  capture.processes.push_back({44, "other", {}, {{"service.name", "other"}}});
  capture.stacks.push_back({42, "app", {kInBar, kInMain}, false, 3, 42});
  capture.stacks.push_back({42, "worker", {kKsysRead, kInMain}, false, 4, 45});
  capture.stacks.push_back({42, "app", {kInMain}, true, 2, 42});
  capture.stacks.push_back({44, "other", {{-1, 0xdead, UnresolvedReason::NoMapping}}, false, 1, 44});
  capture.samples = 10;
  capture.kernel.build_id = *BuildId::from_hex("abcd");
  capture.kernel.symbols = {{0xffffffff81000200, 0xffffffff81000300, "ksys_read", ""}};
  return capture;
}

ExportProfilesServiceRequest encode(const Capture& capture, GsymLocator& locator) {
  auto result = otlp_profiles_request(capture, locator, {});
  REQUIRE(result.ok());
  ExportProfilesServiceRequest request;
  REQUIRE(request.ParseFromString(result->bytes));
  return request;
}

// Reads a request as decode.py does: attributes by key, frames by name.
struct Reader {
  const otlp::ProfilesDictionary& dictionary;

  const std::string& str(int32_t index) const {
    REQUIRE(index >= 0);
    REQUIRE(index < dictionary.string_table_size());
    return dictionary.string_table(index);
  }
  std::map<std::string, std::string> attributes(const google::protobuf::RepeatedField<int32_t>& indices) const {
    std::map<std::string, std::string> out;
    for (int32_t index : indices) {
      REQUIRE(index > 0);
      REQUIRE(index < dictionary.attribute_table_size());
      const otlp::KeyValueAndUnit& entry = dictionary.attribute_table(index);
      const std::string value = entry.value().has_int_value() ? std::to_string(entry.value().int_value())
                                                                : entry.value().string_value();
      CHECK(out.emplace(str(entry.key_strindex()), value).second);  // a key once per list
    }
    return out;
  }
  const otlp::Location& location(int32_t index) const {
    REQUIRE(index > 0);
    REQUIRE(index < dictionary.location_table_size());
    return dictionary.location_table(index);
  }
  // A location's function names, innermost first.
  std::vector<std::string> names(int32_t index) const {
    std::vector<std::string> out;
    for (const otlp::Line& line : location(index).lines())
      out.push_back(str(dictionary.function_table(line.function_index()).name_strindex()));
    return out;
  }
  // "thread.name;root;...;leaf", inlined frames "_[i]", kernel ones "_[k]",
  // Python ones "_[p]" (decode.py --folded --comm-attr thread.name).
  std::string folded(const otlp::Sample& sample) const {
    const otlp::Stack& stack = dictionary.stack_table(sample.stack_index());
    std::string out = attributes(sample.attribute_indices()).at("thread.name");
    for (int i = stack.location_indices_size() - 1; i >= 0; --i) {
      const otlp::Location& at = location(stack.location_indices(i));
      const auto types = attributes(at.attribute_indices());
      const std::string type = types.count("profile.frame.type") ? types.at("profile.frame.type") : "";
      const char* kind_suffix = type == "kernel" ? "_[k]" : type == "cpython" ? "_[p]" : "";
      const std::vector<std::string> chain = names(stack.location_indices(i));
      for (size_t n = chain.size(); n-- > 0;)
        out += ";" + chain[n] + (n + 1 < chain.size() ? "_[i]" : "") + kind_suffix;
    }
    return out;
  }
};

// Every profile of `type` as folded text, equal stacks summed and sorted.
std::string folded_text_of(const ExportProfilesServiceRequest& request, const std::string& type) {
  const Reader reader{request.dictionary()};
  std::map<std::string, int64_t> totals;
  for (const auto& resource : request.resource_profiles())
    for (const auto& scope : resource.scope_profiles())
      for (const otlp::Profile& profile : scope.profiles())
        if (reader.str(profile.sample_type().type_strindex()) == type)
          for (const otlp::Sample& sample : profile.samples()) {
            REQUIRE(sample.values_size() == 1);
            totals[reader.folded(sample)] += sample.values(0);
          }
  std::string out;
  for (const auto& [stack, total] : totals) out += stack + " " + std::to_string(total) + "\n";
  return out;
}

}  // namespace

TEST_CASE("otlp: the stacks are gsymprof's folded stacks; cpu and samples profiles per container") {
  GsymLocator locator = make_locator();
  const Capture capture = make_capture();
  const ExportProfilesServiceRequest request = encode(capture, locator);
  const otlp::ProfilesDictionary& dictionary = request.dictionary();
  const Reader reader{dictionary};

  // Index 0 of every table is the zero value.
  REQUIRE(dictionary.string_table_size() > 0);
  CHECK(dictionary.string_table(0).empty());
  CHECK(dictionary.mapping_table(0).ByteSizeLong() == 0);
  CHECK(dictionary.location_table(0).ByteSizeLong() == 0);
  CHECK(dictionary.function_table(0).ByteSizeLong() == 0);
  CHECK(dictionary.attribute_table(0).ByteSizeLong() == 0);
  CHECK(dictionary.stack_table(0).ByteSizeLong() == 0);
  CHECK(dictionary.link_table(0).trace_id() == std::string(16, '\0'));
  CHECK(dictionary.link_table(0).span_id() == std::string(8, '\0'));

  // gsymprof's own folded output of the same capture (comm = thread name).
  auto symbolized = symbolize(capture, locator, {});
  REQUIRE(symbolized.ok());
  CHECK(folded_text_of(request, "samples") == folded_text(*symbolized));
  CHECK(folded_text_of(request, "samples") ==
        "app;[truncated];main 2\n"
        "app;main;foo(int);bar_[i] 3\n"
        "other;[unknown] 1\n"
        "worker;main;ksys_read_[k] 4\n");
  // cpu/nanoseconds: count x 1e9 / 100 Hz.
  CHECK(folded_text_of(request, "cpu") ==
        "app;[truncated];main 20000000\n"
        "app;main;foo(int);bar_[i] 30000000\n"
        "other;[unknown] 10000000\n"
        "worker;main;ksys_read_[k] 40000000\n");

  // Two resources: the container's and the one of processes in none.
  REQUIRE(request.resource_profiles_size() == 2);
  std::map<std::string, std::string> container_resource, host_resource;
  for (const auto& attribute : request.resource_profiles(0).resource().attributes())
    host_resource[attribute.key()] = attribute.value().string_value();
  for (const auto& attribute : request.resource_profiles(1).resource().attributes())
    container_resource[attribute.key()] = attribute.value().string_value();
  CHECK(host_resource == std::map<std::string, std::string>{{"host.name", "testhost"}});
  CHECK(container_resource == std::map<std::string, std::string>{{"container.id", "c0ffee"}, {"host.name", "testhost"}});

  const auto& scope = request.resource_profiles(1).scope_profiles(0);
  CHECK(scope.scope().name() == "gsymprof");
  REQUIRE(scope.profiles_size() == 2);
  const otlp::Profile& cpu = scope.profiles(0);
  CHECK(reader.str(cpu.sample_type().type_strindex()) == "cpu");
  CHECK(reader.str(cpu.sample_type().unit_strindex()) == "nanoseconds");
  CHECK(reader.str(scope.profiles(1).sample_type().type_strindex()) == "samples");
  CHECK(reader.str(scope.profiles(1).sample_type().unit_strindex()) == "count");
  CHECK(reader.str(cpu.period_type().type_strindex()) == "cpu");
  CHECK(cpu.period() == 10000000);
  CHECK(cpu.time_unix_nano() == 1700000000000000000ull);
  CHECK(cpu.duration_nano() == 2000000000ull);
  REQUIRE(cpu.samples_size() == 3);

  // Sample attributes: the thread and the process; container.id is the resource's.
  bool saw_worker = false;
  for (const otlp::Sample& sample : cpu.samples()) {
    const auto attributes = reader.attributes(sample.attribute_indices());
    CHECK(attributes.at("process.pid") == "42");
    CHECK(attributes.at("process.executable.name") == "app");
    CHECK(attributes.at("process.executable.path") == "/usr/bin/app");
    CHECK(attributes.at("process.linux.cgroup") == "/docker/c0ffee");
    CHECK(attributes.at("service.name") == "shop");
    CHECK(attributes.count("container.id") == 0);
    if (attributes.at("thread.name") == "worker") {
      saw_worker = true;
      CHECK(attributes.at("thread.id") == "45");
      CHECK(sample.values(0) == 40000000);
    }
  }
  CHECK(saw_worker);
  const auto other = reader.attributes(request.resource_profiles(0).scope_profiles(0).profiles(0).samples(0).attribute_indices());
  CHECK(other == std::map<std::string, std::string>{
                     {"process.pid", "44"}, {"service.name", "other"}, {"thread.id", "44"}, {"thread.name", "other"}});
}

TEST_CASE("otlp: inline chains innermost first, mappings with build IDs, the kernel mapping") {
  GsymLocator locator = make_locator();
  const ExportProfilesServiceRequest request = encode(make_capture(), locator);
  const otlp::ProfilesDictionary& dictionary = request.dictionary();
  const Reader reader{dictionary};

  const otlp::Location* bar = nullptr;
  const otlp::Location* ksys_read = nullptr;
  const otlp::Location* unknown = nullptr;
  for (int i = 1; i < dictionary.location_table_size(); ++i) {
    const std::vector<std::string> names = reader.names(i);
    if (names == std::vector<std::string>{"bar", "foo(int)"}) bar = &dictionary.location_table(i);
    if (names == std::vector<std::string>{"ksys_read"}) ksys_read = &dictionary.location_table(i);
    if (names == std::vector<std::string>{"[unknown]"}) unknown = &dictionary.location_table(i);
  }
  REQUIRE(bar);
  CHECK(bar->address() == kBias + 0x1120);
  CHECK(bar->lines(0).line() == 50);  // innermost first
  CHECK(bar->lines(1).line() == 20);  // bar's call site in foo
  const otlp::Function& foo = dictionary.function_table(bar->lines(1).function_index());
  CHECK(reader.str(foo.system_name_strindex()) == "_Z3fooi");
  CHECK(reader.str(foo.filename_strindex()) == "/src/app.c");
  CHECK(foo.start_line() == 5);
  CHECK(reader.attributes(bar->attribute_indices()) == std::map<std::string, std::string>{{"profile.frame.type", "native"}});
  const otlp::Mapping& app = dictionary.mapping_table(bar->mapping_index());
  CHECK(app.memory_start() == kBias + 0x1000);
  CHECK(app.memory_limit() == kBias + 0x2000);
  CHECK(app.file_offset() == 0x1000);
  CHECK(reader.str(app.filename_strindex()) == "/usr/bin/app");
  CHECK(reader.attributes(app.attribute_indices()) ==
        std::map<std::string, std::string>{{"process.executable.build_id.gnu", "aa010203"}});

  REQUIRE(ksys_read);
  CHECK(ksys_read->address() == 0xffffffff81000210);
  CHECK(reader.attributes(ksys_read->attribute_indices()).at("profile.frame.type") == "kernel");
  const otlp::Mapping& kernel = dictionary.mapping_table(ksys_read->mapping_index());
  CHECK(reader.str(kernel.filename_strindex()) == "[kernel.kallsyms]");
  CHECK(reader.attributes(kernel.attribute_indices()).at("process.executable.build_id.gnu") == "abcd");

  REQUIRE(unknown);
  CHECK(unknown->mapping_index() == 0);
  CHECK(unknown->address() == 0xdead);
  CHECK(dictionary.mapping_table_size() == 3);  // zero, the app, the kernel
}

TEST_CASE("otlp: same capture, same bytes; unnamed frames keep address and mapping, no lines") {
  GsymLocator locator = make_locator();
  auto a = otlp_profiles_request(make_capture(), locator, {});
  auto b = otlp_profiles_request(make_capture(), locator, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->bytes == b->bytes);
  CHECK(a->samples == 8);  // 4 stacks x 2 profiles

  LocatorOptions options;
  options.cache_dir = "";
  GsymLocator empty(options);
  const ExportProfilesServiceRequest request = encode(make_capture(), empty);
  bool saw_unnamed = false;
  for (int i = 1; i < request.dictionary().location_table_size(); ++i) {
    const otlp::Location& location = request.dictionary().location_table(i);
    if (location.address() != kBias + 0x1120) continue;
    saw_unnamed = true;
    CHECK(location.lines_size() == 0);
    CHECK(location.mapping_index() != 0);
  }
  CHECK(saw_unnamed);
}

TEST_CASE("otlp: off-CPU, wall-clock and JIT frames; invalid UTF-8") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.processes.clear();
  capture.clock = ProfileClock::Wall;
  CaptureStack waiting{42, "app", {kInMain}, false, 2, 42};
  waiting.off_cpu = OffCpuReason::Sleep;
  waiting.off_cpu_ns = 7000;
  const CaptureFrame fib{-1, 0x7e0000002010, UnresolvedReason::AnonymousMapping, false, 0};
  capture.stacks = {{42, "bad\xff", {fib, kInMain}, false, 1, 42}, waiting};
  capture.jit_symbols = {{0x7e0000002000, 0x7e0000002100, "JS:*fib /x.js:1"}};
  const ExportProfilesServiceRequest request = encode(capture, locator);
  const Reader reader{request.dictionary()};

  CHECK(folded_text_of(request, "wall") ==
        "app;main;[off-cpu S] 7000\n"
        "bad\\xff;main;JS:*fib /x.js:1 10000000\n");
  CHECK(folded_text_of(request, "cpu") == "bad\\xff;main;JS:*fib /x.js:1 10000000\n");
  CHECK(folded_text_of(request, "off_cpu") == "app;main;[off-cpu S] 7000\n");
  REQUIRE(request.resource_profiles_size() == 1);
  CHECK(request.resource_profiles(0).scope_profiles(0).profiles_size() == 3);

  for (int i = 1; i < request.dictionary().location_table_size(); ++i) {
    const otlp::Location& location = request.dictionary().location_table(i);
    if (reader.names(i) != std::vector<std::string>{"JS:*fib /x.js:1"}) continue;
    CHECK(location.mapping_index() == 0);
    CHECK(location.address() == 0x7e0000002010);
    CHECK(location.attribute_indices_size() == 0);
  }

  capture.clock = ProfileClock::OffCpu;
  capture.stacks = {waiting};
  const ExportProfilesServiceRequest off = encode(capture, locator);
  CHECK(folded_text_of(off, "off_cpu") == "app;main;[off-cpu S] 7000\n");
  CHECK(folded_text_of(off, "waits") == "app;main;[off-cpu S] 2\n");
}

TEST_CASE("otlp: Python frames: frame type cpython, the file on the function, the line, no mapping") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.python_frames = {{"<module>", "/app/fib.py", 9}, {"fib", "/app/fib.py", 3}};
  CaptureFrame fib, module;
  fib.python = 1;
  module.python = 0;
  capture.stacks = {{42, "app", {fib, fib, module, kInMain}, false, 5, 42}};
  capture.samples = 5;
  const ExportProfilesServiceRequest request = encode(capture, locator);
  const Reader reader{request.dictionary()};
  // decode.py --folded gives gsymprof's own folded text: _[p] from the frame type.
  auto symbolized = symbolize(capture, locator, {});
  REQUIRE(symbolized.ok());
  CHECK(folded_text_of(request, "samples") == folded_text(*symbolized));
  CHECK(folded_text_of(request, "samples") ==
        "app;main;fib.<module> (fib.py:9)_[p];fib.fib (fib.py:3)_[p];fib.fib (fib.py:3)_[p] 5\n");
  bool saw_fib = false;
  for (int i = 1; i < request.dictionary().location_table_size(); ++i) {
    const otlp::Location& location = request.dictionary().location_table(i);
    if (reader.names(i) != std::vector<std::string>{"fib.fib (fib.py:3)"}) continue;
    saw_fib = true;
    CHECK(location.mapping_index() == 0);
    CHECK(location.address() == 0);
    CHECK(reader.attributes(location.attribute_indices()) ==
          std::map<std::string, std::string>{{"profile.frame.type", "cpython"}});
    REQUIRE(location.lines_size() == 1);
    CHECK(location.lines(0).line() == 3);
    const otlp::Function& function = request.dictionary().function_table(location.lines(0).function_index());
    CHECK(reader.str(function.filename_strindex()) == "/app/fib.py");
  }
  CHECK(saw_fib);
}

TEST_CASE("otlp: a Go build ID under its convention key, a content hash under ours") {
  GsymLocator locator = make_locator();
  for (const auto& [id, key, value] :
       {std::tuple(BuildId(std::vector<uint8_t>{'g', 'o', '/', 'i', 'd'}, BuildId::Kind::Go),
                   "process.executable.build_id.go", "go/id"),
        std::tuple(BuildId(std::vector<uint8_t>{0x12, 0x34}, BuildId::Kind::ContentSha256),
                   "gsymprof.executable.sha256", "1234")}) {
    Capture capture = make_capture();
    capture.modules[0].build_id = id;
    capture.stacks = {{42, "app", {kInMain}, false, 1, 42}};
    const ExportProfilesServiceRequest request = encode(capture, locator);
    const Reader reader{request.dictionary()};
    REQUIRE(request.dictionary().mapping_table_size() == 2);
    CHECK(reader.attributes(request.dictionary().mapping_table(1).attribute_indices()) ==
          std::map<std::string, std::string>{{key, value}});
  }
}
