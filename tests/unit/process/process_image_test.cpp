// Tests for userspace/process_image and stack_aggregator: snapshot on first
// sight, re-read on an unknown address (dlopen), new image after exec, one
// normalization per unique raw stack.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <array>
#include <map>
#include <random>

#include "tests/unit/test_files.h"
#include "userspace/capture/capture_file.h"
#include "userspace/process/process_image.h"
#include "userspace/assemble/stack_aggregator.h"

using namespace gsymprof;

namespace {

// A fake /proc: maps text per pid, changeable between reads; every module
// has one executable segment with p_offset 0x1000 at p_vaddr 0x1000.
struct FakeProc {
  std::map<uint32_t, std::string> maps;
  int maps_reads = 0, module_loads = 0;

  ProcSource source() {
    ProcSource s;
    s.read_maps = [this](uint32_t pid) -> gsym::Expected<std::string> {
      ++maps_reads;
      auto it = maps.find(pid);
      if (it == maps.end()) return gsym::Error("/proc/" + std::to_string(pid) + "/maps: gone");
      return it->second;
    };
    s.load_module = [this](uint32_t, const MapEntry& m) -> gsym::Expected<ModuleIdentity> {
      ++module_loads;
      if (m.path == "/bad.so") return gsym::Error("not an ELF file");
      ModuleIdentity id;
      id.build_id = BuildId(std::vector<uint8_t>{static_cast<uint8_t>(m.inode)});
      id.segments = {{0x1000, 0x1000, 0x1000, 0x1000, true}};
      return id;
    };
    return s;
  }
};

constexpr const char* kApp = "400000-401000 r-xp 00001000 08:01 5 /app\n";
constexpr const char* kLib = "7f0000000000-7f0000001000 r-xp 00001000 08:01 6 /lib.so\n";

}  // namespace

TEST_CASE("process table: first sight reads maps once; a new address re-reads (dlopen)") {
  FakeProc proc;
  proc.maps[10] = kApp;
  ProcessTable table(proc.source());
  table.min_interval = std::chrono::milliseconds(0);
  uint32_t id = table.current_image(10);
  CHECK(table.current_image(10) == id);
  CHECK(proc.maps_reads == 1);
  CHECK(proc.module_loads == 1);
  uint64_t in_app[] = {0x400010};
  CHECK(table.cover(id, in_app));
  CHECK(proc.maps_reads == 1);

  proc.maps[10] = std::string(kApp) + kLib;  // the process dlopen()ed lib.so
  uint64_t in_lib[] = {0x400010, 0x7f0000000100};
  CHECK(table.cover(id, in_lib));
  CHECK(proc.maps_reads == 2);
  CHECK(proc.module_loads == 2);  // app was known already
  CHECK(table.image(id).maps.size() == 2);

  // dlclose: the library vanishes from maps but stays known for old samples.
  proc.maps[10] = kApp;
  uint64_t nowhere[] = {0x10};
  CHECK(!table.cover(id, nowhere));
  CHECK(table.image(id).find_map(0x7f0000000100) == 1);
}

TEST_CASE("process table: a code address in a data mapping means the mapping is stale") {
  // ld.so maps ld.so.cache read-only, unmaps it, and dlopen() maps a library
  // at the same address; the first read saw the cache.
  FakeProc proc;
  proc.maps[10] = std::string(kApp) + "7f0000000000-7f0000001000 r--p 00000000 08:01 9 /etc/ld.so.cache\n";
  ProcessTable table(proc.source());
  table.min_interval = std::chrono::milliseconds(0);
  uint32_t id = table.current_image(10);
  proc.maps[10] = std::string(kApp) + kLib;
  uint64_t in_lib[] = {0x7f0000000100};
  CHECK(table.cover(id, in_lib));
  CHECK(proc.maps_reads == 2);
  const ProcessImage& image = table.image(id);
  int32_t map = image.find_map(0x7f0000000100);
  REQUIRE(map >= 0);
  CHECK(image.maps[static_cast<size_t>(map)].path == "/lib.so");
}

TEST_CASE("process table: re-reads are rate limited, and refresh_stale catches up") {
  FakeProc proc;
  proc.maps[10] = kApp;
  ProcessTable table(proc.source());
  table.min_interval = std::chrono::hours(1);
  uint32_t id = table.current_image(10);
  proc.maps[10] = std::string(kApp) + kLib;
  uint64_t in_lib[] = {0x7f0000000100};
  CHECK(!table.cover(id, in_lib));
  CHECK(proc.maps_reads == 1);
  table.refresh_stale();
  CHECK(proc.maps_reads == 2);
  CHECK(table.image(id).find_map(0x7f0000000100) >= 0);
}

TEST_CASE("process table: a vanished process is an image with an error") {
  FakeProc proc;
  ProcessTable table(proc.source());
  uint32_t id = table.current_image(99);
  CHECK(table.image(id).maps.empty());
  CHECK(table.image(id).error == "/proc/99/maps: gone");
}

TEST_CASE("stack aggregator: counts raw stacks, normalizes each once, builds a capture") {
  FakeProc proc;
  proc.maps[10] = std::string(kApp) + kLib + "7f1000000000-7f1000001000 r-xp 00000000 08:01 7 /bad.so\n";
  ProcessTable table(proc.source());
  StackAggregator aggregator(table);

  uint64_t a[] = {0x400100, 0x7f0000000200, 0x400050};
  uint64_t b[] = {0x400100, 0x20, 0x7f1000000010};
  for (int i = 0; i < 3; ++i) aggregator.add({10, 10, "app", a, false, {}});
  aggregator.add({10, 11, "app", b, true, {}});
  aggregator.add({10, 12, "worker", a, false, {}});
  CHECK(aggregator.samples() == 5);
  CHECK(aggregator.unique_stacks() == 3);
  // First sight only: the unknown 0x20 came within min_interval of it.
  CHECK(proc.maps_reads == 1);

  Capture capture;
  aggregator.build(capture);
  CHECK(capture.samples == 5);
  REQUIRE(capture.processes.size() == 1);
  CHECK(capture.processes[0].pid == 10);
  // Canonical order: modules sorted by path.
  REQUIRE(capture.modules.size() == 3);
  CHECK(capture.modules[0].path == "/app");
  CHECK(capture.modules[0].load_bias == 0x400000 - 0x1000);
  CHECK(capture.modules[1].path == "/bad.so");
  CHECK(capture.modules[1].error == "not an ELF file");
  CHECK(capture.modules[2].path == "/lib.so");
  CHECK(capture.modules[2].load_bias == 0x7f0000000000 - 0x1000);
  REQUIRE(capture.modules[0].mappings.size() == 1);
  CHECK(capture.modules[0].mappings[0].start == 0x400000);

  REQUIRE(capture.stacks.size() == 3);
  // Stacks sorted by (pid, tid, comm, frames, truncated).
  const CaptureStack& s0 = capture.stacks[0];
  CHECK(s0.tid == 10);
  CHECK(s0.comm == "app");
  CHECK(s0.count == 3);
  CHECK(!s0.truncated);
  REQUIRE(s0.frames.size() == 3);
  CHECK(s0.frames[0] == CaptureFrame{0, 0x1100, UnresolvedReason::None});   // leaf: IP
  CHECK(s0.frames[1] == CaptureFrame{2, 0x11ff, UnresolvedReason::None});   // IP - 1
  CHECK(s0.frames[2] == CaptureFrame{0, 0x104f, UnresolvedReason::None});

  const CaptureStack& s1 = capture.stacks[1];
  CHECK(s1.tid == 11);
  CHECK(s1.comm == "app");
  CHECK(s1.truncated);
  REQUIRE(s1.frames.size() == 3);
  CHECK(s1.frames[1] == CaptureFrame{-1, 0x20, UnresolvedReason::NoMapping});
  // Unreadable module: module index kept, the address round-trips through
  // load_bias to runtime 0x7f100000000f (the return address minus one).
  CHECK(s1.frames[2].module == 1);
  CHECK(s1.frames[2].address + capture.modules[1].load_bias == 0x7f100000000f);

  CHECK(capture.stacks[2].comm == "worker");
  CHECK(capture.stacks[2].count == 1);
}

TEST_CASE("stack aggregator: sample times only when asked, in microseconds after the origin") {
  FakeProc proc;
  proc.maps[10] = std::string(kApp) + kLib;
  ProcessTable table(proc.source());
  uint64_t a[] = {0x400100, 0x400050};
  uint64_t b[] = {0x400100};
  auto sample = [&](std::span<const uint64_t> ips, uint64_t time_ns) {
    RawSample s{10, 10, "app", ips, false, {}};
    s.time_ns = time_ns;
    return s;
  };
  StackAggregator untimed(table);
  untimed.add(sample(a, 5000000));
  Capture capture;
  untimed.build(capture);
  REQUIRE(capture.stacks.size() == 1);
  CHECK(capture.stacks[0].times_us.empty());  // the agent's way: nothing per sample

  StackAggregator timed(table);
  timed.keep_sample_times(1000000);  // the session started at 1 ms
  timed.add(sample(a, 3999999));
  timed.add(sample(b, 2500000));
  timed.add(sample(a, 2000000));
  timed.add(sample(a, 999999));  // before the start: 0
  timed.build(capture);
  REQUIRE(capture.stacks.size() == 2);
  for (const CaptureStack& stack : capture.stacks)
    CHECK(stack.times_us == (stack.frames.size() == 2 ? std::vector<uint64_t>{0, 1000, 2999}
                                                       : std::vector<uint64_t>{1500}));
}

// add() looks a stack up in a small direct-mapped array of recent entries
// before the table: thousands of stacks (more than its slots, so they
// collide), added in a shuffled order and again after clear(), must count
// as a plain map counts them.
TEST_CASE("stack aggregator: counts many interleaved stacks exactly, also after clear") {
  FakeProc proc;
  proc.maps[10] = std::string(kApp) + kLib;
  ProcessTable table(proc.source());
  StackAggregator aggregator(table);
  std::mt19937_64 random(7);
  std::vector<std::array<uint64_t, 3>> stacks;
  for (uint64_t i = 0; i < 3000; ++i) stacks.push_back({0x400100 + i % 97, 0x7f0000000200 + i / 97, 0x400050});
  for (int pass = 0; pass < 2; ++pass) {
    std::map<size_t, uint64_t> expected;
    uint64_t total = 0;
    for (int n = 0; n < 20000; ++n) {
      // Skewed: a few hot stacks, as profiles are.
      const size_t which = random() % 4 == 0 ? random() % stacks.size() : random() % 16;
      aggregator.add({10, 10, "app", stacks[which], false, {}});
      ++expected[which];
      ++total;
    }
    CHECK(aggregator.samples() == total);
    CHECK(aggregator.unique_stacks() == expected.size());
    Capture capture;
    aggregator.build(capture);
    // Each stack's count (stacks are sorted by their frames, the expected
    // ones by index: compare the sorted counts).
    std::vector<uint64_t> counts, expected_counts;
    for (const CaptureStack& stack : capture.stacks) counts.push_back(stack.count);
    for (const auto& [which, count] : expected) expected_counts.push_back(count);
    std::sort(counts.begin(), counts.end());
    std::sort(expected_counts.begin(), expected_counts.end());
    CHECK(counts == expected_counts);
    aggregator.clear(false);
    CHECK(aggregator.unique_stacks() == 0);
  }
}

TEST_CASE("stack aggregator: kernel frames go leafward of the user frames, leaf exact") {
  FakeProc proc;
  proc.maps[10] = std::string(kApp) + kLib;
  ProcessTable table(proc.source());
  StackAggregator aggregator(table);
  uint64_t user[] = {0x400100, 0x400050};
  uint64_t kernel[] = {0xffffffff81000010, 0xffffffff81000500};
  uint64_t other_kernel[] = {0xffffffff81000010};
  aggregator.add({10, 10, "app", user, false, kernel});
  aggregator.add({10, 10, "app", user, false, kernel});
  aggregator.add({10, 10, "app", user, false, other_kernel});
  aggregator.add({10, 10, "app", user, false, {}});
  // A kernel thread: kernel frames only.
  aggregator.add({2, 2, "kworker/0:1", {}, false, kernel});
  CHECK(aggregator.unique_stacks() == 4);

  Capture capture;
  aggregator.build(capture);
  REQUIRE(capture.stacks.size() == 4);
  const CaptureStack& thread = capture.stacks[0];
  CHECK(thread.pid == 2);
  REQUIRE(thread.frames.size() == 2);
  CHECK(thread.frames[0].kernel);
  CHECK(thread.frames[0].address == 0xffffffff81000010);  // the leaf: exact
  CHECK(thread.frames[1].address == 0xffffffff810004ff);  // return address - 1
  const CaptureStack* both = nullptr;
  for (const CaptureStack& s : capture.stacks)
    if (s.pid == 10 && s.frames.size() == 4) both = &s;
  REQUIRE(both);
  CHECK(both->count == 2);
  CHECK(both->frames[0] == CaptureFrame{-1, 0xffffffff81000010, UnresolvedReason::None, true});
  CHECK(both->frames[1] == CaptureFrame{-1, 0xffffffff810004ff, UnresolvedReason::None, true});
  // The user leaf stays exact, as without kernel frames.
  CHECK(both->frames[2] == CaptureFrame{0, 0x1100, UnresolvedReason::None});
  CHECK(both->frames[3] == CaptureFrame{0, 0x104f, UnresolvedReason::None});
}

TEST_CASE("stack aggregator: JIT frames named from the process's perf map, the rest reported") {
  test_files::TempDir root("aggregator_jit");
  for (uint32_t pid : {10u, 20u}) {
    std::filesystem::create_directories(root / (std::to_string(pid) + "/root/tmp"));
    std::ofstream(root / (std::to_string(pid) + "/status")) << "NSpid:\t" << pid << "\n";
  }
  std::ofstream(root / "10/root/tmp/perf-10.map") << "7e0000000000 100 JS:^main /x.js:5\n"
                                                  << "7e0000002000 100 JS:*fib /x.js:1\n";
  FakeProc proc;
  const std::string anon = "7e0000000000-7e0000010000 rwxp 00000000 00:00 0 \n"
                           "7e1000000000-7e1000001000 rw-p 00000000 00:00 0 \n";
  proc.maps[10] = std::string(kApp) + anon;
  proc.maps[20] = std::string(kApp) + anon;
  ProcessTable table(proc.source());
  PerfMaps perf_maps(root.path);
  StackAggregator aggregator(table, &perf_maps);
  // fib called from main, whose return address is main's end (a call as its
  // last instruction: looked up at end - 1).
  uint64_t named[] = {0x7e0000002010, 0x7e0000000100, 0x400050};
  uint64_t uncovered[] = {0x7e0000009000, 0x400050};
  uint64_t data[] = {0x7e1000000010, 0x400050};  // not executable: not JIT code
  for (int i = 0; i < 3; ++i) aggregator.add({10, 10, "node", named, false, {}});
  for (int i = 0; i < 2; ++i) aggregator.add({10, 10, "node", uncovered, false, {}});
  aggregator.add({10, 10, "node", data, false, {}});
  aggregator.add({20, 20, "node", named, false, {}});

  Capture capture;
  JitReport report;
  aggregator.build(capture, &report);
  REQUIRE(capture.jit_symbols.size() == 2);
  CHECK(capture.jit_symbols[0] == JitSymbol{0x7e0000000000, 0x7e0000000100, "JS:^main /x.js:5"});
  CHECK(capture.jit_symbols[1] == JitSymbol{0x7e0000002000, 0x7e0000002100, "JS:*fib /x.js:1"});
  const CaptureStack* jit = nullptr;
  for (const CaptureStack& s : capture.stacks)
    if (s.pid == 10 && s.count == 3) jit = &s;
  REQUIRE(jit);
  REQUIRE(jit->frames.size() == 3);
  CHECK(jit->frames[0] == CaptureFrame{-1, 0x7e0000002010, UnresolvedReason::AnonymousMapping, false, 1});
  CHECK(jit->frames[1] == CaptureFrame{-1, 0x7e0000000100, UnresolvedReason::AnonymousMapping, false, 0});
  CHECK(report.named_samples == 3);
  CHECK(report.unnamed_samples == 3);  // pid 10's uncovered address (2), pid 20 without a map (1)
  CHECK(report.unnamed_by_pid == std::map<uint32_t, uint64_t>{{10, 2}, {20, 1}});
  CHECK(report.has_map == std::map<uint32_t, bool>{{10, true}, {20, false}});
  for (const CaptureStack& s : capture.stacks)
    if (s.pid == 20) CHECK(s.frames[0].jit == -1);
  // The capture (a return address at its symbol's end included) is valid.
  auto back = capture_from_json(capture_to_json(capture));
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(back->jit_symbols == capture.jit_symbols);
}
