// Builder: exact bytes (gsym/FORMAT.md §12 worked example, line-table and
// inline encoders), LLVM 22 finalize rules, determinism, validation errors.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/format/byte_writer.h"
#include "gsym/format/leb128.h"
#include "gsym/format/record_encode.h"

using namespace gsym;

namespace {

const std::vector<uint8_t> kTinyGsym = {
    0x4d, 0x59, 0x53, 0x47, 0x01, 0x00, 0x02, 0x14, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x58, 0x00, 0x00, 0x00, 0x29, 0x00, 0x00, 0x00, 0x57, 0x02, 0xbc, 0x11,
    0xb8, 0x9e, 0xaf, 0x04, 0x3b, 0xbe, 0x93, 0x5b, 0x77, 0x1e, 0x94, 0x00, 0x43, 0x63, 0x38, 0xa4,
    0x00, 0x10, 0x10, 0x10, 0x84, 0x00, 0x00, 0x00, 0xc8, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x00, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00,
    0x2f, 0x68, 0x6f, 0x6d, 0x65, 0x2f, 0x75, 0x73, 0x65, 0x72, 0x2f, 0x64, 0x65, 0x6d, 0x6f, 0x00,
    0x74, 0x69, 0x6e, 0x79, 0x2e, 0x63, 0x00, 0x66, 0x00, 0x73, 0x71, 0x2e, 0x68, 0x00, 0x73, 0x71,
    0x00, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x0c, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x01, 0x02, 0x02, 0x00, 0x01, 0x01, 0x0f, 0x1c, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x15, 0x00, 0x00, 0x00, 0x01, 0x00, 0x0c, 0x01, 0x1f, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x03, 0x00, 0x26, 0x00, 0x00, 0x00, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x04, 0x27, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

const std::vector<uint8_t> kTinyBuildId = {0x57, 0x02, 0xbc, 0x11, 0xb8, 0x9e, 0xaf,
                                           0x04, 0x3b, 0xbe, 0x93, 0x5b, 0x77, 0x1e,
                                           0x94, 0x00, 0x43, 0x63, 0x38, 0xa4};

Function tiny_f() {
  Function f;
  f.range = {0x401000, 0x40100c};
  f.name = "f";
  f.lines = {{0x401000, 2, 3}, {0x401003, 1, 6}, {0x40100b, 1, 7}};
  InlineNode root;
  root.ranges = {{0x401000, 0x40100c}};
  root.name = "f";
  InlineNode sq;
  sq.ranges = {{0x401000, 0x401003}};
  sq.name = "sq";
  sq.call_file = 1;
  sq.call_line = 5;
  root.children.push_back(sq);
  f.inline_tree = root;
  return f;
}

Function tiny_start() {
  Function f;
  f.range = {0x401010, 0x401023};
  f.name = "_start";
  f.lines = {{0x401010, 1, 10}, {0x401021, 1, 11}};
  return f;
}

// The §12 model, interning strings and files in LLVM's (DWARF) order.
Builder tiny_builder() {
  BuilderOptions options;
  options.base_address = 0x400000;
  options.build_id = kTinyBuildId;
  Builder b(options);
  CHECK(b.add_string("_start") == 0x01);
  CHECK(b.add_file({"/home/user/demo", "tiny.c"}) == 1);
  CHECK(b.add_string("f") == 0x1f);
  CHECK(b.add_file({"/home/user/demo", "sq.h"}) == 2);
  CHECK(b.add_string("sq") == 0x26);
  return b;
}

std::vector<uint8_t> encode_ok(Builder& b) {
  auto bytes = b.encode();
  if (!bytes) FAIL("encode failed: " << bytes.error().message);
  return *bytes;
}

std::string add_error(Builder& b, Function f) {
  Status s = b.add_function(std::move(f));
  return s ? std::string("(accepted)") : s.error().message;
}

std::vector<uint8_t> line_table_bytes(const std::vector<LineEntry>& rows, uint64_t start) {
  ByteWriter w(Endian::Little);
  Status s = encode_line_table(w, rows, start);
  REQUIRE(s.ok());
  return w.bytes();
}

Function named(uint64_t start, uint64_t end, std::string name) {
  Function f;
  f.range = {start, end};
  f.name = std::move(name);
  return f;
}

}  // namespace

TEST_CASE("builder reproduces the worked example of gsym/FORMAT.md section 12 byte for byte") {
  Builder b = tiny_builder();
  REQUIRE(b.add_function(tiny_f()).ok());
  REQUIRE(b.add_function(tiny_start()).ok());
  std::vector<uint8_t> bytes = encode_ok(b);
  CHECK(bytes.size() == 230);
  CHECK(bytes == kTinyGsym);
  // encode() is repeatable.
  CHECK(encode_ok(b) == kTinyGsym);
}

TEST_CASE("builder output does not depend on the order functions are added") {
  Builder b = tiny_builder();
  REQUIRE(b.add_function(tiny_start()).ok());
  REQUIRE(b.add_function(tiny_f()).ok());
  CHECK(encode_ok(b) == kTinyGsym);
}

TEST_CASE("strings not added explicitly are interned in sorted-function order") {
  // Without add_string, "f" (0x401000) comes before "_start"; files' strings
  // were interned by add_file first.
  BuilderOptions options;
  options.base_address = 0x400000;
  Builder b(options);
  REQUIRE(b.add_file({"/home/user/demo", "tiny.c"}) == 1);
  REQUIRE(b.add_file({"/home/user/demo", "sq.h"}) == 2);
  REQUIRE(b.add_function(tiny_start()).ok());
  REQUIRE(b.add_function(tiny_f()).ok());
  std::vector<uint8_t> bytes = encode_ok(b);
  const char expected[] = "\0/home/user/demo\0tiny.c\0sq.h\0f\0sq\0_start";
  std::string table(reinterpret_cast<const char*>(bytes.data()) + 0x58, sizeof expected);
  CHECK(table == std::string(expected, sizeof expected));
  CHECK(bytes[0x18] == sizeof expected);  // StrtabSize
  CHECK(bytes[0x07] == 0);                // no build ID
  for (int i = 0x1c; i < 0x30; ++i) CHECK(bytes[i] == 0);
}

TEST_CASE("add_string and add_file intern and de-duplicate") {
  Builder b;
  CHECK(b.add_string("") == 0);
  CHECK(b.add_file({"", ""}) == 0);
  CHECK(b.add_string("leaf") == 1);
  CHECK(b.add_string("xleaf") == 6);  // no suffix merging
  CHECK(b.add_string("leaf") == 1);
  CHECK(b.add_file({"/d", "a.c"}) == 1);
  CHECK(b.add_file({"", "a.c"}) == 2);
  CHECK(b.add_file({"/d", "a.c"}) == 1);
  CHECK(b.file_count() == 3);
}

TEST_CASE("line-table encoder follows LLVM's delta window rules") {
  // One row: Min = Max = 0, first row is special opcode 4.
  CHECK(line_table_bytes({{0x10, 1, 7}}, 0x10) == std::vector<uint8_t>{0x00, 0x00, 0x07, 0x04, 0x00});
  // Row after the start with file 1: only the address moves.
  CHECK(line_table_bytes({{0x12, 1, 7}}, 0x10) == std::vector<uint8_t>{0x00, 0x00, 0x07, 0x06, 0x00});
  // Large jumps: deltas {+1000, -2000} span > 14; window starts at the first
  // delta with the greatest count (both count 1 -> -2000 alone).
  CHECK(line_table_bytes({{0x10, 1, 5000}, {0x1010, 1, 6000}, {0x100010, 1, 4000}}, 0x10) ==
        std::vector<uint8_t>{0xb0, 0x70, 0xb0, 0x70, 0x88, 0x27,  // Min -2000, Max -2000, line 5000
                             0x02, 0x00,                          // first row: ld 0 outside window
                             0x03, 0xe8, 0x07, 0x02, 0x80, 0x20,  // +1000 line, +0x1000 pc
                             0x03, 0xb0, 0x70, 0x02, 0x80, 0xe0, 0x3f,  // -2000 line, +0xff000 pc
                             0x00});
  // Window choice: deltas +1 x3, +100 x1 -> window [1, 1], then Min 0 (0 < 1 < 14).
  CHECK(line_table_bytes({{0, 1, 1}, {1, 1, 2}, {2, 1, 3}, {3, 1, 4}, {4, 1, 104}}, 0) ==
        std::vector<uint8_t>{0x00, 0x01, 0x01, 0x04, 0x07, 0x07, 0x07, 0x03, 0xe4, 0x00, 0x02, 0x01,
                             0x00});
  // File change, same-address rows kept, file 0 allowed.
  CHECK(line_table_bytes({{0x20, 0, 3}, {0x20, 2, 4}}, 0x20) ==
        std::vector<uint8_t>{0x00, 0x01, 0x03, 0x01, 0x00, 0x04, 0x01, 0x02, 0x05, 0x00});
  // A line decrease wider than 2^31 wraps like LLVM (u32 arithmetic).
  CHECK(line_table_bytes({{0, 1, 4000000000u}, {1, 1, 1}}, 0) ==
        std::vector<uint8_t>{0x81, 0xb0, 0xd3, 0x8c, 0x71,         // Min = Max = -3999999999
                             0x81, 0xb0, 0xd3, 0x8c, 0x71, 0x80, 0xd0, 0xac, 0xf3, 0x0e,
                             0x02, 0x00,                               // first row
                             0x03, 0x81, 0xb0, 0xd3, 0x8c, 0x01,       // +294967297 (mod 2^32)
                             0x02, 0x01, 0x00});
  ByteWriter w(Endian::Little);
  CHECK_FALSE(encode_line_table(w, {}, 0).ok());
}

// LLVM's rule for the special opcodes' line window, as LLVM computes it:
// a sorted histogram of the deltas, every occurring delta tried as the
// first of a window 14 wide, the first with the most deltas kept.
std::pair<int64_t, int64_t> reference_line_window(const std::vector<LineEntry>& rows) {
  if (rows.size() == 1) return {0, 0};
  std::map<int64_t, uint64_t> histogram;
  for (size_t i = 1; i < rows.size(); ++i) ++histogram[int64_t(rows[i].line) - int64_t(rows[i - 1].line)];
  int64_t min_delta = histogram.begin()->first, max_delta = histogram.rbegin()->first;
  if (max_delta - min_delta > 14) {
    uint64_t best = 0;
    for (auto first = histogram.begin(); first != histogram.end(); ++first) {
      uint64_t count = 0;
      auto last = first;
      for (auto it = first; it != histogram.end() && it->first - first->first <= 14; ++it) {
        count += it->second;
        last = it;
      }
      if (count > best) {
        best = count;
        min_delta = first->first;
        max_delta = last->first;
      }
    }
  }
  if (min_delta == max_delta && min_delta > 0 && min_delta < 14) min_delta = 0;
  return {min_delta, max_delta};
}

TEST_CASE("line tables choose LLVM's delta window: near deltas, far jumps, wide spreads") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20000; ++round) {
    std::vector<LineEntry> rows(1 + rng() % (round % 10 == 0 ? 2000 : 40));
    uint32_t line = 1 + uint32_t(rng() % 100000);
    const int shape = round % 4;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (shape == 0) line += uint32_t(int(rng() % 31) - 15);                   // within 30
      if (shape == 1) line += uint32_t(int(rng() % 3001) - 1500);               // spread wide
      if (shape == 2) line += rng() % 16 == 0 ? uint32_t(int(rng() % 200001) - 100000)
                                              : uint32_t(int(rng() % 41) - 20);  // header jumps
      if (shape == 3) line = rng() % 4 == 0 ? uint32_t(rng()) : line + uint32_t(rng() % 5);  // 32-bit
      rows[i] = {0x1000 + 4 * i, 1, line};
    }
    const std::vector<uint8_t> bytes = line_table_bytes(rows, 0x1000);
    const uint8_t* p = bytes.data();
    const uint8_t* end = bytes.data() + bytes.size();
    int64_t min_delta = 0, max_delta = 0;
    REQUIRE(leb128::decode_sleb<10>(p, end, min_delta) == leb128::Result::Ok);
    REQUIRE(leb128::decode_sleb<10>(p, end, max_delta) == leb128::Result::Ok);
    const auto want = reference_line_window(rows);
    CHECK(min_delta == want.first);
    CHECK(max_delta == want.second);
  }
}

TEST_CASE("big-endian output swaps fixed-width fields only") {
  BuilderOptions options;
  options.endian = Endian::Big;
  Builder b(options);
  REQUIRE(b.add_function(named(0x1000, 0x1010, "main")).ok());
  std::vector<uint8_t> bytes = encode_ok(b);
  const std::vector<uint8_t> expected_head = {0x47, 0x53, 0x59, 0x4d, 0x00, 0x01, 0x01, 0x00,
                                              0, 0, 0, 0, 0, 0, 0x10, 0x00,  // base
                                              0, 0, 0, 1};                   // count
  CHECK(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 20) == expected_head);
  // Address table at 48 (1 byte), info offsets at 52, file table at 56.
  CHECK(bytes[48] == 0);
  CHECK(std::vector<uint8_t>(bytes.begin() + 56, bytes.begin() + 68) ==
        std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0});
  // String table at 68: "\0main\0" (6 bytes); record at 76.
  CHECK(bytes[23] == 68);
  CHECK(bytes[27] == 6);
  CHECK(std::vector<uint8_t>(bytes.begin() + 52, bytes.begin() + 56) ==
        std::vector<uint8_t>{0, 0, 0, 76});
  CHECK(std::vector<uint8_t>(bytes.begin() + 76, bytes.end()) ==
        std::vector<uint8_t>{0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("address-offset width is the smallest that fits the last start") {
  struct Case {
    uint64_t last_start;
    uint8_t width;
  };
  for (Case c : {Case{0xff, 1}, Case{0x100, 2}, Case{0xffff, 2}, Case{0x10000, 4},
                 Case{0xffffffff, 4}, Case{0x100000000, 8}}) {
    BuilderOptions options;
    options.base_address = 0x1000;
    Builder b(options);
    REQUIRE(b.add_function(named(0x1000, 0x1001, "a")).ok());
    REQUIRE(b.add_function(named(0x1000 + c.last_start, 0x1000 + c.last_start + 1, "b")).ok());
    std::vector<uint8_t> bytes = encode_ok(b);
    CHECK(bytes[6] == c.width);
    // Second entry of the address table, little-endian, at 48 + width.
    uint64_t entry = 0;
    for (unsigned i = 0; i < c.width; ++i) entry |= uint64_t(bytes[48 + c.width + i]) << (8 * i);
    CHECK(entry == c.last_start);
  }
}

TEST_CASE("finalize applies LLVM 22's de-duplication rules") {
  SUBCASE("identical records are dropped, a richer one replaces a bare symbol") {
    Builder b;
    Function rich = named(0x100, 0x120, "dwarf_name");
    rich.lines = {{0x100, 0, 1}};
    REQUIRE(b.add_function(rich).ok());
    REQUIRE(b.add_function(named(0x100, 0x120, "symbol")).ok());
    REQUIRE(b.add_function(named(0x100, 0x120, "symbol")).ok());
    const auto& kept = b.finalize();
    REQUIRE(kept.size() == 1);
    CHECK(kept[0] == rich);
  }
  SUBCASE("aliases of one range: the greatest name wins whatever the order") {
    for (int order = 0; order < 2; ++order) {
      Builder b;
      std::vector<std::string> names = {"__GI_memcpy", "memcpy"};
      if (order) std::reverse(names.begin(), names.end());
      for (const auto& n : names) REQUIRE(b.add_function(named(0x100, 0x120, n)).ok());
      REQUIRE(b.finalize().size() == 1);
      CHECK(b.finalize()[0].name == "memcpy");
    }
  }
  SUBCASE("insertion_order_ties: LLVM's rule, the later alias wins") {
    for (int order = 0; order < 2; ++order) {
      BuilderOptions options;
      options.insertion_order_ties = true;
      Builder b(options);
      std::vector<std::string> names = {"__GI_memcpy", "memcpy"};
      if (order) std::reverse(names.begin(), names.end());
      for (const auto& n : names) REQUIRE(b.add_function(named(0x100, 0x120, n)).ok());
      REQUIRE(b.finalize().size() == 1);
      CHECK(b.finalize()[0].name == names.back());
    }
  }
  SUBCASE("overlapping ranges are kept, zero-size swallowed at the same start") {
    Builder b;
    REQUIRE(b.add_function(named(0x100, 0x100, "zero")).ok());
    REQUIRE(b.add_function(named(0x100, 0x140, "outer")).ok());
    REQUIRE(b.add_function(named(0x108, 0x10c, "inner")).ok());
    REQUIRE(b.add_function(named(0x110, 0x110, "zero_inside")).ok());
    REQUIRE(b.add_function(named(0x200, 0x200, "zero_alone")).ok());
    REQUIRE(b.add_function(named(0x300, 0x310, "after")).ok());
    std::vector<std::string> names;
    for (const Function& f : b.finalize()) names.push_back(f.name);
    CHECK(names == std::vector<std::string>{"outer", "inner", "zero_inside", "zero_alone", "after"});
  }
  SUBCASE("deduplicate=false keeps everything, sorted") {
    BuilderOptions options;
    options.deduplicate = false;
    Builder b(options);
    REQUIRE(b.add_function(named(0x100, 0x120, "b")).ok());
    REQUIRE(b.add_function(named(0x100, 0x120, "a")).ok());
    REQUIRE(b.add_function(named(0x100, 0x100, "z")).ok());
    std::vector<std::string> names;
    for (const Function& f : b.finalize()) names.push_back(f.name);
    CHECK(names == std::vector<std::string>{"z", "a", "b"});
  }
  SUBCASE("sort key: range, then inline size, then line table, then name") {
    BuilderOptions options;
    options.deduplicate = false;
    Builder b(options);
    Function two_rows = named(0x100, 0x120, "a");
    two_rows.lines = {{0x100, 0, 1}, {0x104, 0, 2}};
    Function one_row = named(0x100, 0x120, "b");
    one_row.lines = {{0x100, 0, 1}};
    Function inl = named(0x100, 0x120, "c");
    inl.inline_tree = InlineNode{{{0x100, 0x120}}, "c", 0, 0, {}};
    REQUIRE(b.add_function(inl).ok());
    REQUIRE(b.add_function(two_rows).ok());
    REQUIRE(b.add_function(one_row).ok());
    REQUIRE(b.add_function(named(0x100, 0x110, "short")).ok());
    std::vector<std::string> names;
    for (const Function& f : b.finalize()) names.push_back(f.name);
    CHECK(names == std::vector<std::string>{"short", "b", "a", "c"});
  }
  SUBCASE("a trailing zero-size function reaches the end of its text range") {
    BuilderOptions options;
    options.text_ranges = {{0x1000, 0x1800}, {0x1800, 0x2000}, {0x3000, 0x4000}};
    Builder b(options);
    REQUIRE(b.add_function(named(0x1000, 0x1010, "a")).ok());
    REQUIRE(b.add_function(named(0x1900, 0x1900, "_fini")).ok());
    const auto& kept = b.finalize();
    REQUIRE(kept.size() == 2);
    CHECK(kept[1].range == AddressRange{0x1900, 0x2000});  // touching ranges merged
  }
  SUBCASE("the extension stays below 4 GiB, outside text ranges nothing moves") {
    BuilderOptions options;
    options.text_ranges = {{0x1000, 0x300000000}};
    Builder b(options);
    REQUIRE(b.add_function(named(0x2000, 0x2000, "huge")).ok());
    CHECK(b.finalize()[0].range == AddressRange{0x2000, 0x2000 + 0xffffffffull});
    CHECK(b.encode().ok());
    Builder outside(options);
    REQUIRE(outside.add_function(named(0x400000000, 0x400000000, "elsewhere")).ok());
    CHECK(outside.finalize()[0].range == AddressRange{0x400000000, 0x400000000});
  }
}

TEST_CASE("shuffled insertion order gives identical bytes") {
  std::vector<Function> functions;
  for (int i = 0; i < 40; ++i) {
    Function f = named(0x1000 + 0x40 * (i / 3), 0x1000 + 0x40 * (i / 3) + 0x20 + (i % 2) * 8,
                       "fn" + std::to_string(i % 7));
    if (i % 4 == 0) f.lines = {{f.range.start, 1, uint32_t(i)}, {f.range.start + 4, 2, 9}};
    if (i % 5 == 0) f.inline_tree = InlineNode{{f.range}, f.name, 0, 0,
                                               {InlineNode{{{f.range.start, f.range.start + 4}},
                                                           "in" + std::to_string(i), 1, 3, {}}}};
    functions.push_back(f);
  }
  for (bool dedupe : {true, false}) {
    std::vector<uint8_t> reference;
    std::mt19937 rng(7);
    for (int round = 0; round < 6; ++round) {
      BuilderOptions options;
      options.deduplicate = dedupe;
      Builder b(options);
      b.add_file({"/src", "a.c"});
      b.add_file({"/src", "b.h"});
      std::vector<Function> order = functions;
      std::shuffle(order.begin(), order.end(), rng);
      for (auto& f : order) REQUIRE(b.add_function(f).ok());
      std::vector<uint8_t> bytes = encode_ok(b);
      if (round == 0)
        reference = bytes;
      else
        CHECK(bytes == reference);
    }
  }
}

TEST_CASE("add_function validation errors") {
  Builder b;
  b.add_file({"/d", "a.c"});
  CHECK(add_error(b, named(0x10, 0x20, "")) == "function at 0x10 has an empty name");
  CHECK(add_error(b, named(0x20, 0x10, "rev")) == "function \"rev\" has a reversed range [0x20, 0x10)");
  CHECK(add_error(b, named(0, 0x100000000, "big")) ==
        "function \"big\" is larger than 4 GiB - 1 (size 0x100000000)");

  Function f = named(0x100, 0x120, "f");
  f.lines = {{0xff, 1, 1}};
  CHECK(add_error(b, f) == "line row at 0xff is outside the function range [0x100, 0x120) in function \"f\"");
  f.lines = {{0x120, 1, 1}};
  CHECK(add_error(b, f) == "line row at 0x120 is outside the function range [0x100, 0x120) in function \"f\"");
  f.lines = {{0x104, 1, 1}, {0x100, 1, 2}};
  CHECK(add_error(b, f) == "line rows are not in ascending address order (0x100 after 0x104) in function \"f\"");
  f.lines = {{0x100, 2, 1}};
  CHECK(add_error(b, f) == "line row at 0x100 uses file 2 but the file table has 2 entries in function \"f\"");
  f.lines.clear();

  f.inline_tree = InlineNode{{{0x100, 0x121}}, "f", 0, 0, {}};
  CHECK(add_error(b, f) == "inline range [0x100, 0x121) of \"f\" is outside its parent in function \"f\"");
  f.inline_tree = InlineNode{{{0x100, 0x120}}, "f", 0, 0, {InlineNode{{{0x110, 0x110}}, "g", 1, 1, {}}}};
  CHECK(add_error(b, f) == "inline node \"g\" has no non-empty range in function \"f\"");
  f.inline_tree = InlineNode{{{0x100, 0x110}}, "f", 0, 0, {InlineNode{{{0x108, 0x118}}, "g", 1, 1, {}}}};
  CHECK(add_error(b, f) == "inline range [0x108, 0x118) of \"g\" is outside its parent in function \"f\"");
  f.inline_tree = InlineNode{{{0x100, 0x110}}, "f", 0, 0, {InlineNode{{{0x108, 0x10c}}, "g", 5, 1, {}}}};
  CHECK(add_error(b, f) == "inline node \"g\" has call file 5 but the file table has 2 entries in function \"f\"");
  f.inline_tree = InlineNode{{{0x100, 0x110}}, "f", 0, 0, {InlineNode{{{0x10c, 0x108}}, "g", 1, 1, {}}}};
  CHECK(add_error(b, f) == "inline node \"g\" has a reversed range [0x10c, 0x108) in function \"f\"");

  // Depth limit: a chain of kMaxInlineDepth nodes is fine, one more is not.
  auto chain = [](size_t depth) {
    InlineNode root{{{0x100, 0x120}}, "n", 0, 0, {}};
    InlineNode* node = &root;
    for (size_t i = 1; i < depth; ++i) {
      node->children.push_back(InlineNode{{{0x100, 0x120}}, "n", 1, 1, {}});
      node = &node->children.back();
    }
    return root;
  };
  f.inline_tree = chain(Builder::kMaxInlineDepth);
  CHECK(add_error(b, f) == "(accepted)");
  f.inline_tree = chain(Builder::kMaxInlineDepth + 1);
  CHECK(add_error(b, f) == "inline tree deeper than 256 levels in function \"f\"");
  f.inline_tree.reset();

  f.call_sites = {CallSite{0x20, 0, {}}};
  CHECK(add_error(b, f) == "call site offset 0x20 is outside the function (size 0x20) in function \"f\"");
  f.call_sites = {CallSite{0x1f, 0, {}}};
  CHECK(add_error(b, f) == "(accepted)");
  f.call_sites.clear();

  f.merged = {named(0x100, 0x110, "m")};
  CHECK(add_error(b, f) == "merged function \"m\" has range [0x100, 0x110), not its parent's [0x100, 0x120) in function \"f\"");
  f.merged = {named(0x100, 0x120, "")};
  CHECK(add_error(b, f) == "function at 0x100 has an empty name");
  CHECK(b.function_count() == 2);
}

TEST_CASE("inline ranges are normalized like LLVM's AddressRanges") {
  Builder b;
  Function f = named(0x100, 0x140, "f");
  f.inline_tree = InlineNode{{{0x100, 0x140}}, "f", 0, 0,
                             {InlineNode{{{0x120, 0x130}, {0x104, 0x108}, {0x108, 0x10c}, {0x110, 0x110},
                                          {0x106, 0x10a}},
                                         "g", 0, 2, {}}}};
  REQUIRE(b.add_function(f).ok());
  const auto& kept = b.finalize();
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].inline_tree->children[0].ranges ==
        std::vector<AddressRange>{{0x104, 0x10c}, {0x120, 0x130}});
}

TEST_CASE("encode errors") {
  Builder empty;
  auto none = empty.encode();
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == "no functions to encode");

  BuilderOptions options;
  options.build_id.assign(21, 0xab);
  Builder long_id(options);
  REQUIRE(long_id.add_function(named(0x10, 0x20, "f")).ok());
  auto bad = long_id.encode();
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "invalid build ID size 21 (GSYM version 1 allows at most 20 bytes)");

  Builder high_base;
  high_base.set_base_address(0x11);
  REQUIRE(high_base.add_function(named(0x10, 0x20, "f")).ok());
  auto above = high_base.encode();
  REQUIRE_FALSE(above.ok());
  CHECK(above.error().message == "base address 0x11 is above the first function start 0x10");
}

TEST_CASE("merged functions and call sites encode like LLVM") {
  // gsym/FORMAT.md §6.1 example: foo_b with one merged foo_a (gold --icf).
  Builder b;
  b.add_string("foo_b");  // offsets chosen to reach 0x23/0x29 below
  Function outer = named(0x1000, 0x100d, "foo_b");
  outer.lines = {{0x1000, 1, 4}, {0x1004, 1, 5}};
  Function inner = named(0x1000, 0x100d, "foo_a");
  inner.lines = outer.lines;
  outer.merged = {inner};
  outer.call_sites = {CallSite{0x5, CallSite::kExternal, {"foo_b", "bar.*"}}};
  b.add_file({"", "x.c"});
  REQUIRE(b.add_function(outer).ok());
  std::vector<uint8_t> bytes = encode_ok(b);
  // Strings: "\0foo_b\0x.c\0bar.*\0foo_a\0" -> foo_b 1, x.c 7, bar.* 11, foo_a 17
  // (encode-time order: name, call-site regexes, then merged functions).
  const uint32_t record = bytes[52] | bytes[53] << 8;
  std::vector<uint8_t> got(bytes.begin() + record, bytes.end());
  const std::vector<uint8_t> expected = {
      0x0d, 0, 0, 0, 0x01, 0, 0, 0,                    // size 13, name foo_b
      0x01, 0, 0, 0, 0x06, 0, 0, 0, 0x00, 0x01, 0x04, 0x04, 0x0d, 0x00,  // line table
      0x03, 0, 0, 0, 0x26, 0, 0, 0,                    // merged, 38 bytes
      0x01, 0, 0, 0, 0x1e, 0, 0, 0,                    // 1 record of 30 bytes
      0x0d, 0, 0, 0, 0x11, 0, 0, 0,                    // size 13, name foo_a
      0x01, 0, 0, 0, 0x06, 0, 0, 0, 0x00, 0x01, 0x04, 0x04, 0x0d, 0x00,
      0, 0, 0, 0, 0, 0, 0, 0,                          // nested EndOfList
      0x04, 0, 0, 0, 0x19, 0, 0, 0,                    // call sites, 25 bytes
      0x01, 0, 0, 0,                                   // count
      0x05, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0,  // offset 5, external, 2 regexes
      0x01, 0, 0, 0, 0x0b, 0, 0, 0,                    // "foo_b", "bar.*"
      0, 0, 0, 0, 0, 0, 0, 0};                         // EndOfList
  CHECK(got == expected);
}

TEST_CASE("write_file writes atomically with mode 0644") {
  char dir_template[] = "/tmp/gsym_builder_test.XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/out.gsym";
  {
    std::ofstream old(path);
    old << "old contents";
  }
  Builder b = tiny_builder();
  REQUIRE(b.add_function(tiny_f()).ok());
  REQUIRE(b.add_function(tiny_start()).ok());
  REQUIRE(b.write_file(path).ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes == kTinyGsym);
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);

  Status bad = b.write_file(dir + "/missing/out.gsym");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find(dir + "/missing/out.gsym: cannot open the output directory") == 0);
  Builder empty;
  Status none = empty.write_file(path);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == path + ": no functions to encode");
  unlink(path.c_str());
  rmdir(dir.c_str());
}
