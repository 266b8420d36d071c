// Python frames in stacks: each eval call's run of Python frames takes the
// place of its native _PyEval_EvalFrameDefault frame, and only then.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/support/fake_python.h"
#include "userspace/assemble/python_stacks.h"
#include "userspace/assemble/stack_aggregator.h"

using namespace gsymprof;

namespace {

constexpr uint32_t kPid = 10;
constexpr uint32_t kPython311 = 0x030b02f0;  // 3.11.2
// The interpreter's one code segment: file offset 0x1000 at vaddr 0x1000,
// mapped at 0x400000 (load bias 0x3ff000); its eval loop is [0x1100, 0x1200)
// in the file, [0x400100, 0x400200) in the process.
constexpr const char* kMaps = "400000-401000 r-xp 00001000 08:01 5 /usr/bin/python3.11\n";
constexpr uint64_t kBias = 0x3ff000;
constexpr uint64_t kInEval = 0x400150, kReturnIntoEval = 0x400180, kNative = 0x400050, kRoot = 0x400020;

// A no-column entry of one code unit on the first line: every code object
// below is one instruction long, on line `firstlineno`.
const std::vector<uint8_t> kOneLine = {0x80 | (13 << 3), 0x00};

struct Python311 {
  const PythonLayout& layout = *python_layout(kPython311);
  FakeMemory memory;
  FakePython python{layout, memory};
  uint32_t hexversion = kPython311;

  ProcSource source() {
    ProcSource s;
    s.read_maps = [](uint32_t pid) -> gsym::Expected<std::string> {
      if (pid != kPid) return gsym::Error("gone");
      return std::string(kMaps);
    };
    s.load_module = [this](uint32_t, const MapEntry&) -> gsym::Expected<ModuleIdentity> {
      ModuleIdentity id;
      id.build_id = BuildId(std::vector<uint8_t>{5});
      id.segments = {{0x1000, 0x1000, 0x1000, 0x1000, true}};
      id.python = PythonSymbols{0x1800, 0x1100, 0x100, hexversion};
      return id;
    };
    s.read_memory = [this](uint32_t, uint64_t address, std::span<uint8_t> out) -> size_t {
      return memory.read(address, out) ? out.size() : 0;
    };
    return s;
  }
  uint64_t function(const char32_t* qualname, int32_t line) {
    return python.make_function(qualname, U"/srv/app.py", kOneLine, line);
  }
};

struct Stacks {
  Python311& py;
  ProcessTable table{py.source()};
  PythonStacks python{table};
  StackAggregator aggregator{table, nullptr, &python};

  void add(std::span<const uint64_t> ips, std::span<const PythonFrameRef> frames, bool truncated = false) {
    RawSample sample;
    sample.pid = sample.tid = kPid;
    sample.comm = "python3.11";
    sample.ips = ips;
    sample.python.frames = frames;
    sample.python.truncated = truncated;
    aggregator.add(sample);
  }
  // The one stack's frames, leaf first: "P:qualname:line" or "N:address".
  std::vector<std::string> frames(bool* truncated = nullptr) {
    Capture capture;
    aggregator.build(capture);
    REQUIRE(capture.stacks.size() == 1);
    if (truncated) *truncated = capture.stacks[0].truncated;
    std::vector<std::string> out;
    for (const CaptureFrame& f : capture.stacks[0].frames) {
      if (f.python >= 0) {
        const PythonFrame& p = capture.python_frames.at(static_cast<size_t>(f.python));
        out.push_back("P:" + p.qualname + ":" + std::to_string(p.line));
      } else {
        out.push_back("N:" + std::to_string(f.address + capture.modules.at(static_cast<size_t>(f.module)).load_bias));
      }
    }
    return out;
  }
};

std::string native(uint64_t lookup_address) { return "N:" + std::to_string(lookup_address); }

}  // namespace

TEST_CASE("python stacks: each run replaces its eval frame, innermost first; native frames stay") {
  Python311 py;
  const uint64_t leaf = py.function(U"leaf", 30), mid = py.function(U"Worker.mid", 20),
                 outer = py.function(U"<module>", 10);
  Stacks stacks{py};
  std::vector<PythonWalk> found;
  stacks.python.on_found = [&](uint32_t pid, const PythonWalk& walk) {
    CHECK(pid == kPid);
    found.push_back(walk);
  };
  const uint64_t ips[] = {kInEval, kNative, kReturnIntoEval, kRoot};
  // Two eval calls: leaf and mid ran in the inner one (mid entered it),
  // <module> in the outer one.
  const PythonFrameRef frames[] = {{leaf, 0, false}, {mid, 0, true}, {outer, 0, true}};
  stacks.add(ips, frames);
  CHECK(stacks.frames() == std::vector<std::string>{"P:leaf:30", "P:Worker.mid:20", native(kNative - 1),
                                                    "P:<module>:10", native(kRoot - 1)});
  REQUIRE(found.size() == 1);  // the first sample of the image found its runtime
  CHECK(found[0].runtime == 0x1800 + kBias);
  CHECK(found[0].frame_is_entry == py.layout.frame_is_entry);
  CHECK(stacks.python.report().samples_merged == 1);
  CHECK(stacks.python.found(kPid));
}

TEST_CASE("python stacks: runs that do not pair with the eval frames keep the stack native") {
  Python311 py;
  const uint64_t a = py.function(U"a", 1), b = py.function(U"b", 2), c = py.function(U"c", 3);
  Stacks stacks{py};
  const uint64_t ips[] = {kInEval, kNative, kReturnIntoEval, kRoot};
  const PythonFrameRef three_runs[] = {{a, 0, true}, {b, 0, true}, {c, 0, true}};
  stacks.add(ips, three_runs);
  CHECK(stacks.frames() == std::vector<std::string>{native(kInEval), native(kNative - 1),
                                                    native(kReturnIntoEval - 1), native(kRoot - 1)});
  CHECK(stacks.python.report().samples_unpaired == 1);
  CHECK(stacks.python.report().samples_merged == 0);
}

TEST_CASE("python stacks: a code object that cannot be read keeps the stack native") {
  Python311 py;
  const uint64_t a = py.function(U"a", 1);
  Stacks stacks{py};
  const uint64_t ips[] = {kInEval, kNative, kReturnIntoEval, kRoot};
  const PythonFrameRef frames[] = {{a, 0, true}, {0xdead000, 0, true}};
  stacks.add(ips, frames);
  CHECK(stacks.frames()[0] == native(kInEval));
  CHECK(stacks.python.report().samples_unnamed == 1);
}

TEST_CASE("python stacks: a Python stack cut by the sampler ends there, truncated") {
  Python311 py;
  const uint64_t r = py.function(U"recurse", 7);
  Stacks stacks{py};
  const uint64_t ips[] = {kInEval, kNative, kReturnIntoEval, kRoot};
  // The sampler kept two frames of a deeper run: no entry frame seen.
  const PythonFrameRef frames[] = {{r, 0, false}, {r, 0, false}};
  stacks.add(ips, frames, /*truncated=*/true);
  bool truncated = false;
  CHECK(stacks.frames(&truncated) == std::vector<std::string>{"P:recurse:7", "P:recurse:7"});
  CHECK(truncated);
  CHECK(stacks.python.report().samples_cut == 1);
}

TEST_CASE("python stacks: a version without a layout is counted, never walked") {
  Python311 py;
  py.hexversion = 0x030e00f0;  // 3.14: no table, no debug offsets read
  Stacks stacks{py};
  bool called = false;
  stacks.python.on_found = [&](uint32_t, const PythonWalk&) { called = true; };
  const uint64_t ips[] = {kInEval, kRoot};
  stacks.add(ips, {});
  CHECK(!called);
  CHECK(!stacks.python.found(kPid));
  CHECK(stacks.python.report().unsupported_versions == std::map<std::string, uint64_t>{{"3.14", 1}});
}

TEST_CASE("python stacks: a recording's IPs with the tag bits are addresses, not Python frames") {
  Python311 py;
  Stacks stacks{py};
  const uint64_t ips[] = {0xC000000000000001ull, kRoot};
  stacks.add(ips, {});
  Capture capture;
  stacks.aggregator.build(capture);
  REQUIRE(capture.stacks.size() == 1);
  for (const CaptureFrame& f : capture.stacks[0].frames) CHECK(f.python < 0);
  CHECK(capture.python_frames.empty());
}
