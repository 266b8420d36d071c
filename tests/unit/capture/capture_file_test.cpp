// Capture file: canonical JSON writer, strict reader, atomic file I/O.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gsym/base/file_io.h"
#include "userspace/capture/capture_file.h"

using namespace gsymprof;
using nlohmann::json;

namespace {

CaptureModule make_module(std::string path, std::string build_id_hex, uint64_t bias, uint64_t start) {
  CaptureModule m;
  m.path = std::move(path);
  m.build_id = *BuildId::from_hex(build_id_hex);
  m.load_bias = bias;
  m.mappings.push_back({start + 0x1000, start + 0x3000, 0x1000, "r-xp"});
  m.mappings.push_back({start, start + 0x1000, 0, "r--p"});
  return m;
}

// Modules, processes and stacks deliberately out of canonical order, with a
// duplicate stack.
Capture sample_capture() {
  Capture c;
  c.host = "box";
  c.kernel_release = "6.18.0";
  c.frequency_hz = 999;
  c.start_time_unix_ns = 1700000000123456789ull;
  c.duration_ns = 2000000000;
  c.call_graph = CallGraph::FramePointer;
  c.lost = {{"stack_error", 2}, {"ringbuf_full", 0}};
  c.modules.push_back(make_module("/usr/lib/libz.so", "bbbb", 0x7f0000000000, 0x7f0000000000));  // 0
  c.modules.push_back(make_module("/bin/app", "aaaa", 0x555500000000, 0x555500000000));          // 1
  c.modules.push_back(make_module("/bin/other", "", 0, 0x400000));                              // 2
  c.modules[0].build_id = *BuildId::from_hex("bbbb", BuildId::Kind::Go);  // version 3: identity kinds
  c.processes.push_back({20, "other", {2}});
  c.processes.push_back({10, "app", {1, 0}});
  CaptureStack s1{10, "app", {{1, 0x1234, UnresolvedReason::None}, {0, 0x99, UnresolvedReason::None}}, false, 5};
  CaptureStack s2{20, "other", {{2, 0x401000, UnresolvedReason::None}}, false, 3};
  CaptureStack s3{10, "app", {{-1, 0x7ffd0000, UnresolvedReason::AnonymousMapping}, {1, 0x1000, UnresolvedReason::None}}, true, 1, 10};
  s2.frames.insert(s2.frames.begin(), CaptureFrame{-1, 0xffffffff81000010, UnresolvedReason::None, true});
  // JIT frames (jit indexes into c.jit_symbols, which canonicalize sorts,
  // dropping the unused one).
  CaptureStack s4{20, "other", {{-1, 0x7e0000002010, UnresolvedReason::AnonymousMapping, false, 0},
                               {-1, 0x7e0000000040, UnresolvedReason::AnonymousMapping, false, 2},
                               {2, 0x401000, UnresolvedReason::None}}, false, 2, 21};
  c.jit_symbols = {{0x7e0000002000, 0x7e0000002100, "JS:*fib /x.js:1"},
                   {0x7e0000001000, 0x7e0000001080, "unused"},
                   {0x7e0000000000, 0x7e0000000100, "JS:^main /x.js:5"}};
  s1.tid = 11;
  s2.tid = 20;
  c.stacks = {s1, s2, s4, s3, s1};
  c.samples = 5 + 3 + 2 + 1 + 5;
  c.kernel.build_id = *BuildId::from_hex("cccc");
  c.kernel.symbols = {{0xffffffff81000100, 0xffffffff81000180, "ext4_read", "ext4"},
                      {0xffffffff81000000, 0xffffffff81000100, "do_syscall_64", ""}};
  return c;
}

const char* kSampleJson =
    "{\n"
    "\"format\": \"gsymprof-capture\",\n"
    "\"version\": 5,\n"
    "\"host\": \"box\",\n"
    "\"kernel_release\": \"6.18.0\",\n"
    "\"frequency_hz\": 999,\n"
    "\"start_time_unix_ns\": 1700000000123456789,\n"
    "\"duration_ns\": 2000000000,\n"
    "\"call_graph\": \"fp\",\n"
    "\"clock\": \"cpu\",\n"
    "\"samples\": 16,\n"
    "\"lost\": {\"ringbuf_full\":0,\"stack_error\":2},\n"
    "\"truncations\": {},\n"
    "\"kernel\": {\"build_id\":\"cccc\",\"error\":\"\",\"symbols\":[\n"
    "  {\"start\":\"0xffffffff81000000\",\"end\":\"0xffffffff81000100\",\"name\":\"do_syscall_64\",\"module\":\"\"},\n"
    "  {\"start\":\"0xffffffff81000100\",\"end\":\"0xffffffff81000180\",\"name\":\"ext4_read\",\"module\":\"ext4\"}\n"
    "]},\n"
    "\"jit_symbols\": [\n"
    "  {\"start\":\"0x7e0000000000\",\"end\":\"0x7e0000000100\",\"name\":\"JS:^main /x.js:5\"},\n"
    "  {\"start\":\"0x7e0000002000\",\"end\":\"0x7e0000002100\",\"name\":\"JS:*fib /x.js:1\"}\n"
    "],\n"
    "\"python_frames\": [],\n"
    "\"modules\": [\n"
    "  {\"path\":\"/bin/app\",\"build_id\":\"aaaa\",\"build_id_kind\":\"gnu\",\"load_bias\":\"0x555500000000\",\"mappings\":["
    "{\"start\":\"0x555500000000\",\"end\":\"0x555500001000\",\"file_offset\":\"0x0\",\"perms\":\"r--p\"},"
    "{\"start\":\"0x555500001000\",\"end\":\"0x555500003000\",\"file_offset\":\"0x1000\",\"perms\":\"r-xp\"}],"
    "\"error\":\"\"},\n"
    "  {\"path\":\"/bin/other\",\"build_id\":\"\",\"build_id_kind\":\"gnu\",\"load_bias\":\"0x0\",\"mappings\":["
    "{\"start\":\"0x400000\",\"end\":\"0x401000\",\"file_offset\":\"0x0\",\"perms\":\"r--p\"},"
    "{\"start\":\"0x401000\",\"end\":\"0x403000\",\"file_offset\":\"0x1000\",\"perms\":\"r-xp\"}],"
    "\"error\":\"\"},\n"
    "  {\"path\":\"/usr/lib/libz.so\",\"build_id\":\"bbbb\",\"build_id_kind\":\"go\",\"load_bias\":\"0x7f0000000000\",\"mappings\":["
    "{\"start\":\"0x7f0000000000\",\"end\":\"0x7f0000001000\",\"file_offset\":\"0x0\",\"perms\":\"r--p\"},"
    "{\"start\":\"0x7f0000001000\",\"end\":\"0x7f0000003000\",\"file_offset\":\"0x1000\",\"perms\":\"r-xp\"}],"
    "\"error\":\"\"}\n"
    "],\n"
    "\"processes\": [\n"
    "  {\"pid\":10,\"comm\":\"app\",\"modules\":[0,2]},\n"
    "  {\"pid\":20,\"comm\":\"other\",\"modules\":[1]}\n"
    "],\n"
    "\"stacks\": [\n"
    "  {\"pid\":10,\"tid\":10,\"comm\":\"app\",\"count\":1,\"truncated\":true,\"frames\":["
    "{\"unresolved\":\"anonymous-mapping\",\"address\":\"0x7ffd0000\"},{\"module\":0,\"address\":\"0x1000\"}]},\n"
    "  {\"pid\":10,\"tid\":11,\"comm\":\"app\",\"count\":10,\"truncated\":false,\"frames\":["
    "{\"module\":0,\"address\":\"0x1234\"},{\"module\":2,\"address\":\"0x99\"}]},\n"
    "  {\"pid\":20,\"tid\":20,\"comm\":\"other\",\"count\":3,\"truncated\":false,\"frames\":["
    "{\"kernel\":true,\"address\":\"0xffffffff81000010\"},"
    "{\"module\":1,\"address\":\"0x401000\"}]},\n"
    "  {\"pid\":20,\"tid\":21,\"comm\":\"other\",\"count\":2,\"truncated\":false,\"frames\":["
    "{\"unresolved\":\"anonymous-mapping\",\"address\":\"0x7e0000002010\",\"jit\":1},"
    "{\"unresolved\":\"anonymous-mapping\",\"address\":\"0x7e0000000040\",\"jit\":0},"
    "{\"module\":1,\"address\":\"0x401000\"}]}\n"
    "]\n"
    "}\n";

// The error message for `text`, or "" if it parses.
std::string error_of(const std::string& text) {
  auto parsed = capture_from_json(text);
  return parsed ? "" : parsed.error().message;
}

// The sample capture's JSON with one edit applied.
template <class Edit>
std::string edited(Edit edit) {
  json doc = json::parse(capture_to_json(sample_capture()));
  edit(doc);
  return doc.dump();
}

}  // namespace

TEST_CASE("capture JSON: exact canonical text") {
  CHECK(capture_to_json(sample_capture()) == kSampleJson);
}

TEST_CASE("capture JSON: round trip is lossless after canonicalization") {
  Capture expected = sample_capture();
  canonicalize(expected);
  auto parsed = capture_from_json(kSampleJson);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  const Capture& c = *parsed;
  CHECK(c.host == "box");
  CHECK(c.kernel_release == "6.18.0");
  CHECK(c.frequency_hz == 999);
  CHECK(c.start_time_unix_ns == 1700000000123456789ull);
  CHECK(c.duration_ns == 2000000000);
  CHECK(c.call_graph == CallGraph::FramePointer);
  CHECK(c.samples == 16);
  CHECK(c.jit_symbols == expected.jit_symbols);
  REQUIRE(c.jit_symbols.size() == 2);
  CHECK(c.lost == expected.lost);
  REQUIRE(c.modules.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(c.modules[i].path == expected.modules[i].path);
    CHECK(c.modules[i].build_id == expected.modules[i].build_id);
    CHECK(c.modules[i].load_bias == expected.modules[i].load_bias);
    REQUIRE(c.modules[i].mappings.size() == expected.modules[i].mappings.size());
    for (size_t j = 0; j < c.modules[i].mappings.size(); ++j) {
      CHECK(c.modules[i].mappings[j].start == expected.modules[i].mappings[j].start);
      CHECK(c.modules[i].mappings[j].end == expected.modules[i].mappings[j].end);
      CHECK(c.modules[i].mappings[j].file_offset == expected.modules[i].mappings[j].file_offset);
      CHECK(c.modules[i].mappings[j].perms == expected.modules[i].mappings[j].perms);
    }
  }
  REQUIRE(c.processes.size() == 2);
  CHECK(c.processes[0].pid == 10);
  CHECK(c.processes[0].modules == std::vector<uint32_t>{0, 2});
  REQUIRE(c.stacks.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(c.stacks[i].pid == expected.stacks[i].pid);
    CHECK(c.stacks[i].comm == expected.stacks[i].comm);
    CHECK(c.stacks[i].count == expected.stacks[i].count);
    CHECK(c.stacks[i].truncated == expected.stacks[i].truncated);
    CHECK(c.stacks[i].frames == expected.stacks[i].frames);
  }
  // And the text is a fixed point.
  CHECK(capture_to_json(c) == kSampleJson);
}

TEST_CASE("canonicalize keeps every frame on its module") {
  Capture c = sample_capture();
  canonicalize(c);
  // s1's frames were /bin/app then /usr/lib/libz.so, whatever the indexes are now.
  const CaptureStack& s1 = c.stacks[1];
  REQUIRE(s1.frames.size() == 2);
  CHECK(c.modules[static_cast<size_t>(s1.frames[0].module)].path == "/bin/app");
  CHECK(c.modules[static_cast<size_t>(s1.frames[1].module)].path == "/usr/lib/libz.so");
  CHECK(s1.count == 10);  // the duplicate merged
  // Identical modules (a forked child's) merge into one entry.
  Capture forked = sample_capture();
  forked.modules.push_back(forked.modules[1]);
  forked.processes.push_back({30, "app", {3}});
  forked.stacks.push_back({30, "app", {{3, 0x1234, UnresolvedReason::None}}, false, 2});
  forked.samples += 2;
  canonicalize(forked);
  CHECK(forked.modules.size() == 3);
  CHECK(forked.processes.back().modules == std::vector<uint32_t>{0});
  CHECK(forked.stacks.back().frames[0].module == 0);
}

TEST_CASE("capture JSON: input order does not change the bytes") {
  Capture a = sample_capture(), b = sample_capture();
  std::reverse(b.modules.begin(), b.modules.end());  // 0<->2 swapped: remap references
  for (CaptureProcess& p : b.processes)
    for (uint32_t& m : p.modules) m = 2 - m;
  for (CaptureStack& s : b.stacks)
    for (CaptureFrame& f : s.frames)
      if (f.module >= 0) f.module = 2 - f.module;
  std::reverse(b.processes.begin(), b.processes.end());
  std::reverse(b.stacks.begin(), b.stacks.end());
  CHECK(capture_to_json(a) == capture_to_json(b));
}

TEST_CASE("unresolved reason names round trip") {
  for (auto reason : {UnresolvedReason::NoMapping, UnresolvedReason::AnonymousMapping,
                      UnresolvedReason::ModuleUnreadable, UnresolvedReason::NoSegment,
                      UnresolvedReason::ProcessGone}) {
    UnresolvedReason back = UnresolvedReason::None;
    CHECK(parse_unresolved_reason(to_string(reason), &back));
    CHECK(back == reason);
  }
  CHECK(std::string(to_string(UnresolvedReason::NoSegment)) == "no-segment");
  UnresolvedReason r;
  CHECK_FALSE(parse_unresolved_reason("bogus", &r));
}

TEST_CASE("capture JSON: strict parser, one-line errors naming the field") {
  CHECK(error_of(kSampleJson) == "");
  CHECK(error_of("").rfind("not valid JSON: ", 0) == 0);
  CHECK(error_of("{\"format\":").rfind("not valid JSON: ", 0) == 0);
  CHECK(error_of("[]") == "capture: expected a JSON object at top level");
  // Document order: the top level is an array before it is too deep.
  CHECK(error_of(std::string(100, '[') + std::string(100, ']')) ==
        "capture: expected a JSON object at top level");
  CHECK(error_of("{\"x\":" + std::string(100, '[') + std::string(100, ']') + "}") ==
        "not a capture: JSON nested deeper than 16 levels");
  CHECK(error_of(edited([](json& d) { d["format"] = "perf"; })) ==
        "format: not a gsymprof capture (format is \"perf\")");
  CHECK(error_of(edited([](json& d) { d.erase("format"); })) == "format: missing field");
  CHECK(error_of(edited([](json& d) { d["version"] = 6; })) ==
        "version: unsupported capture version 6 (this gsymprof reads versions 1 to 5)");
  CHECK(error_of(edited([](json& d) { d["clock"] = "gpu"; })) ==
        "clock: unknown clock \"gpu\" (known: cpu, off-cpu, wall)");
  CHECK(error_of(edited([](json& d) { d["call_graph"] = "lbr"; })) ==
        "call_graph: unknown call graph \"lbr\" (known: fp, dwarf, none)");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["off_cpu"] = "Z"; })) ==
        "stacks[0].off_cpu: unknown off-CPU reason \"Z\"");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["off_cpu_ns"] = 5; })) ==
        "stacks[0]: off_cpu_ns or short_waits without off_cpu");
  CHECK(error_of(edited([](json& d) { d["modules"][0]["error_kind"] = "gone"; })) ==
        "modules[0].error_kind: unknown error kind \"gone\" (known: none, process-exited, unreadable)");
  CHECK(error_of(edited([](json& d) { d["version"] = "1"; })) ==
        "version: expected an unsigned integer, got a string");
  CHECK(error_of(edited([](json& d) { d.erase("host"); })) == "host: missing field");
  CHECK(error_of(edited([](json& d) { d["frequency_hz"] = 4294967296ull; })) ==
        "frequency_hz: value 4294967296 does not fit in 32 bits");
  CHECK(error_of(edited([](json& d) { d["duration_ns"] = -1; })) ==
        "duration_ns: expected an unsigned integer, got a negative one");
  CHECK(error_of(edited([](json& d) { d["duration_ns"] = 1.5; })) ==
        "duration_ns: expected an unsigned integer, got a non-integer number");
  CHECK(error_of(edited([](json& d) { d["format"] = "a\nb"; })) ==
        "format: not a gsymprof capture (format is \"a\\nb\")");
  CHECK(error_of(edited([](json& d) { d["format"] = std::string(50, 'f'); })) ==
        "format: not a gsymprof capture (format is \"" + std::string(40, 'f') + "\"...)");
  CHECK(error_of(edited([](json& d) { d["call_graph"] = ""; })) == "call_graph: must not be empty");
  CHECK(error_of(edited([](json& d) { d["lost"] = json::array(); })) ==
        "lost: expected an object, got an array");
  CHECK(error_of(edited([](json& d) { d["lost"]["x"] = true; })) ==
        "lost.\"x\": expected an unsigned integer, got a boolean");
  CHECK(error_of(edited([](json& d) { d["modules"] = nullptr; })) ==
        "modules: expected an array, got null");
  CHECK(error_of(edited([](json& d) { d["modules"][1]["load_bias"] = "12"; })) ==
        "modules[1].load_bias: expected a hex string \"0x...\" of at most 16 digits");
  CHECK(error_of(edited([](json& d) { d["modules"][1]["load_bias"] = "0x12345678901234567"; })) ==
        "modules[1].load_bias: expected a hex string \"0x...\" of at most 16 digits");
  CHECK(error_of(edited([](json& d) { d["modules"][1]["load_bias"] = "0xg"; })) ==
        "modules[1].load_bias: invalid hex digit in \"0xg\"");
  CHECK(error_of(edited([](json& d) { d["modules"][0]["build_id"] = "abc"; })) ==
        "modules[0].build_id: not an even-length hex string");
  CHECK(error_of(edited([](json& d) { d["modules"][0]["mappings"][0]["end"] = "0x0"; })) ==
        "modules[0].mappings[0]: start is not below end");
  CHECK(error_of(edited([](json& d) { d["modules"][0]["mappings"][0].erase("perms"); })) ==
        "modules[0].mappings[0].perms: missing field");
  CHECK(error_of(edited([](json& d) { d["processes"][0]["modules"][1] = 3; })) ==
        "processes[0].modules[1]: module index 3 out of range (3 modules)");
  CHECK(error_of(edited([](json& d) { d["processes"][1]["pid"] = 10; })) ==
        "processes[1].pid: duplicate process 10");
  CHECK(error_of(edited([](json& d) { d["stacks"][2]["pid"] = 30; })) ==
        "stacks[2].pid: process 30 is not in \"processes\"");
  CHECK(error_of(edited([](json& d) { d["stacks"][1]["frames"][0]["module"] = 7; })) ==
        "stacks[1].frames[0].module: module index 7 out of range (3 modules)");
  CHECK(error_of(edited([](json& d) { d["stacks"][1]["frames"][0]["module"] = 1; })) ==
        "stacks[1].frames[0].module: module 1 is not a module of the stack's process");
  CHECK(error_of(edited([](json& d) { d["stacks"][1]["frames"][0]["module"] = -1; })) ==
        "stacks[1].frames[0].module: expected an unsigned integer, got a negative one");
  CHECK(error_of(edited([](json& d) { d["stacks"][1]["frames"][0]["unresolved"] = "no-mapping"; })) ==
        "stacks[1].frames[0]: a frame needs exactly one of \"module\", \"unresolved\" and \"kernel\"");
  CHECK(error_of(edited([](json& d) { d["stacks"][1]["frames"][0].erase("module"); })) ==
        "stacks[1].frames[0]: a frame needs exactly one of \"module\", \"unresolved\" and \"kernel\"");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["frames"][0]["unresolved"] = "none"; })) ==
        "stacks[0].frames[0].unresolved: unknown reason \"none\"");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["frames"][0]["unresolved"] = 3; })) ==
        "stacks[0].frames[0].unresolved: expected a string, got an integer");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["frames"][0].erase("address"); })) ==
        "stacks[0].frames[0].address: missing field");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["count"] = 0; })) == "stacks[0].count: must be at least 1");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["truncated"] = 1; })) ==
        "stacks[0].truncated: expected a boolean, got an integer");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["frames"] = "x"; })) ==
        "stacks[0].frames: expected an array, got a string");
  CHECK(error_of(edited([](json& d) { d["samples"] = 15; })) ==
        "samples: 15 does not equal the sum of stack counts (16)");
  CHECK(error_of(edited([](json& d) {
          d["stacks"][0]["count"] = UINT64_MAX;
          d["stacks"][1]["count"] = 2;
        })) == "stacks[1].count: sample counts overflow 64 bits");
  // Version 2: kernel frames and symbols, threads.
  CHECK(error_of(edited([](json& d) { d["stacks"][2]["frames"][0]["kernel"] = false; })) ==
        "stacks[2].frames[0].kernel: must be true when present");
  CHECK(error_of(edited([](json& d) { d["stacks"][2]["frames"][0]["module"] = 1; })) ==
        "stacks[2].frames[0]: a frame needs exactly one of \"module\", \"unresolved\" and \"kernel\"");
  CHECK(error_of(edited([](json& d) { d["kernel"]["symbols"][1]["start"] = "0xffffffff810000f0"; })) ==
        "kernel.symbols[1]: overlaps or precedes the symbol before it");
  CHECK(error_of(edited([](json& d) { d["kernel"]["symbols"][0]["end"] = "0xffffffff81000000"; })) ==
        "kernel.symbols[0]: start is not below end");
  CHECK(error_of(edited([](json& d) { d["kernel"]["symbols"][0].erase("name"); })) ==
        "kernel.symbols[0].name: missing field");
  CHECK(error_of(edited([](json& d) { d["kernel"]["build_id"] = "xyz"; })) ==
        "kernel.build_id: not an even-length hex string");
  CHECK(error_of(edited([](json& d) { d["stacks"][0]["tid"] = -1; })) ==
        "stacks[0].tid: expected an unsigned integer, got a negative one");
  // JIT frames and symbols.
  CHECK(error_of(edited([](json& d) { d["stacks"][3]["frames"][0]["jit"] = 2; })) ==
        "stacks[3].frames[0].jit: JIT symbol index 2 out of range (2 JIT symbols)");
  CHECK(error_of(edited([](json& d) { d["stacks"][3]["frames"][0]["jit"] = 0; })) ==
        "stacks[3].frames[0].jit: the frame's address is outside JIT symbol 0");
  CHECK(error_of(edited([](json& d) { d["stacks"][3]["frames"][0]["jit"] = "1"; })) ==
        "stacks[3].frames[0].jit: expected an unsigned integer, got a string");
  CHECK(error_of(edited([](json& d) { d["stacks"][3]["frames"][0]["unresolved"] = "no-mapping"; })) ==
        "stacks[3].frames[0].jit: only a frame with \"unresolved\": \"anonymous-mapping\" is JIT code");
  CHECK(error_of(edited([](json& d) { d["stacks"][1]["frames"][0]["jit"] = 0; })) ==
        "stacks[1].frames[0].jit: only a frame with \"unresolved\": \"anonymous-mapping\" is JIT code");
  CHECK(error_of(edited([](json& d) { d["jit_symbols"][1]["start"] = "0x7dffffffff00"; })) ==
        "jit_symbols[1]: not after the symbol before it (sorted by start, end, name; no repeats)");
  CHECK(error_of(edited([](json& d) { d["jit_symbols"][1] = d["jit_symbols"][0]; })) ==
        "jit_symbols[1]: not after the symbol before it (sorted by start, end, name; no repeats)");
  CHECK(error_of(edited([](json& d) { d["jit_symbols"][0]["end"] = "0x7e0000000000"; })) ==
        "jit_symbols[0]: start is not below end");
  CHECK(error_of(edited([](json& d) { d["jit_symbols"][0].erase("name"); })) ==
        "jit_symbols[0].name: missing field");
  CHECK(error_of(edited([](json& d) { d["jit_symbols"][0]["name"] = 5; })) ==
        "jit_symbols[0].name: expected a string, got an integer");
  CHECK(error_of(edited([](json& d) { d["jit_symbols"] = json::object(); })) ==
        "jit_symbols: expected an array, got an object");
  // A return address may be the symbol's end; one past it is not.
  CHECK(error_of(edited([](json& d) { d["stacks"][3]["frames"][1]["address"] = "0x7e0000000100"; })) == "");
  CHECK(error_of(edited([](json& d) { d["stacks"][3]["frames"][1]["address"] = "0x7e0000000101"; })) ==
        "stacks[3].frames[1].jit: the frame's address is outside JIT symbol 0");
  // jit_symbols may come after the stacks that use it.
  {
    json doc = json::parse(capture_to_json(sample_capture()));
    const std::string text = doc.dump();
    json symbols = doc["jit_symbols"];
    doc.erase("jit_symbols");
    std::string moved = doc.dump();
    moved.insert(moved.size() - 1, ",\"jit_symbols\":" + symbols.dump());
    auto parsed = capture_from_json(moved);
    REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
    CHECK(capture_to_json(*parsed) == kSampleJson);
  }
  // Version 1 (no kernel, no tids) still reads.
  {
    json doc = json::parse(capture_to_json(sample_capture()));
    doc["version"] = 1;
    doc.erase("kernel");
    doc["stacks"][2]["frames"].erase(0);
    doc.erase("jit_symbols");
    doc.erase("python_frames");
    doc["stacks"].erase(3);
    doc["samples"] = 14;
    for (json& stack : doc["stacks"]) stack.erase("tid");
    auto parsed = capture_from_json(doc.dump());
    REQUIRE(parsed);
    CHECK(parsed->kernel.symbols.empty());
    CHECK(parsed->stacks[1].tid == 0);
  }
  // Version 2 (no build_id_kind): every build ID is a GNU build ID.
  {
    json doc = json::parse(capture_to_json(sample_capture()));
    doc["version"] = 2;
    for (json& module : doc["modules"]) module.erase("build_id_kind");
    auto parsed = capture_from_json(doc.dump());
    REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
    CHECK(parsed->modules[2].build_id == *BuildId::from_hex("bbbb"));
    CHECK(parsed->modules[2].build_id.kind() == BuildId::Kind::Gnu);
  }
  // Version 3: the kind is read whatever the field order; unknown kinds and
  // identities longer than 128 bytes are refused.
  {
    json doc = json::parse(capture_to_json(sample_capture()));
    json kind = doc["modules"][0]["build_id_kind"];
    doc["modules"][0].erase("build_id_kind");
    json reordered = {{"build_id_kind", "sha256"}};
    for (auto& [key, value] : doc["modules"][0].items()) reordered[key] = value;
    doc["modules"][0] = reordered;
    auto parsed = capture_from_json(doc.dump());
    REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
    CHECK(parsed->modules[0].build_id == *BuildId::from_hex("aaaa", BuildId::Kind::ContentSha256));
  }
  CHECK(error_of(edited([](json& d) { d["modules"][0]["build_id_kind"] = "md5"; })) ==
        "modules[0].build_id_kind: unknown build ID kind \"md5\" (known: gnu, go, sha256)");
  CHECK(error_of(edited([](json& d) { d["modules"][0]["build_id"] = std::string(258, 'a'); })) ==
        "modules[0].build_id: longer than 128 bytes");
  CHECK(error_of(edited([](json& d) { d["modules"][0]["build_id"] = std::string(256, 'a'); })) == "");
  // Unknown fields are ignored (compatible additions need no new version).
  CHECK(error_of(edited([](json& d) {
          d["future"] = {1, 2};
          d["stacks"][0]["weight"] = 3;
        })) == "");
  // An empty capture (nothing sampled) is valid.
  Capture empty;
  CHECK(error_of(capture_to_json(empty)) == "");
}

TEST_CASE("capture JSON: every truncation of a valid file is an error") {
  const std::string text = kSampleJson;
  // The last byte is the final newline; without it the document is complete.
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    auto parsed = capture_from_json(std::string_view(text).substr(0, n));
    CHECK_MESSAGE(!parsed.ok(), "prefix of " << n << " bytes parsed");
  }
}

TEST_CASE("capture files: atomic write, read back, errors name the file") {
  char dir_template[] = "/tmp/capture_file_test.XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::filesystem::path dir = dir_template;
  const std::string path = (dir / "c.json").string();
  Capture sample = sample_capture();
  REQUIRE(write_capture_file(sample, path).ok());
  auto back = read_capture_file(path);
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(capture_to_json(*back) == kSampleJson);
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++files;
  }
  CHECK(files == 1);  // no temporary left behind

  auto missing = read_capture_file((dir / "nope.json").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == (dir / "nope.json").string() + ": cannot open: No such file or directory");

  {
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f);
    std::fputs("{\"format\":\"gsymprof-capture\",\"version\":9}", f);
    std::fclose(f);
  }
  auto bad = read_capture_file(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == path + ": version: unsupported capture version 9 (this gsymprof reads versions 1 to 5)");

  auto unwritable = write_capture_file(sample, (dir / "no/such/dir.json").string());
  CHECK_FALSE(unwritable.ok());
  std::filesystem::remove_all(dir);
}

namespace {

// A temporary directory, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char dir_template[] = "/tmp/capture_file_test.XXXXXX";
    REQUIRE(mkdtemp(dir_template) != nullptr);
    path = dir_template;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = (path / name).string();
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
};

// The sample (or `text`) with every object's keys in reverse order, sections
// last to first (stacks before the processes and modules they refer to).
std::string reversed_sample(const std::string& text = kSampleJson) {
  json doc = json::parse(text);
  std::function<std::string(const json&)> dump = [&](const json& v) -> std::string {
    if (v.is_object()) {
      std::string out = "{";
      for (auto it = v.end(); it != v.begin();) {
        --it;
        if (out.size() > 1) out += ",";
        out += json(it.key()).dump() + ":" + dump(*it);
      }
      return out + "}";
    }
    if (v.is_array()) {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + dump(v[i]);
      return out + "]";
    }
    return v.dump();
  };
  return dump(doc);
}

}  // namespace

TEST_CASE("capture JSON: field order does not matter, sections may refer forward") {
  const std::string text = reversed_sample();
  REQUIRE(text.find("\"stacks\"") < text.find("\"processes\""));
  REQUIRE(text.find("\"processes\"") < text.find("\"modules\""));
  auto parsed = capture_from_json(text);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  CHECK(capture_to_json(*parsed) == kSampleJson);
  // Errors found in the later passes name the same paths.
  json doc = json::parse(kSampleJson);
  doc["processes"][0]["modules"][1] = 3;
  const json processes = doc["processes"];
  doc.erase("processes");
  const std::string bad = "{\"processes\":" + processes.dump() + "," + doc.dump().substr(1);  // processes first...
  CHECK(error_of(bad) == "processes[0].modules[1]: module index 3 out of range (3 modules)");
  // ... and frames before their stack's pid are checked when it is read.
  json stacks = json::parse(kSampleJson)["stacks"];
  std::string reordered = "[";
  for (size_t i = 0; i < stacks.size(); ++i) {
    json frames = stacks[i]["frames"];
    if (i == 1) frames[0]["module"] = 1;
    json rest = stacks[i];
    rest.erase("frames");
    reordered += (i ? ",{\"frames\":" : "{\"frames\":") + frames.dump() + "," + rest.dump().substr(1);
  }
  reordered += "]";
  json whole = json::parse(kSampleJson);
  whole.erase("stacks");
  std::string text2 = whole.dump();
  text2 = text2.substr(0, text2.size() - 1) + ",\"stacks\":" + reordered + "}";
  CHECK(error_of(text2) == "stacks[1].frames[0].module: module 1 is not a module of the stack's process");
}

TEST_CASE("capture JSON: the first error in document order wins") {
  // edited() writes keys in alphabetical order: call_graph, ..., format, ...,
  // host, ..., lost, modules, processes, samples, stacks, ..., version.
  // A section's error before a missing header field (found at the top
  // level's end) or a bad one after it.
  CHECK(error_of(edited([](json& d) {
          d["stacks"][0]["count"] = 0;
          d.erase("host");
        })) == "stacks[0].count: must be at least 1");
  CHECK(error_of(edited([](json& d) {
          d["modules"][0]["load_bias"] = 1;
          d["version"] = 9;
        })) == "modules[0].load_bias: expected a string, got an integer");
  CHECK(error_of(edited([](json& d) {
          d["modules"][0]["load_bias"] = 1;
          d["format"] = "perf";
        })) == "format: not a gsymprof capture (format is \"perf\")");
  CHECK(error_of(edited([](json& d) {
          d["samples"] = "x";
          d["call_graph"] = "";
        })) == "call_graph: must not be empty");
  // `lost` in document order, not key order.
  {
    std::string text = kSampleJson;
    const std::string from = "{\"ringbuf_full\":0,\"stack_error\":2}";
    text.replace(text.find(from), from.size(), "{\"b\":-1,\"a\":\"x\"}");
    CHECK(error_of(text) == "lost.\"b\": expected an unsigned integer, got a negative one");
  }
  // A repeated pid (found by sorting) before a later error in `processes`.
  CHECK(error_of(edited([](json& d) {
          d["processes"][1]["pid"] = 10;
          d["processes"].push_back({{"pid", 30}, {"comm", "x"}, {"modules", {9}}});
        })) == "processes[1].pid: duplicate process 10");
  // A JIT frame is checked where it is read once jit_symbols is known, not
  // after the whole capture (`samples` is).
  CHECK(error_of(edited([](json& d) {
          d["stacks"][3]["frames"][0]["jit"] = 2;
          d["samples"] = 15;
        })) == "stacks[3].frames[0].jit: JIT symbol index 2 out of range (2 JIT symbols)");
  {
    json doc = json::parse(kSampleJson);
    doc["stacks"][3]["frames"][0]["jit"] = 2;
    json symbols = doc["jit_symbols"];
    doc.erase("jit_symbols");
    std::string text = doc.dump();
    text.insert(text.size() - 1, ",\"jit_symbols\":" + symbols.dump());  // after the stacks
    CHECK(error_of(text) == "stacks[3].frames[0].jit: JIT symbol index 2 out of range (2 JIT symbols)");
  }
  // A section before one it refers to is checked by a later pass, after the
  // rest of the document: here stacks and processes come before modules.
  std::string text = reversed_sample();
  text.replace(text.find("\"r-xp\""), 6, "7");  // modules[0].mappings[1].perms
  text.replace(text.find("\"count\":10"), 10, "\"count\":0");
  CHECK(error_of(text) == "modules[0].mappings[1].perms: expected a string, got an integer");
  // A syntax error after another error is not reached; one before it is.
  std::string broken = edited([](json& d) { d["format"] = "perf"; });
  CHECK(error_of(broken.substr(0, broken.size() - 1)) == "format: not a gsymprof capture (format is \"perf\")");
  broken.insert(1, "x");
  CHECK(error_of(broken).rfind("not valid JSON: ", 0) == 0);
}

TEST_CASE("capture JSON: duplicate fields are rejected") {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kSampleJson;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  CHECK(error_of(with("\"version\": 5,", "\"version\": 5, \"version\": 5,")) == "version: duplicate field");
  CHECK(error_of(with("\"count\":1,", "\"count\":1,\"count\":1,")) == "stacks[0].count: duplicate field");
  CHECK(error_of(with("{\"ringbuf_full\":0,", "{\"ringbuf_full\":0,\"ringbuf_full\":0,")) ==
        "lost.\"ringbuf_full\": duplicate field");
  CHECK(error_of(with("\"stacks\": [", "\"stacks\": [], \"stacks\": [")) == "stacks: duplicate field");
  // Unknown fields are not interpreted, so they may repeat.
  CHECK(error_of(with("\"version\": 5,", "\"version\": 5, \"x\": 1, \"x\": [],")) == "");
}

TEST_CASE("capture JSON: bounded memory for hostile shapes") {
  // Nesting is bounded anywhere, also in fields nobody reads.
  auto nested = [](int depth) {
    json doc = json::parse(kSampleJson);
    std::string text = doc.dump();
    std::string junk = std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
    return "{\"future\":" + junk + "," + text.substr(1);
  };
  CHECK(error_of(nested(15)) == "");
  CHECK(error_of(nested(16)) == "not a capture: JSON nested deeper than 16 levels");
  // A process's module list is a set: repeats cost nothing.
  std::string many = "[";
  for (int i = 0; i < 100000; ++i) many += i ? ",2,0" : "2,0";
  many += "]";
  json doc = json::parse(kSampleJson);
  std::string text = doc.dump();
  const std::string from = "\"modules\":[0,2]";
  text.replace(text.find(from), from.size(), "\"modules\":" + many);
  auto parsed = capture_from_json(text);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  CHECK(parsed->processes[0].modules == std::vector<uint32_t>{0, 2});
  CHECK(parsed->processes[0].modules.capacity() < 16);
  // `lost` reasons are bounded in number.
  json lost = json::object();
  for (int i = 0; i < 1024; ++i) lost["r" + std::to_string(i)] = 0;
  CHECK(error_of(edited([&](json& d) { d["lost"] = lost; })) == "");
  lost["r1024"] = 0;
  CHECK(error_of(edited([&](json& d) { d["lost"] = lost; })) == "lost: more than 1024 reasons");
}

TEST_CASE("capture JSON: size limit") {
  const std::string text = kSampleJson;
  CHECK(error_of(text) == "");
  auto small = capture_from_json(text, text.size());
  CHECK(small.ok());
  auto over = capture_from_json(text, text.size() - 1);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message == "capture too large: " + std::to_string(text.size()) + " bytes (limit " +
                                    std::to_string(text.size() - 1) + ")");
  CHECK(kMaxCaptureBytes == uint64_t{1} << 30);

  TempDir dir;
  const std::string path = dir.write("c.json", text);
  CHECK(read_capture_file(path, text.size()).ok());
  auto file_over = read_capture_file(path, 100);
  REQUIRE_FALSE(file_over.ok());
  CHECK(file_over.error().message ==
        path + ": capture too large: " + std::to_string(text.size()) + " bytes (limit 100)");
}

TEST_CASE("capture files: only regular files, never blocking") {
  TempDir dir;
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto from_fifo = read_capture_file(fifo);  // would block without O_NONBLOCK
  REQUIRE_FALSE(from_fifo.ok());
  CHECK(from_fifo.error().message == fifo + ": not a regular file");
  auto from_dir = read_capture_file(dir.path.string());
  REQUIRE_FALSE(from_dir.ok());
  CHECK(from_dir.error().message == dir.path.string() + ": is a directory");
}

TEST_CASE("capture files: streamed in pieces, same result as from memory") {
  // Well over the reader's buffer, so tokens straddle refills.
  Capture big = sample_capture();
  for (uint32_t i = 0; i < 20000; ++i) {
    big.stacks.push_back({10, "app", {{1, 0x1000 + i, UnresolvedReason::None}, {0, i, UnresolvedReason::None}},
                          i % 2 == 0, 1});
    ++big.samples;
  }
  const std::string text = capture_to_json(big);
  REQUIRE(text.size() > 1024 * 1024);
  TempDir dir;
  const std::string path = dir.write("big.json", text);
  auto from_file = read_capture_file(path);
  REQUIRE_MESSAGE(from_file.ok(), from_file.error().message);
  CHECK(capture_to_json(*from_file) == text);

  // Written in pieces as the text is made (past 1 MiB each): the same bytes,
  // and the capture left in canonical order.
  Capture written = big;
  const std::string written_path = (dir.path / "written.json").string();
  REQUIRE(write_capture_file(written, written_path).ok());
  auto written_text = gsym::read_file_text(written_path, kMaxCaptureBytes);
  REQUIRE(written_text.ok());
  CHECK(*written_text == text);
  CHECK(capture_to_json(written) == text);
  Capture canonical = big;
  canonicalize(canonical);
  REQUIRE(written.stacks.size() == canonical.stacks.size());
  bool same_order = true;
  for (size_t i = 0; i < canonical.stacks.size(); ++i)
    same_order = same_order && written.stacks[i].frames == canonical.stacks[i].frames &&
                 written.stacks[i].count == canonical.stacks[i].count;
  CHECK(same_order);
  // A failed write mid-way says why.
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full >= 0) {
    auto failed = write_capture_file(written, "/dev/fd/" + std::to_string(full));
    ::close(full);
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.error().message == "/dev/fd/" + std::to_string(full) + ": write failed: No space left on device");
  }

  // Sections out of order need further passes over the file.
  const size_t stacks_at = text.find("\"stacks\"");
  const std::string stacks_first = "{" + text.substr(stacks_at, text.rfind("\n}") - stacks_at) + ",\n" +
                                   text.substr(2, text.find(",\n\"stacks\"") - 2) + "}";
  REQUIRE(json::parse(stacks_first).size() == json::parse(text).size());
  auto reordered = read_capture_file(dir.write("reordered.json", stacks_first));
  REQUIRE_MESSAGE(reordered.ok(), reordered.error().message);
  CHECK(capture_to_json(*reordered) == text);

  // An error deep in the file names its path and the file.
  const json stacks = json::parse(text)["stacks"];
  size_t index = 0;
  while (index < stacks.size() && stacks[index]["frames"][0] != json{{"module", 0}, {"address", "0x4e1f"}})
    ++index;
  REQUIRE(index > 10000);
  REQUIRE(index < stacks.size());
  std::string bad = text;
  bad.replace(bad.find("{\"module\":0,\"address\":\"0x4e1f\"}"), 31, "{\"module\":0,\"address\":\"0xge1f\"}");
  const std::string bad_path = dir.write("bad.json", bad);
  auto error = read_capture_file(bad_path);
  REQUIRE_FALSE(error.ok());
  CHECK(error.error().message == bad_path + ": stacks[" + std::to_string(index) +
                                     "].frames[0].address: invalid hex digit in \"0xge1f\"");
  CHECK(error.error().message == bad_path + ": " + error_of(bad));
}

TEST_CASE("capture JSON: strings are written as nlohmann writes them") {
  Capture c = sample_capture();
  const std::string odd[] = {"a\"b\\c", "tab\there\n", std::string("nul\0x", 5), "\x7f", "caf\xc3\xa9",
                             "bad \xff byte", "\x01\x1f"};
  c.stacks.clear();
  c.samples = 0;
  for (const std::string& comm : odd) {
    c.stacks.push_back({10, comm, {}, false, 1});
    ++c.samples;
  }
  const std::string text = capture_to_json(c);
  for (const std::string& comm : odd)
    CHECK_MESSAGE(text.find(json(comm).dump(-1, ' ', false, json::error_handler_t::replace)) != std::string::npos,
                  comm);
  auto back = capture_from_json(text);
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(capture_to_json(*back) == text);
}

TEST_CASE("capture JSON: version 3 files read as version 4 models them") {
  json doc = json::parse(capture_to_json(sample_capture()));
  doc["version"] = 3;
  doc.erase("clock");
  doc.erase("truncations");
  doc["lost"]["unwind_no_cfi_for_module"] = 4;
  doc["modules"][1]["error"] = kProcessExitedError;
  doc["modules"][2]["error"] = "map_files: No such file or directory";
  auto parsed = capture_from_json(doc.dump());
  REQUIRE_MESSAGE(parsed, parsed.error().message);
  CHECK(parsed->clock == ProfileClock::Cpu);
  CHECK(parsed->lost.count("unwind_no_cfi_for_module") == 0);
  CHECK(parsed->truncations == std::map<std::string, uint64_t>{{"unwind_no_cfi_for_module", 4}});
  CHECK(parsed->modules[0].error_kind == ModuleErrorKind::None);
  CHECK(parsed->modules[1].error_kind == ModuleErrorKind::ProcessExited);
  CHECK(parsed->modules[2].error_kind == ModuleErrorKind::Unreadable);
}

TEST_CASE("capture JSON: off-CPU stacks keep their reason, time and short waits") {
  Capture c = sample_capture();
  c.clock = ProfileClock::Wall;
  c.truncations["unwind_depth_limit"] = 1;
  c.modules[0].error_kind = ModuleErrorKind::Unreadable;
  c.modules[0].error = "not an ELF file";
  CaptureStack blocked = c.stacks[0];
  blocked.off_cpu = OffCpuReason::DiskSleep;
  blocked.count = 2;
  blocked.off_cpu_ns = 300000000;
  CaptureStack summed;
  summed.pid = blocked.pid;
  summed.tid = blocked.tid;
  summed.comm = blocked.comm;
  summed.off_cpu = OffCpuReason::Runqueue;
  summed.short_waits = true;
  summed.count = 1000;
  summed.off_cpu_ns = 4000000;
  c.stacks.push_back(blocked);
  c.stacks.push_back(blocked);  // merged: counts and times add up
  c.stacks.push_back(summed);
  c.samples += 2 + 2 + 1000;
  auto back = capture_from_json(capture_to_json(c));
  REQUIRE_MESSAGE(back, back.error().message);
  CHECK(back->clock == ProfileClock::Wall);
  CHECK(back->truncations == c.truncations);
  for (const CaptureModule& m : back->modules)
    CHECK(m.error_kind == (m.path == c.modules[0].path ? ModuleErrorKind::Unreadable : ModuleErrorKind::None));
  CHECK(capture_to_json(*back) == capture_to_json(c));
  uint64_t disk_ns = 0, runqueue_ns = 0, cpu_weight = 0;
  for (const CaptureStack& stack : back->stacks) {
    if (stack.off_cpu == OffCpuReason::DiskSleep) disk_ns += stack.off_cpu_ns;
    if (stack.off_cpu == OffCpuReason::Runqueue) {
      CHECK(stack.short_waits);
      runqueue_ns += stack.off_cpu_ns;
    }
    if (stack.off_cpu == OffCpuReason::None) cpu_weight += stack_weight(*back, stack);
  }
  CHECK(disk_ns == 600000000);
  CHECK(runqueue_ns == 4000000);
  // A CPU sample weighs one period at 999 Hz: 1001001 ns.
  CHECK(cpu_weight == 16 * (1000000000ull / 999));
  CHECK(std::string(weight_unit(*back)) == "ns");
}

TEST_CASE("merge_capture: two windows of the same stacks add up; new stacks and modules join") {
  Capture window;
  merge_capture(window, sample_capture());
  CHECK(capture_to_json(window) == kSampleJson);  // into empty: the capture itself
  Capture second = sample_capture();
  second.duration_ns = 1000;
  second.lost["ringbuf_full"] = 3;
  second.truncations["unwind_loop"] = 2;
  merge_capture(window, second);
  Capture doubled = sample_capture();
  for (CaptureStack& s : doubled.stacks) s.count *= 2;
  doubled.samples *= 2;
  doubled.duration_ns += 1000;
  doubled.lost["ringbuf_full"] += 3;
  doubled.lost["stack_error"] *= 2;
  doubled.truncations["unwind_loop"] = 2;
  CHECK(capture_to_json(window) == capture_to_json(doubled));

  // A stack in a module the window had not seen: the module joins, the
  // frame points at it.
  Capture third;
  third.processes = {{7, "new", {0}}};
  third.modules.push_back({"/bin/new", *BuildId::from_hex("dddd"), 0, {{0x1000, 0x2000, 0, "r-xp"}}, {}, "", ""});
  CaptureStack stack;
  stack.pid = 7;
  stack.comm = "new";
  stack.count = 4;
  CaptureFrame frame;
  frame.module = 0;
  frame.address = 0x1100;
  stack.frames = {frame};
  third.stacks = {stack};
  third.samples = 4;
  merge_capture(window, third);
  CHECK(window.samples == doubled.samples + 4);
  bool found = false;
  for (const CaptureStack& s : window.stacks)
    if (s.pid == 7) {
      found = true;
      REQUIRE(s.frames.size() == 1);
      CHECK(window.modules[static_cast<size_t>(s.frames[0].module)].path == "/bin/new");
    }
  CHECK(found);
  auto back = capture_from_json(capture_to_json(window));
  REQUIRE_MESSAGE(back, back.error().message);
}

namespace {

// The sample capture with every stack's samples timed (microseconds after
// its start): the stack at index i of c.stacks gets times i*1000 + 7*k.
Capture timed_capture() {
  Capture c = sample_capture();
  for (size_t i = 0; i < c.stacks.size(); ++i) {
    CaptureStack& stack = c.stacks[i];
    for (uint64_t k = stack.count; k-- > 0;) stack.times_us.push_back(i * 1000 + 7 * k);  // unsorted
  }
  return c;
}

// The text of the first stack with times, "STACK_TIMES" standing for its
// times array, edited by `times`.
std::string with_first_times(const std::string& times) {
  std::string text = capture_to_json(timed_capture());
  const size_t at = text.find("\"times\":[");
  const size_t end = text.find(']', at);
  return text.substr(0, at) + "\"times\":" + times + text.substr(end + 1);
}

}  // namespace

TEST_CASE("capture JSON: sample times round trip, delta-encoded and sorted; merged stacks merge them") {
  const Capture timed = timed_capture();
  const std::string text = capture_to_json(timed);
  // sample_capture's first canonical stack (pid 10, tid 10: c.stacks[3],
  // one sample at 3000) and the twice-listed one (tid 11: c.stacks[0] and
  // [4], 5 samples each at 0..28 and 4000..4028), written as deltas.
  CHECK(text.find("\"count\":1,\"truncated\":true,\"frames\":[{\"unresolved\":\"anonymous-mapping\","
                  "\"address\":\"0x7ffd0000\"},{\"module\":0,\"address\":\"0x1000\"}],\"times\":[3000]}") !=
        std::string::npos);
  CHECK(text.find("\"times\":[0,7,7,7,7,3972,7,7,7,7]}") != std::string::npos);
  auto back = capture_from_json(text);
  REQUIRE_MESSAGE(back, back.error().message);
  for (const CaptureStack& stack : back->stacks) {
    CHECK(stack.times_us.size() == stack.count);
    CHECK(std::is_sorted(stack.times_us.begin(), stack.times_us.end()));
  }
  CHECK(back->stacks[1].times_us == std::vector<uint64_t>{0, 7, 14, 21, 28, 4000, 4007, 4014, 4021, 4028});
  CHECK(capture_to_json(*back) == text);
  // Without times, the same bytes as ever: old captures and the agent's.
  Capture untimed = timed;
  for (CaptureStack& stack : untimed.stacks) stack.times_us.clear();
  CHECK(capture_to_json(untimed) == kSampleJson);
}

TEST_CASE("capture JSON: sample times are bounded by the count and must match it") {
  // The first timed stack has count 1.
  CHECK(error_of(with_first_times("[3000,1]")) ==
        "stacks[0].times[1]: more sample times than the stack's count (1)");
  CHECK(error_of(with_first_times("[]")) == "stacks[0].times: 0 sample times for a count of 1");
  CHECK(error_of(with_first_times("[3000]")).empty());
  // Deltas cannot go back: a negative one is no unsigned integer.
  std::string text = capture_to_json(timed_capture());
  const size_t at = text.find("[0,7,7,7,7,3972");
  REQUIRE(at != std::string::npos);
  std::string unsorted = text;
  unsorted.replace(at, 15, "[0,7,7,7,7,-3");
  CHECK(error_of(unsorted) == "stacks[1].times[5]: expected an unsigned integer, got a negative one");
  std::string overflow = text;
  overflow.replace(at, 15, "[0,7,7,7,7,18446744073709551615");
  CHECK(error_of(overflow) == "stacks[1].times[5]: sample time overflows 64 bits");
  CHECK(error_of(with_first_times("[\"3000\"]")) == "stacks[0].times[0]: expected an unsigned integer, got a string");
  CHECK(error_of(with_first_times("3000")) == "stacks[0].times: expected an array, got an integer");
  // Times before the count (any field order): checked at the stack's end.
  std::string times_first = text;
  const std::string times = ",\"times\":[0,7,7,7,7,3972,7,7,7,7]";
  times_first.erase(times_first.find(times), times.size());
  const size_t stack = times_first.find("{\"pid\":10,\"tid\":11,");
  REQUIRE(stack != std::string::npos);
  times_first.insert(stack + 1, "\"times\":[0,1,1,1,1,1,1,1,1,1,1],");
  CHECK(error_of(times_first) == "stacks[1].times: 11 sample times for a count of 10");
}

TEST_CASE("canonicalize and merge_capture keep sample times only where every sample has one") {
  Capture c = timed_capture();
  c.stacks[4].times_us.clear();  // the second copy of a stack listed twice: merged, times dropped
  c.stacks[1].times_us.pop_back();  // fewer times than samples: dropped
  canonicalize(c);
  for (const CaptureStack& stack : c.stacks) {
    const bool dropped = stack.tid == 11 || stack.tid == 20;
    CHECK(stack.times_us.empty() == dropped);
  }

  // A later window's times move to the first window's start.
  Capture window;
  merge_capture(window, timed_capture());
  Capture later = timed_capture();
  later.start_time_unix_ns += 2000000000;  // 2 s later
  merge_capture(window, later);
  for (const CaptureStack& stack : window.stacks) {
    REQUIRE(stack.times_us.size() == stack.count);
    CHECK(std::is_sorted(stack.times_us.begin(), stack.times_us.end()));
    CHECK(stack.times_us.back() >= 2000000);
    CHECK(stack.times_us.front() < 2000000);
  }
  // An earlier one: its times before the window's start become 0.
  Capture earlier = timed_capture();
  earlier.start_time_unix_ns -= 1000;  // 1 us earlier
  Capture merged = timed_capture();
  merge_capture(merged, earlier);
  CHECK(merged.stacks[1].times_us.front() == 0);
  CHECK(merged.stacks[1].times_us.size() == 20);
}

namespace {

// The sample capture with Python frames: python_frames out of order, with
// a duplicate (indexes 0 and 3) and an unused entry (2), used by two stacks
// of one thread whose frames differ only in which of the equal entries
// they name, so canonicalize merges the entries and then the stacks.
Capture python_capture() {
  Capture c = sample_capture();
  c.python_frames = {{"fib", "/app/fib.py", 3},
                     {"<module>", "/app/fib.py", 9},
                     {"unused", "/app/other.py", 1},
                     {"fib", "/app/fib.py", 3}};
  auto python = [](int32_t index) {
    CaptureFrame frame;
    frame.python = index;
    return frame;
  };
  const CaptureFrame native{2, 0x401000, UnresolvedReason::None};
  c.stacks.push_back({20, "other", {python(0), python(3), python(1), native}, false, 4, 22});
  c.stacks.push_back({20, "other", {python(3), python(0), python(1), native}, false, 2, 22});
  c.samples += 4 + 2;
  return c;
}

// The text of python_capture: kSampleJson with its Python frames and the
// one stack they merge into.
std::string python_json() {
  std::string text = kSampleJson;
  const std::string empty = "\"python_frames\": [],\n";
  text.replace(text.find(empty), empty.size(),
               "\"python_frames\": [\n"
               "  {\"qualname\":\"<module>\",\"file\":\"/app/fib.py\",\"line\":9},\n"
               "  {\"qualname\":\"fib\",\"file\":\"/app/fib.py\",\"line\":3}\n"
               "],\n");
  const std::string samples = "\"samples\": 16,";
  text.replace(text.find(samples), samples.size(), "\"samples\": 22,");
  const std::string end = "\n]\n}\n";
  text.replace(text.rfind(end), end.size(),
               ",\n  {\"pid\":20,\"tid\":22,\"comm\":\"other\",\"count\":6,\"truncated\":false,\"frames\":["
               "{\"python\":1},{\"python\":1},{\"python\":0},{\"module\":1,\"address\":\"0x401000\"}]}" +
                   end);
  return text;
}

// python_capture's JSON with one edit applied.
template <class Edit>
std::string python_edited(Edit edit) {
  json doc = json::parse(capture_to_json(python_capture()));
  edit(doc);
  return doc.dump();
}

}  // namespace

TEST_CASE("capture JSON: Python frames round trip; equal ones merge, unused ones go") {
  const std::string text = capture_to_json(python_capture());
  CHECK(text == python_json());
  auto back = capture_from_json(text);
  REQUIRE_MESSAGE(back, back.error().message);
  CHECK(back->python_frames == std::vector<PythonFrame>{{"<module>", "/app/fib.py", 9}, {"fib", "/app/fib.py", 3}});
  const CaptureStack& stack = back->stacks.back();
  CHECK(stack.tid == 22);
  CHECK(stack.count == 6);
  REQUIRE(stack.frames.size() == 4);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(stack.frames[i].module == -1);
    CHECK(stack.frames[i].address == 0);
    CHECK(stack.frames[i].reason == UnresolvedReason::None);
    CHECK_FALSE(stack.frames[i].kernel);
    CHECK(stack.frames[i].jit == -1);
  }
  CHECK(stack.frames[0].python == 1);
  CHECK(stack.frames[1].python == 1);
  CHECK(stack.frames[2].python == 0);
  CHECK(stack.frames[3].python == -1);
  CHECK(capture_to_json(*back) == text);
  // Any order of the entries gives the same bytes.
  Capture shuffled = python_capture();
  std::swap(shuffled.python_frames[0], shuffled.python_frames[1]);
  for (CaptureStack& s : shuffled.stacks)
    for (CaptureFrame& f : s.frames)
      if (f.python == 0 || f.python == 1) f.python = 1 - f.python;
  CHECK(capture_to_json(shuffled) == text);
  // Files are whatever bytes the process had: written as nlohmann writes
  // them (invalid UTF-8 as U+FFFD), read back as written.
  Capture odd = python_capture();
  odd.python_frames[1].file = "/app/caf\xc3\xa9 \"q\"\n\xff.py";
  const std::string odd_text = capture_to_json(odd);
  CHECK(odd_text.find("\"file\":\"/app/caf\xc3\xa9 \\\"q\\\"\\n\xef\xbf\xbd.py\"") != std::string::npos);
  auto odd_back = capture_from_json(odd_text);
  REQUIRE_MESSAGE(odd_back, odd_back.error().message);
  CHECK(capture_to_json(*odd_back) == odd_text);
  // Without Python frames, python_frames is written empty and may be left out.
  CHECK(error_of(edited([](json& d) { d.erase("python_frames"); })) == "");
}

TEST_CASE("capture JSON: python_frames may come anywhere; every truncation is an error") {
  const std::string text = python_json();
  json doc = json::parse(text);
  const json frames = doc["python_frames"];
  doc.erase("python_frames");
  std::string after = doc.dump();
  after.insert(after.size() - 1, ",\"python_frames\":" + frames.dump());  // after the stacks
  auto parsed = capture_from_json(after);
  REQUIRE_MESSAGE(parsed, parsed.error().message);
  CHECK(capture_to_json(*parsed) == text);
  // An index out of range is found once python_frames is read, wherever.
  json bad = json::parse(after);
  bad["stacks"][4]["frames"][2]["python"] = 2;
  CHECK(error_of(bad.dump()) == "stacks[4].frames[2].python: Python frame index 2 out of range (2 Python frames)");
  std::string bad_after = bad.dump();
  const std::string section = ",\"python_frames\":" + frames.dump();
  bad_after.erase(bad_after.find(section), section.size());
  bad_after.insert(bad_after.size() - 1, section);
  CHECK(error_of(bad_after) == "stacks[4].frames[2].python: Python frame index 2 out of range (2 Python frames)");
  // Before `samples` is checked against the counts (the end of the document).
  json early = json::parse(text);
  early["stacks"][4]["frames"][0]["python"] = 7;
  early["samples"] = 1;
  CHECK(error_of(early.dump()) == "stacks[4].frames[0].python: Python frame index 7 out of range (2 Python frames)");
  // The reversed document (stacks first, python_frames after them) reads the same.
  const std::string reversed_text = reversed_sample(text);
  REQUIRE(reversed_text.find("\"stacks\"") < reversed_text.find("\"python_frames\""));
  auto reversed = capture_from_json(reversed_text);
  REQUIRE_MESSAGE(reversed, reversed.error().message);
  CHECK(capture_to_json(*reversed) == text);
  for (size_t n = text.find("\"python_frames\""); n + 1 < text.size(); n += 3)
    CHECK_MESSAGE(!capture_from_json(std::string_view(text).substr(0, n)).ok(), "prefix of " << n << " bytes parsed");
}

TEST_CASE("capture JSON: Python frames are checked, one-line errors naming the field") {
  CHECK(error_of(python_json()) == "");
  auto frame_error = [](const json& frame) {
    return error_of(python_edited([&](json& d) { d["stacks"][4]["frames"][1] = frame; }));
  };
  const std::string where = "stacks[4].frames[1].python: ";
  const std::string not_native =
      where + "a Python frame has no \"module\", \"unresolved\", \"kernel\", \"jit\" or \"address\"";
  CHECK(frame_error({{"python", 0}}) == "");
  CHECK(frame_error({{"python", 0}, {"module", 1}}) == not_native);
  CHECK(frame_error({{"python", 0}, {"unresolved", "anonymous-mapping"}}) == not_native);
  CHECK(frame_error({{"python", 0}, {"kernel", true}}) == not_native);
  CHECK(frame_error({{"python", 0}, {"jit", 0}}) == not_native);
  CHECK(frame_error({{"python", 0}, {"address", "0x0"}}) == not_native);
  CHECK(frame_error({{"python", 2}}) == where + "Python frame index 2 out of range (2 Python frames)");
  CHECK(frame_error({{"python", 4294967296ull}}) == where + "value 4294967296 does not fit in 32 bits");
  CHECK(frame_error({{"python", -1}}) == where + "expected an unsigned integer, got a negative one");
  CHECK(frame_error({{"python", "0"}}) == where + "expected an unsigned integer, got a string");
  // Every other frame still needs its address and exactly one kind.
  CHECK(frame_error({{"module", 1}}) == "stacks[4].frames[1].address: missing field");
  CHECK(frame_error(json::object()) == "stacks[4].frames[1].address: missing field");
  CHECK(frame_error({{"address", "0x1"}}) ==
        "stacks[4].frames[1]: a frame needs exactly one of \"module\", \"unresolved\" and \"kernel\"");
  // The entries.
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][0].erase("line"); })) ==
        "python_frames[0].line: missing field");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][1].erase("qualname"); })) ==
        "python_frames[1].qualname: missing field");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][1].erase("file"); })) ==
        "python_frames[1].file: missing field");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][0]["line"] = 4294967296ull; })) ==
        "python_frames[0].line: value 4294967296 does not fit in 32 bits");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][0]["line"] = -3; })) ==
        "python_frames[0].line: expected an unsigned integer, got a negative one");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][0]["qualname"] = 5; })) ==
        "python_frames[0].qualname: expected a string, got an integer");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][0]["file"] = nullptr; })) ==
        "python_frames[0].file: expected a string, got null");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"] = json::object(); })) ==
        "python_frames: expected an array, got an object");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][0] = 1; })) ==
        "python_frames[0]: expected an object, got an integer");
  CHECK(error_of(python_edited([](json& d) { d["python_frames"][1] = d["python_frames"][0]; })) ==
        "python_frames[1]: not after the frame before it (sorted by qualname, file, line; no repeats)");
  CHECK(error_of(python_edited([](json& d) { std::swap(d["python_frames"][0], d["python_frames"][1]); })) ==
        "python_frames[1]: not after the frame before it (sorted by qualname, file, line; no repeats)");
  // Without python_frames, a Python frame's index is out of range.
  CHECK(error_of(python_edited([](json& d) { d.erase("python_frames"); })) ==
        "stacks[4].frames[0].python: Python frame index 1 out of range (0 Python frames)");
  // Strings only count toward the capture's size: a long file is fine.
  CHECK(error_of(python_edited([](json& d) {
          d["python_frames"][1]["file"] = "/" + std::string(100000, 'd') + "/fib.py";
        })) == "");
}

TEST_CASE("merge_capture: Python frames are appended and the frames' indexes follow") {
  Capture window;
  merge_capture(window, python_capture());
  CHECK(capture_to_json(window) == python_json());
  // A window whose Python frames differ: its entries join after the
  // window's, its frames name them.
  Capture later = sample_capture();
  later.stacks.clear();
  later.samples = 3;
  later.python_frames = {{"work", "/app/w.py", 0}, {"fib", "/app/fib.py", 3}};
  CaptureFrame work, fib;
  work.python = 0;
  fib.python = 1;
  later.stacks.push_back({20, "other", {work, fib}, false, 3, 23});
  merge_capture(window, later);
  CHECK(window.python_frames ==
        std::vector<PythonFrame>{{"<module>", "/app/fib.py", 9}, {"fib", "/app/fib.py", 3}, {"work", "/app/w.py", 0}});
  const CaptureStack& stack = window.stacks.back();
  REQUIRE(stack.tid == 23);
  REQUIRE(stack.frames.size() == 2);
  CHECK(window.python_frames[static_cast<size_t>(stack.frames[0].python)].qualname == "work");
  CHECK(window.python_frames[static_cast<size_t>(stack.frames[1].python)].qualname == "fib");
  CHECK(window.samples == 22 + 3);
  auto back = capture_from_json(capture_to_json(window));
  REQUIRE_MESSAGE(back, back.error().message);
  CHECK(capture_to_json(*back) == capture_to_json(window));
}

TEST_CASE("capture JSON: big stacks (Python frames, 13 bytes each) read back whole, streamed or not") {
  // Stacks of kBigStackFrames (4096) frames or more get their frames
  // allocated once, at their number, from the reader's pre-scan.
  Capture c = python_capture();
  CaptureFrame fib;
  fib.python = 0;
  for (uint32_t length : {10000u, 4096u, 4095u}) {
    CaptureStack big{20, "other", std::vector<CaptureFrame>(length, fib), false, 1, 30 + length % 7};
    big.frames.push_back({2, 0x401000, UnresolvedReason::None});
    c.stacks.push_back(big);
    ++c.samples;
  }
  const std::string text = capture_to_json(c);
  auto back = capture_from_json(text);
  REQUIRE_MESSAGE(back, back.error().message);
  CHECK(capture_to_json(*back) == text);
  size_t big_stacks = 0;
  for (const CaptureStack& stack : back->stacks)
    if (stack.frames.size() > 4000) {
      ++big_stacks;
      CHECK(stack.frames.front().python >= 0);
      CHECK(stack.frames.back().module == 1);
    }
  CHECK(big_stacks == 3);
  TempDir dir;
  auto from_file = read_capture_file(dir.write("big.json", text));
  REQUIRE_MESSAGE(from_file, from_file.error().message);
  CHECK(capture_to_json(*from_file) == text);
  // Stacks first (read by a later pass), frames before each stack's pid.
  auto reversed = capture_from_json(reversed_sample(text));
  REQUIRE_MESSAGE(reversed, reversed.error().message);
  CHECK(capture_to_json(*reversed) == text);
  // An error in a big stack names its place.
  json doc = json::parse(text);
  size_t index = 0;
  while (doc["stacks"][index]["frames"].size() != 10001) ++index;
  doc["stacks"][index]["frames"][9999]["python"] = 5;
  CHECK(error_of(doc.dump()) == "stacks[" + std::to_string(index) +
                                    "].frames[9999].python: Python frame index 5 out of range (2 Python frames)");
}
