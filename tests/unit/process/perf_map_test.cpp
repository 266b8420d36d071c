// userspace/process/perf_map: the perf-map parser, and reading a process's
// map inside its root (a fake /proc here) without ever leaving that root.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/jit_symbols_text.h"
#include "tests/unit/test_files.h"
#include "userspace/process/perf_map.h"

using namespace gsymprof;

namespace {

void write_text(const std::string& path, const std::string& text, bool append = false) {
  std::ofstream(path, append ? std::ios::app : std::ios::trunc) << text;
}

// A fake /proc with process `pid` (its own pid `ns_pid`) whose root holds /tmp.
struct FakeProc : test_files::TempDir {
  FakeProc() : test_files::TempDir("perf_map_test") {}
  std::string add(uint32_t pid, uint32_t ns_pid) {
    const std::string dir = path + "/" + std::to_string(pid);
    std::filesystem::create_directories(dir + "/root/tmp");
    write_text(dir + "/status", "Name:\tnode\nNSpid:\t" + std::to_string(pid) + "\t" + std::to_string(ns_pid) + "\n");
    return dir + "/root/tmp/perf-" + std::to_string(ns_pid) + ".map";
  }
};

}  // namespace

TEST_CASE("perf map: lines, names with blanks, bad lines skipped and counted") {
  ParsedPerfMap map = parse_perf_map(
      "7f0000001000 40 JS:*fib /tmp/x.js:1:13\n"
      "0x7f0000002000 0x10 LazyCompile:~main node:internal/main:5\r\n"
      "\n"
      "7f0000003000 8 \tstub\twith tabs\n"
      "zz 10 bad-start\n"
      "7f0000004000 0 empty-range\n"
      "7f0000005000 10\n"
      "7f0000006000 10    \n"
      "ffffffffffffffff 10 overflows\n"
      "7f0000007000 -10 negative\n"
      "10000000000000000 1 too-big\n"
      "7f0000008000 4 last-line-without-newline");
  CHECK(describe(map.symbols) ==
        "7f0000001000-7f0000001040 JS:*fib /tmp/x.js:1:13\n"
        "7f0000002000-7f0000002010 LazyCompile:~main node:internal/main:5\n"
        "7f0000003000-7f0000003008 stub\twith tabs\n"
        "7f0000008000-7f0000008004 last-line-without-newline\n");
  CHECK(map.bad_lines == 7);
  CHECK(parse_perf_map("").symbols.empty());
  CHECK(parse_perf_map(std::string("1000 10 a\0b\n", 12)).symbols.at(0).name == std::string("a\0b", 3));
}

TEST_CASE("perf map: where lines overlap, the later line wins") {
  CHECK(describe(parse_perf_map("1000 100 old\n1040 20 new\n").symbols) ==
        "1000-1040 old\n1040-1060 new\n1060-1100 old\n");
  CHECK(describe(parse_perf_map("1000 10 old\n1000 10 new\n").symbols) == "1000-1010 new\n");
  CHECK(describe(parse_perf_map("1000 10 a\n1020 10 b\n1040 10 c\nf00 200 all\n").symbols) == "f00-1100 all\n");
  CHECK(describe(parse_perf_map("1000 20 a\n1020 20 b\n1010 20 c\n").symbols) ==
        "1000-1010 a\n1010-1030 c\n1030-1040 b\n");
}

TEST_CASE("perf map: long names are cut, lookups respect [start, end)") {
  ParsedPerfMap map = parse_perf_map("1000 10 " + std::string(10000, 'n') + "\n2000 10 b\n");
  REQUIRE(map.symbols.size() == 2);
  CHECK(map.symbols[0].name.size() == kMaxPerfMapNameBytes);
  CHECK(find_jit_symbol(map.symbols, 0xfff) == nullptr);
  CHECK(find_jit_symbol(map.symbols, 0x1000) == &map.symbols[0]);
  CHECK(find_jit_symbol(map.symbols, 0x100f) == &map.symbols[0]);
  CHECK(find_jit_symbol(map.symbols, 0x1010) == nullptr);
  CHECK(find_jit_symbol(map.symbols, 0x2005) == &map.symbols[1]);
  CHECK(find_jit_symbol({}, 0x2005) == nullptr);
}

TEST_CASE("perf maps of processes: inside their root, by their own pid, read again as they grow") {
  FakeProc proc;
  const std::string map_path = proc.add(123, 7);  // a container: pid 7 inside
  write_text(map_path, "1000 100 fib\n");
  PerfMaps maps(proc.path);
  const JitSymbol* fib = maps.find(123, 0x1050);
  REQUIRE(fib != nullptr);
  CHECK(fib->name == "fib");
  CHECK(maps.has_map(123));
  CHECK(maps.reads() == 1);
  // The runtime compiles more: within the retry interval the file is not
  // looked at again; the final look reads it.
  write_text(map_path, "3000 10 late\n", /*append=*/true);
  CHECK(maps.find(123, 0x3004) == nullptr);
  const JitSymbol* late = maps.find(123, 0x3004, /*final=*/true);
  REQUIRE(late != nullptr);
  CHECK(late->name == "late");
  CHECK(maps.reads() == 2);
  // One final look per process, however many addresses miss.
  CHECK(maps.find(123, 0x9000, true) == nullptr);
  CHECK(maps.find(123, 0x9100, true) == nullptr);
  CHECK(maps.reads() == 2);
  CHECK_FALSE(maps.has_map(999));
}

TEST_CASE("perf maps of processes: still read after the process is gone") {
  FakeProc proc;
  const std::string map_path = proc.add(200, 200);
  write_text(map_path, "1000 100 early\n");
  PerfMaps maps(proc.path);
  CHECK(maps.find(200, 0x1000) != nullptr);
  // The process exits: its /proc entry goes, the map stays in its /tmp.
  write_text(map_path, "2000 100 written-before-exit\n", /*append=*/true);
  std::filesystem::rename(proc.path + "/200", proc.path + "/gone");
  const JitSymbol* symbol = maps.find(200, 0x2000, /*final=*/true);
  REQUIRE(symbol != nullptr);
  CHECK(symbol->name == "written-before-exit");
}

TEST_CASE("perf maps of processes: never outside the root, never a FIFO, never another user's file") {
  FakeProc proc;
  // Symlinks to the host's files resolve inside the process's root.
  std::filesystem::create_symlink("/etc/passwd", proc.add(301, 301));
  std::filesystem::create_symlink("../../../../../../../../etc/passwd", proc.add(302, 302));
  // A FIFO would block a reader that opened it plainly.
  REQUIRE(::mkfifo(proc.add(303, 303).c_str(), 0600) == 0);
  // Someone else's file in a /tmp the process shares.
  const std::string planted = proc.add(304, 304);
  write_text(planted, "1000 100 planted\n");
  const bool can_chown = ::chown(planted.c_str(), 12345, 12345) == 0;
  // A directory.
  std::filesystem::create_directories(proc.add(305, 305));
  PerfMaps maps(proc.path);
  for (uint32_t pid : {301u, 302u, 303u, 305u}) {
    CHECK(maps.find(pid, 0x1000, true) == nullptr);
    CHECK_FALSE(maps.has_map(pid));
  }
  if (can_chown) {
    CHECK(maps.find(304, 0x1000, true) == nullptr);
    CHECK_FALSE(maps.has_map(304));
  }
  // A process with no map at all.
  proc.add(306, 306);
  CHECK(maps.find(306, 0x1000, true) == nullptr);
  CHECK(maps.reads() == 0);
}

TEST_CASE("perf maps of processes: exec forgets the old image's map") {
  FakeProc proc;
  const std::string map_path = proc.add(400, 400);
  write_text(map_path, "1000 100 before-exec\n");
  PerfMaps maps(proc.path);
  REQUIRE(maps.find(400, 0x1000) != nullptr);
  // The new image's runtime rewrites the map at the same path.
  write_text(map_path, "1000 100 after-exec\n");
  maps.note_exec(400);
  CHECK_FALSE(maps.has_map(400));
  const JitSymbol* symbol = maps.find(400, 0x1000);
  REQUIRE(symbol != nullptr);
  CHECK(symbol->name == "after-exec");
}
