// userspace/process/jitdump: the jitdump parser on hand-built dumps (every
// record kind, byte-swapped, truncated at every byte, bad sizes), the code
// map's symbols with lines, and PerfMaps reading a process's dump inside its
// root (a fake /proc) as it grows.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/jit_symbols_text.h"
#include "tests/unit/test_files.h"
#include "userspace/process/jitdump.h"
#include "userspace/process/perf_map.h"

using namespace gsymprof;

namespace {

// Writes jitdump records, in either byte order.
struct DumpBuilder {
  bool swapped = false;
  std::vector<uint8_t> bytes;

  template <typename T>
  static void put(std::vector<uint8_t>& out, T value, bool swap) {
    if (swap) {
      if constexpr (sizeof(T) == 4) value = static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(value)));
      if constexpr (sizeof(T) == 8) value = static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(value)));
    }
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    out.insert(out.end(), raw, raw + sizeof(T));
  }
  void u32(std::vector<uint8_t>& out, uint32_t v) const { put(out, v, swapped); }
  void u64(std::vector<uint8_t>& out, uint64_t v) const { put(out, v, swapped); }
  static void text(std::vector<uint8_t>& out, const std::string& s) {
    out.insert(out.end(), s.begin(), s.end());
    out.push_back(0);
  }

  explicit DumpBuilder(bool swap = false, uint32_t version = 1) : swapped(swap) {
    u32(bytes, 0x4A695444);
    u32(bytes, version);
    u32(bytes, 40);
    u32(bytes, 62);  // EM_X86_64
    u32(bytes, 0);
    u32(bytes, 4242);
    u64(bytes, 1);
    u64(bytes, 0);
  }
  void record(uint32_t id, const std::vector<uint8_t>& body, uint32_t claimed_size = 0) {
    u32(bytes, id);
    u32(bytes, claimed_size ? claimed_size : static_cast<uint32_t>(16 + body.size()));
    u64(bytes, 7);
    bytes.insert(bytes.end(), body.begin(), body.end());
  }
  void load(uint64_t addr, uint64_t size, const std::string& name, uint64_t index = 1) {
    std::vector<uint8_t> body;
    u32(body, 4242);
    u32(body, 4243);
    u64(body, addr);
    u64(body, addr);
    u64(body, size);
    u64(body, index);
    text(body, name);
    body.insert(body.end(), static_cast<size_t>(size), 0xcc);  // the code
    record(0, body);
  }
  void move(uint64_t from, uint64_t to, uint64_t size) {
    std::vector<uint8_t> body;
    u32(body, 4242);
    u32(body, 4243);
    u64(body, to);
    u64(body, from);
    u64(body, to);
    u64(body, size);
    u64(body, 1);
    record(1, body);
  }
  struct Row {
    uint64_t address;
    uint32_t line, column;
    std::string file;
  };
  std::vector<uint8_t> debug_body(uint64_t addr, const std::vector<Row>& rows) const {
    std::vector<uint8_t> body;
    u64(body, addr);
    u64(body, rows.size());
    for (const Row& row : rows) {
      u64(body, row.address);
      u32(body, row.line);
      u32(body, row.column);
      text(body, row.file);
    }
    return body;
  }
  void debug(uint64_t addr, const std::vector<Row>& rows) { record(2, debug_body(addr, rows)); }
  void unwinding(const std::vector<uint8_t>& eh_frame, uint64_t hdr_size) {
    std::vector<uint8_t> body;
    u64(body, eh_frame.size());
    u64(body, hdr_size);
    u64(body, (eh_frame.size() + 7) & ~7ull);
    body.insert(body.end(), eh_frame.begin(), eh_frame.end());
    record(4, body);
  }
};

ParsedJitdump parse(const std::vector<uint8_t>& bytes) { return parse_jitdump(bytes); }

// Every record kind, V8's way of writing debug rows (0x40 past the code).
DumpBuilder every_kind(bool swapped) {
  DumpBuilder dump(swapped);
  dump.unwinding({1, 2, 3, 4, 5, 6, 7, 8}, 4);
  dump.debug(0x1000, {{0x1040, 1, 19, "/app/fib.js"}, {0x1050, 2, 3, "/app/fib.js"}, {0x1060, 2, 9, "/app/fib.js"}});
  dump.load(0x1000, 0x40, "JS:*fib /app/fib.js:1:13");
  dump.record(77, {1, 2, 3});  // an id from a later spec: skipped
  dump.load(0x2000, 0x10, "Builtin:Add");
  dump.move(0x2000, 0x3000, 0x10);
  dump.record(3, {});  // close
  dump.load(0x4000, 0x10, "after-close");
  return dump;
}

}  // namespace

TEST_CASE("jitdump: every record kind, in either byte order") {
  for (bool swapped : {false, true}) {
    CAPTURE(swapped);
    const ParsedJitdump parsed = parse(every_kind(swapped).bytes);
    CHECK(parsed.error == "");
    CHECK(parsed.closed);
    CHECK(parsed.bad_records == 0);
    REQUIRE(parsed.events.size() == 3);  // nothing after the close
    const JitCode& fib = parsed.events[0].code;
    CHECK(fib.start == 0x1000);
    CHECK(fib.end == 0x1040);
    CHECK(fib.name == "JS:*fib /app/fib.js:1:13");
    CHECK(fib.unwind == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
    CHECK(fib.eh_frame_hdr_size == 4);
    // V8's rows are 0x40 past the code.
    REQUIRE(fib.lines.size() == 3);
    CHECK(fib.lines[0] == JitLine{0x1000, 1, 19, "/app/fib.js"});
    CHECK(fib.lines[2] == JitLine{0x1020, 2, 9, "/app/fib.js"});
    // Debug and unwinding info go with the next load only.
    CHECK(parsed.events[1].code.lines.empty());
    CHECK(parsed.events[1].code.unwind.empty());
    CHECK(parsed.events[2].move);
    CHECK(parsed.events[2].moved_from == 0x2000);

    JitCodeMap map;
    std::vector<JitdumpEvent> events = parsed.events;
    map.apply(std::move(events));
    CHECK(describe(map.symbols()) ==
          "1000-1010 JS:*fib /app/fib.js:1:13 (fib.js:1)\n"
          "1010-1040 JS:*fib /app/fib.js:1:13 (fib.js:2)\n"  // two rows of line 2: one symbol
          "3000-3010 Builtin:Add\n");                          // moved: gone from 0x2000
    REQUIRE(map.find(0x1030) != nullptr);
    CHECK(map.find(0x1030)->unwind.size() == 8);
    CHECK(map.find(0x2000) == nullptr);
  }
}

TEST_CASE("jitdump: a bad header is refused with a reason") {
  CHECK(parse({}).error == "");  // nothing written yet
  CHECK(parse({'J', 'i'}).error == "truncated header (2 bytes)");
  CHECK(parse({'J', 'i', 'T', 'X'}).error == "not a jitdump file (bad magic)");
  std::vector<uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  CHECK(parse(elf).error == "not a jitdump file (bad magic)");
  CHECK(parse(DumpBuilder(false, 2).bytes).error == "jitdump version 2 (only version 1 is known)");
  DumpBuilder huge_header;
  huge_header.bytes[8] = 0xff;
  huge_header.bytes[9] = 0xff;
  CHECK(parse(huge_header.bytes).error == "bad jitdump header size 65535");
  const std::vector<uint8_t> header = DumpBuilder().bytes;
  CHECK(parse(std::vector<uint8_t>(header.begin(), header.begin() + 39)).error == "truncated header (39 bytes)");
}

TEST_CASE("jitdump: truncated at every byte: a prefix of the records, never more") {
  const std::vector<uint8_t> whole = every_kind(false).bytes;
  const ParsedJitdump full = parse(whole);
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    CAPTURE(cut);
    const ParsedJitdump part = parse(std::vector<uint8_t>(whole.begin(), whole.begin() + static_cast<ptrdiff_t>(cut)));
    REQUIRE(part.events.size() <= full.events.size());
    for (size_t i = 0; i < part.events.size(); ++i) {
      CHECK(part.events[i].code.start == full.events[i].code.start);
      CHECK(part.events[i].code.lines == full.events[i].code.lines);
    }
    CHECK((part.error.empty() || part.error.starts_with("truncated")));
  }
}

TEST_CASE("jitdump: incremental parsing gives what one parse gives") {
  const std::vector<uint8_t> whole = every_kind(true).bytes;
  JitdumpParser parser;
  std::vector<JitdumpEvent> events;
  // Bytes arrive a few at a time, as a runtime writes them.
  std::vector<uint8_t> buffer;
  for (size_t at = 0; at < whole.size(); at += 5) {
    buffer.insert(buffer.end(), whole.begin() + static_cast<ptrdiff_t>(at),
                  whole.begin() + static_cast<ptrdiff_t>(std::min(at + 5, whole.size())));
    const size_t used = parser.parse(buffer, events);
    buffer.erase(buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(used));
  }
  CHECK(parser.byte_swapped());
  CHECK(parser.pid() == 4242);
  CHECK(parser.closed());
  CHECK(parser.unknown_records() == 1);
  CHECK(events.size() == parse(whole).events.size());
}

TEST_CASE("jitdump: bad sizes: records skipped, or the file stopped where framing is lost") {
  SUBCASE("a record smaller than its header stops the file") {
    DumpBuilder dump;
    dump.load(0x1000, 0x10, "kept");
    dump.record(0, {}, 8);
    dump.load(0x2000, 0x10, "never");
    const ParsedJitdump parsed = parse(dump.bytes);
    CHECK(parsed.events.size() == 1);
    CHECK(parsed.error == "bad record size 8 at offset 117");
  }
  SUBCASE("a record over the bound stops the file") {
    DumpBuilder dump;
    dump.record(0, {}, kMaxJitdumpRecordBytes + 1);
    CHECK(parse(dump.bytes).error.starts_with("bad record size 16777217 at offset 40"));
  }
  SUBCASE("a record claiming more than the file is a truncation") {
    DumpBuilder dump;
    dump.load(0x1000, 0x10, "kept");
    dump.record(0, {1, 2, 3}, 1000);
    const ParsedJitdump parsed = parse(dump.bytes);
    CHECK(parsed.events.size() == 1);
    CHECK(parsed.error == "truncated record at offset 117 (19 bytes left)");
  }
  SUBCASE("inconsistent records inside their size are skipped and counted") {
    DumpBuilder dump;
    std::vector<uint8_t> body;
    dump.u32(body, 1);
    dump.u32(body, 1);
    dump.u64(body, 0x1000);
    dump.u64(body, 0x1000);
    dump.u64(body, 0x100000);  // code far larger than the record
    dump.u64(body, 1);
    DumpBuilder::text(body, "too-big");
    dump.record(0, body);
    std::vector<uint8_t> unterminated(40, 0);
    unterminated.insert(unterminated.end(), {'a', 'b'});
    dump.record(0, unterminated);               // name without its NUL
    dump.load(UINT64_MAX - 4, 0x10, "wraps");   // past the address space
    dump.record(1, {1, 2, 3});                  // a short move
    dump.record(4, {1, 2, 3});                  // short unwinding info
    std::vector<uint8_t> unwind;
    dump.u64(unwind, 1000);  // more data than the record has
    dump.u64(unwind, 0);
    dump.u64(unwind, 0);
    dump.record(4, unwind);
    dump.record(2, {1});                        // short debug info
    dump.load(0x5000, 0x10, "fine");
    const ParsedJitdump parsed = parse(dump.bytes);
    CHECK(parsed.error == "");
    CHECK(parsed.bad_records == 7);
    REQUIRE(parsed.events.size() == 1);
    CHECK(parsed.events[0].code.name == "fine");
    CHECK(parsed.events[0].code.unwind.empty());
  }
}

TEST_CASE("jitdump: debug rows: plain addresses, V8's bias, node 20's bad names, rows off the code") {
  DumpBuilder writer;
  auto lines = [&](const std::vector<DumpBuilder::Row>& rows, uint64_t start = 0x1000, uint64_t end = 0x1100) {
    return parse_jitdump_debug_info(writer.debug_body(start, rows), false, start, end);
  };
  // The JVMTI agent's way: the rows' own addresses (one below start + 0x40).
  std::vector<JitLine> plain = lines({{0x1010, 5, 0, "A.java"}, {0x1080, 6, 0, "A.java"}});
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].address == 0x1010);
  // V8's: all at or past start + 0x40, the last one past the code's end.
  std::vector<JitLine> v8 = lines({{0x1040, 1, 1, "x.js"}, {0x1130, 2, 1, "x.js"}});
  REQUIRE(v8.size() == 2);
  CHECK(v8[1].address == 0x10f0);
  // Rows off the code (either way): no rows at all.
  CHECK(lines({{0x1040, 1, 1, "x.js"}, {0x5000, 2, 1, "x.js"}}).empty());
  CHECK(lines({{0x0fff, 1, 1, "x.js"}}).empty());
  // A row without a line is dropped; the rest stay.
  CHECK(lines({{0x1000, 0, 1, "x.js"}, {0x1010, 3, 1, "x.js"}}).size() == 1);
  // node 20: a script name written with its length but other bytes, NULs
  // among them: read at the record's fixed stride, the lines kept, the name not.
  auto node20_rows = [&](const std::string& name, uint32_t first_line) {
    std::vector<uint8_t> body;
    writer.u64(body, 0x1000);
    writer.u64(body, 2);
    for (auto [address, line] : {std::pair<uint64_t, uint32_t>{0x1040, first_line}, {0x1050, 4}}) {
      writer.u64(body, address);
      writer.u32(body, line);
      writer.u32(body, static_cast<uint32_t>(name.size()));
      body.insert(body.end(), name.begin(), name.end());
      body.push_back(0);
    }
    return parse_jitdump_debug_info(body, false, 0x1000, 0x1100);
  };
  std::vector<JitLine> recovered = node20_rows(std::string("\x9f" "E\x02\0\0\0\0\0K\x9d\xaf=vQ\xc9\xba.js", 19), 1);
  REQUIRE(recovered.size() == 2);
  CHECK(recovered[1] == JitLine{0x1010, 4, 19, ""});
  CHECK(jit_line_name("JS:*fib", &recovered[1]) == "JS:*fib (line 4)");
  // The freed memory may start with printable bytes: still not a name.
  recovered = node20_rows(std::string("e\0\x02\0\0\0\0\0K\x9d\xaf=vQ\xc9\xba.js", 19), 3);
  REQUIRE(recovered.size() == 2);
  CHECK(recovered[0] == JitLine{0x1000, 3, 19, ""});
  CHECK(jit_line_name("JS:*fib", &recovered[0]) == "JS:*fib (line 3)");
  // Every row count a record could claim: none beyond what its bytes hold.
  for (uint64_t claimed : {uint64_t{0}, uint64_t{3}, uint64_t{1} << 40, UINT64_MAX}) {
    std::vector<uint8_t> lying = writer.debug_body(0x1000, {{0x1040, 1, 1, "x.js"}});
    std::vector<uint8_t> count;
    writer.u64(count, claimed);
    std::copy(count.begin(), count.end(), lying.begin() + 8);
    CHECK(parse_jitdump_debug_info(lying, false, 0x1000, 0x1100).empty());
  }
}

TEST_CASE("jitdump code map: later loads win, symbols per line row") {
  DumpBuilder dump;
  dump.debug(0x1000, {{0x1000, 10, 0, "a/b/m.py"}, {0x1008, 11, 0, "a/b/m.py"}});
  dump.load(0x1000, 0x20, "old");
  dump.load(0x1010, 0x20, "new");  // over old's tail
  dump.move(0x9000, 0xa000, 0x10);  // of code never loaded: ignored
  JitCodeMap map;
  map.apply(parse(dump.bytes).events);
  CHECK(describe(map.symbols()) ==
        "1000-1008 old (m.py:10)\n"
        "1008-1010 old (m.py:11)\n"
        "1010-1030 new\n");
}

TEST_CASE("jitdump code map: moved code keeps its lines, shifted, without copies") {
  DumpBuilder dump;
  dump.debug(0x1000, {{0x1004, 7, 0, "w.js"}});
  dump.load(0x1000, 0x10, "moving");
  dump.move(0x1000, 0x5000, 0x10);
  dump.move(0x5000, 0x9000, 0x10);
  dump.move(0x9000, 0xa000, 0x8);  // the wrong size: not this code
  JitCodeMap map;
  map.apply(parse(dump.bytes).events);
  CHECK(describe(map.symbols()) ==
        "9000-9004 moving\n"
        "9004-9010 moving (w.js:7)\n");
  uint64_t moved_by = 0;
  const JitCode* code = map.find(0x9008, &moved_by);
  REQUIRE(code != nullptr);
  CHECK(code->start + moved_by == 0x9000);
  CHECK(map.find(0x1000) == nullptr);
  CHECK(map.find(0x5000) == nullptr);
}

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, size_t from = 0) {
  std::ofstream out(path, from ? std::ios::binary | std::ios::app : std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data() + from), static_cast<std::streamsize>(bytes.size() - from));
}

struct FakeProc : test_files::TempDir {
  FakeProc() : test_files::TempDir("jitdump_test") {}
  // Process `pid` (own pid `ns_pid`): its root's /tmp.
  std::string add(uint32_t pid, uint32_t ns_pid) {
    const std::string dir = path + "/" + std::to_string(pid);
    std::filesystem::create_directories(dir + "/root/tmp");
    std::ofstream(dir + "/status") << "Name:\tnode\nNSpid:\t" << pid << "\t" << ns_pid << "\n";
    return dir + "/root/tmp";
  }
};

}  // namespace

TEST_CASE("jitdumps of processes: read inside the root as they grow, preferred to the perf map") {
  FakeProc proc;
  const std::string tmp = proc.add(123, 7);
  std::ofstream(tmp + "/perf-7.map") << "1000 100 from-perf-map\n5000 10 only-in-perf-map\n";
  DumpBuilder dump;
  dump.debug(0x1000, {{0x1040, 3, 1, "/app/fib.js"}});
  dump.load(0x1000, 0x100, "JS:*fib");
  const size_t first = dump.bytes.size();
  dump.load(0x3000, 0x10, "later");
  // The second load is half written when first read.
  write_bytes(tmp + "/jit-7.dump", std::vector<uint8_t>(dump.bytes.begin(), dump.bytes.begin() + static_cast<ptrdiff_t>(first + 20)));
  PerfMaps maps(proc.path);
  const JitSymbol* fib = maps.find(123, 0x1050);
  REQUIRE(fib != nullptr);
  CHECK(fib->name == "JS:*fib (fib.js:3)");
  CHECK(maps.find(123, 0x5000)->name == "only-in-perf-map");
  CHECK(maps.find(123, 0x3000) == nullptr);
  write_bytes(tmp + "/jit-7.dump", dump.bytes, first + 20);
  const JitSymbol* later = maps.find(123, 0x3000, /*final=*/true);
  REQUIRE(later != nullptr);
  CHECK(later->name == "later");
  CHECK(maps.has_map(123));
  CHECK(maps.jitdump_error(123) == "");
}

TEST_CASE("jitdumps of processes: the mapped path, a reason for a bad file, never another user's or a link out") {
  FakeProc proc;
  // The dump where the runtime mapped it (node: its working directory).
  const std::string tmp = proc.add(200, 200);
  std::filesystem::create_directories(proc.path + "/200/root/app");
  DumpBuilder dump;
  dump.load(0x1000, 0x10, "mapped");
  write_bytes(proc.path + "/200/root/app/jit-200.dump", dump.bytes);
  PerfMaps maps(proc.path);
  maps.note_jitdump_mapping(200, "/app/jit-200.dump");
  REQUIRE(maps.find(200, 0x1000) != nullptr);
  CHECK(maps.find(200, 0x1000)->name == "mapped");

  // Not a dump: one reason, kept.
  const std::string bad = proc.add(201, 201);
  std::ofstream(bad + "/jit-201.dump") << "hello, not a dump";
  CHECK(maps.find(201, 0x1000, true) == nullptr);
  CHECK(maps.jitdump_error(201) == "/tmp/jit-201.dump: not a jitdump file (bad magic)");

  // A symlink out of the root resolves inside it (nothing there).
  std::filesystem::create_symlink("/proc/self/exe", proc.add(202, 202) + "/jit-202.dump");
  CHECK(maps.find(202, 0x1000, true) == nullptr);
  CHECK_FALSE(maps.has_map(202));

  // Someone else's file in a shared /tmp.
  const std::string planted = proc.add(203, 203) + "/jit-203.dump";
  write_bytes(planted, dump.bytes);
  if (::chown(planted.c_str(), 12345, 12345) == 0) {
    CHECK(maps.find(203, 0x1000, true) == nullptr);
    CHECK_FALSE(maps.has_map(203));
  }
  CHECK(is_jitdump_path("/tmp/jit-1.dump"));
  CHECK_FALSE(is_jitdump_path("/tmp/jit-.dump"));
  CHECK_FALSE(is_jitdump_path("/tmp/perf-1.map"));
}

TEST_CASE("jitdumps of processes: found in /proc/PID/maps; exec forgets the old image's dump") {
  FakeProc proc;
  proc.add(300, 300);
  std::filesystem::create_directories(proc.path + "/300/root/srv");
  // A process running before the session: its mapping is in its maps.
  std::ofstream(proc.path + "/300/maps")
      << "7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 /usr/bin/node\n"
      << "7f0000002000-7f0000003000 r-xp 00000000 08:01 5678 /srv/jit-300.dump\n";
  DumpBuilder dump;
  dump.load(0x1000, 0x10, "from-maps");
  write_bytes(proc.path + "/300/root/srv/jit-300.dump", dump.bytes);
  PerfMaps maps(proc.path);
  REQUIRE(maps.find(300, 0x1000) != nullptr);
  CHECK(maps.find(300, 0x1000)->name == "from-maps");
  // The new image writes its own dump (here: in /tmp).
  DumpBuilder after;
  after.load(0x1000, 0x10, "after-exec");
  write_bytes(proc.path + "/300/root/tmp/jit-300.dump", after.bytes);
  maps.note_exec(300);
  CHECK_FALSE(maps.has_map(300));
  const JitSymbol* symbol = maps.find(300, 0x1000, /*final=*/true);
  REQUIRE(symbol != nullptr);
  CHECK(symbol->name == "after-exec");
}

TEST_CASE("jitdumps of processes: the code at an address, with its unwinding info, where it moved") {
  FakeProc proc;
  const std::string tmp = proc.add(400, 400);
  DumpBuilder dump;
  dump.unwinding({1, 2, 3, 4, 5, 6, 7, 8}, 4);
  dump.load(0x1000, 0x20, "with-cfi");
  dump.load(0x2000, 0x20, "without", 2);
  dump.move(0x1000, 0x5000, 0x20);
  write_bytes(tmp + "/jit-400.dump", dump.bytes);
  PerfMaps maps(proc.path);
  uint64_t moved_by = 0;
  const JitCode* code = maps.find_code(400, 0x5010, moved_by);
  REQUIRE(code != nullptr);
  CHECK(code->name == "with-cfi");
  CHECK(code->start == 0x1000);
  CHECK(moved_by == 0x4000);
  CHECK(code->unwind == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(code->eh_frame_hdr_size == 4);
  CHECK(maps.find_code(400, 0x1010, moved_by) == nullptr);  // nothing is left where it was
  code = maps.find_code(400, 0x2000, moved_by);
  REQUIRE(code != nullptr);
  CHECK(code->unwind.empty());
  CHECK(moved_by == 0);
}
