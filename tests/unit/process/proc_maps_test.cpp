// Tests for userspace/proc_maps: /proc/PID/maps text -> MapEntry.
#include <doctest/doctest.h>

#include "userspace/process/proc_maps.h"

using gsymprof::MapEntry;
using gsymprof::parse_proc_maps;
using gsymprof::parse_proc_maps_line;

namespace {

// A real-looking maps file: PIE executable, a deleted library, a path with
// spaces, anonymous memory and every special mapping.
constexpr const char* kMaps =
    "55d0c2a00000-55d0c2a01000 r--p 00000000 08:01 1310742                    /usr/bin/app\n"
    "55d0c2a01000-55d0c2a02000 r-xp 00001000 08:01 1310742                    /usr/bin/app\n"
    "55d0c3c1e000-55d0c3c3f000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f1e4c000000-7f1e4c021000 rw-p 00000000 00:00 0 \n"
    "7f1e4d1a0000-7f1e4d1a1000 r-xp 00002000 fd:02 42                         /tmp/lib gone.so (deleted)\n"
    "7f1e4d1b0000-7f1e4d1b2000 r-xp 00000000 fd:02 43                         /opt/my dir/libx.so\n"
    "7ffc3a1b2000-7ffc3a1d3000 rw-p 00000000 00:00 0                          [stack]\n"
    "7ffc3a1f6000-7ffc3a1fa000 r--p 00000000 00:00 0                          [vvar]\n"
    "7ffc3a1fa000-7ffc3a1fc000 r-xp 00000000 00:00 0                          [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

}  // namespace

TEST_CASE("proc_maps: a full maps file, field by field") {
  auto parsed = parse_proc_maps(kMaps);
  REQUIRE(parsed.ok());
  const std::vector<MapEntry>& e = *parsed;
  REQUIRE(e.size() == 10);

  CHECK(e[1].start == 0x55d0c2a01000);
  CHECK(e[1].end == 0x55d0c2a02000);
  CHECK(e[1].perms == "r-xp");
  CHECK(e[1].file_offset == 0x1000);
  CHECK(e[1].dev_major == 8);
  CHECK(e[1].dev_minor == 1);
  CHECK(e[1].inode == 1310742);
  CHECK(e[1].path == "/usr/bin/app");
  CHECK(!e[1].deleted);
  CHECK(e[1].executable());
  CHECK(e[1].file_backed());

  CHECK(e[2].path == "[heap]");
  CHECK(!e[2].file_backed());

  // Anonymous: nothing after the inode but the padding.
  CHECK(e[3].path == "");
  CHECK(e[3].inode == 0);
  CHECK(!e[3].file_backed());
  CHECK(!e[3].executable());

  CHECK(e[4].path == "/tmp/lib gone.so");
  CHECK(e[4].deleted);
  CHECK(e[4].dev_major == 0xfd);
  CHECK(e[4].dev_minor == 2);
  CHECK(e[4].file_offset == 0x2000);

  CHECK(e[5].path == "/opt/my dir/libx.so");
  CHECK(!e[5].deleted);

  CHECK(e[6].path == "[stack]");
  CHECK(e[7].path == "[vvar]");
  CHECK(e[8].path == "[vdso]");
  CHECK(e[8].executable());
  CHECK(!e[8].file_backed());
  CHECK(e[9].path == "[vsyscall]");
  CHECK(e[9].start == 0xffffffffff600000);
  CHECK(e[9].perms == "--xp");
}

TEST_CASE("proc_maps: contains is half-open") {
  auto e = parse_proc_maps_line("1000-2000 r-xp 00000000 00:00 0");
  REQUIRE(e.ok());
  CHECK(!e->contains(0xfff));
  CHECK(e->contains(0x1000));
  CHECK(e->contains(0x1fff));
  CHECK(!e->contains(0x2000));
}

TEST_CASE("proc_maps: empty text and a last line without newline") {
  auto empty = parse_proc_maps("");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  auto one = parse_proc_maps("1000-2000 r-xp 00000000 08:01 7 /bin/x");
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].path == "/bin/x");
}

TEST_CASE("proc_maps: '(deleted)' only counts as a suffix of a file path") {
  auto anon = parse_proc_maps_line("1000-2000 rw-s 00000000 00:00 0 (deleted)");
  REQUIRE(anon.ok());
  CHECK(!anon->deleted);
  CHECK(anon->path == "(deleted)");
  auto memfd = parse_proc_maps_line("1000-2000 rw-s 00000000 00:01 1025 /memfd:jit (deleted)");
  REQUIRE(memfd.ok());
  CHECK(memfd->deleted);
  CHECK(memfd->path == "/memfd:jit");
}

TEST_CASE("proc_maps: malformed lines are errors naming the line") {
  const char* bad[] = {
      "",                                             // empty line
      "1000 r-xp 00000000 08:01 7 /bin/x",             // no range dash
      "x000-2000 r-xp 00000000 08:01 7 /bin/x",        // bad hex
      "2000-1000 r-xp 00000000 08:01 7 /bin/x",        // reversed range
      "1000-2000 r-x 00000000 08:01 7 /bin/x",         // short perms
      "1000-2000 rwxq 00000000 08:01 7 /bin/x",        // bad share flag
      "1000-2000 r-xp 0000000g 08:01 7 /bin/x",        // bad offset
      "1000-2000 r-xp 00000000 0801 7 /bin/x",         // bad device
      "1000-2000 r-xp 00000000 08:01 /bin/x",          // no inode
      "1000-2000 r-xp 00000000 08:01 7x /bin/x",       // inode with junk
      "1000-2000 r-xp 00000000 08:01",                 // truncated
      "10000000000000000-10000000000000001 r-xp 0 0:0 0",  // address overflow
      "-1000-2000 r-xp 00000000 08:01 7 /bin/x",       // sign
  };
  for (const char* line : bad) {
    CAPTURE(line);
    CHECK(!parse_proc_maps_line(line).ok());
  }
  auto parsed = parse_proc_maps(
      "1000-2000 r-xp 00000000 08:01 7 /bin/x\n1000-2000 r-xp zz 08:01 7 /bin/x\n");
  REQUIRE(!parsed.ok());
  CHECK(parsed.error().message == "line 2: bad file offset");
  auto blank = parse_proc_maps("1000-2000 r-xp 00000000 08:01 7 /bin/x\n\n");
  REQUIRE(!blank.ok());
  CHECK(blank.error().message == "line 2: bad address range");
}
