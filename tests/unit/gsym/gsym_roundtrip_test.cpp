// Builder -> Reader round trips: every function decodes to exactly the model
// that was added, in every address-offset width, both byte orders, with deep
// inline trees, large line jumps, merged functions and call sites.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

const std::vector<FileEntry> kFiles = {
    {"", ""}, {"/src/app", "main.c"}, {"/src/app", "util.h"}, {"", "nodir.c"}, {"/usr/include", "math.h"}};

// A node with two ranges per level, each child inside its parent's first
// range, `depth` levels below this one.
InlineNode deep_node(uint64_t start, uint64_t end, int depth, int level) {
  InlineNode node;
  node.name = "inl_" + std::to_string(level);
  node.call_file = static_cast<uint32_t>(1 + level % 4);
  node.call_line = static_cast<uint32_t>(100 * level + 7);
  const uint64_t len = end - start;
  node.ranges = {{start, start + len / 2}, {start + len / 2 + 2, end}};
  if (depth > 0) {
    node.children.push_back(deep_node(start + 1, start + len / 2 - 1, depth - 1, level + 1));
    // A second child in the parent's second range, no children.
    InlineNode sibling;
    sibling.name = "sib_" + std::to_string(level);
    sibling.call_file = 0;
    sibling.call_line = 0;
    sibling.ranges = {{start + len / 2 + 2, start + len / 2 + 4}};
    node.children.push_back(sibling);
  }
  return node;
}

std::vector<Function> sample_functions(uint64_t base, uint64_t last_offset) {
  std::vector<Function> out;

  Function deep;
  deep.range = {base, base + 0x400};
  deep.name = "deep";
  deep.lines = {{base, 1, 10}, {base + 3, 2, 4000000}, {base + 3, 2, 3},
                {base + 0x100, 0, 0}, {base + 0x101, 3, 12}, {base + 0x3ff, 4, 11}};
  InlineNode root;
  root.name = "deep";
  root.ranges = {deep.range};
  root.children.push_back(deep_node(base + 0x10, base + 0x3f0, 5, 1));  // 6 levels under root
  deep.inline_tree = root;
  out.push_back(deep);

  Function jumps;
  jumps.range = {base + 0x1000, base + 0x1000 + 0x20000};
  jumps.name = "jumps";
  for (uint32_t i = 0; i < 40; ++i)
    jumps.lines.push_back({jumps.range.start + i * 0xccc, 1 + i % 3, (i % 2) ? 50000 + i * 997 : 3 + i});
  out.push_back(jumps);

  Function merged;
  merged.range = {base + 0x30000, base + 0x30040};
  merged.name = "folded_b";
  merged.lines = {{base + 0x30000, 1, 5}};
  Function m1 = merged;
  m1.name = "folded_a";
  m1.lines = {{base + 0x30000, 2, 9}, {base + 0x30010, 2, 10}};
  m1.call_sites = {CallSite{0x8, CallSite::kInternal, {"callee_a"}}};
  Function m2 = merged;
  m2.name = "folded_c";
  merged.merged = {m1, m2};
  merged.call_sites = {CallSite{0x4, CallSite::kInternal | CallSite::kExternal, {"x", "y.*"}},
                       CallSite{0x3f, 0x80, {}}};
  out.push_back(merged);

  Function symbol;
  symbol.range = {base + 0x30040, base + 0x30040};
  symbol.name = "zero_size_symbol";
  out.push_back(symbol);

  Function last;
  last.range = {base + last_offset, base + last_offset + 0x10};
  last.name = "last";
  last.lines = {{last.range.start + 0xf, 3, 1}};
  out.push_back(last);
  return out;
}

void check_round_trip(Endian endian, uint64_t base, uint64_t last_offset, std::vector<uint8_t> build_id,
                      uint8_t expected_width) {
  BuilderOptions options;
  options.endian = endian;
  options.build_id = build_id;
  Builder b(options);
  for (const FileEntry& f : kFiles) b.add_file(f);
  std::vector<Function> functions = sample_functions(base, last_offset);
  for (const Function& f : functions) {
    Status s = b.add_function(f);
    REQUIRE_MESSAGE(s.ok(), s.error().message);
  }
  // The model in file order (sorted by start; nothing here is pruned).
  const std::vector<Function> finalized = b.finalize();
  REQUIRE(finalized.size() == functions.size());
  auto bytes = b.encode();
  REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
  auto reader = Reader::parse(*bytes);
  REQUIRE_MESSAGE(reader.ok(), reader.error().message);

  CHECK(reader->header().endian == endian);
  CHECK(reader->header().addr_off_size == expected_width);
  CHECK(reader->header().base_address == base);
  CHECK(std::vector<uint8_t>(reader->build_id().begin(), reader->build_id().end()) == build_id);
  auto files = reader->decode_files();
  REQUIRE(files.ok());
  CHECK(*files == kFiles);

  REQUIRE(reader->function_count() == functions.size());
  for (size_t i = 0; i < functions.size(); ++i) {
    auto decoded = reader->decode_function(i);
    REQUIRE_MESSAGE(decoded.ok(), decoded.error().message);
    CHECK(*decoded == finalized[i]);
    CHECK(reader->function_start(i) == finalized[i].range.start);
  }
  auto report = reader->verify();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(report->functions == functions.size());
  CHECK(report->files == kFiles.size());
  CHECK(report->merged_functions == 2);
  CHECK(report->call_sites == 3);
  CHECK(report->line_rows == 6 + 40 + 1 + 3 + 1);

  // Re-encoding the decoded model gives the same bytes.
  Builder again(options);
  for (const FileEntry& f : kFiles) again.add_file(f);
  for (size_t i = functions.size(); i-- > 0;) REQUIRE(again.add_function(*reader->decode_function(i)).ok());
  auto again_bytes = again.encode();
  REQUIRE(again_bytes.ok());
  CHECK(*again_bytes == *bytes);
}

}  // namespace

TEST_CASE("round trip through the reader: every width, both byte orders, build IDs") {
  const std::vector<uint8_t> id20 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0xff};
  for (Endian endian : {Endian::Little, Endian::Big}) {
    CAPTURE(int(endian));
    // The last function start decides the width; sample functions reach
    // base + 0x30040, so width 1 needs a layout of its own below.
    check_round_trip(endian, 0x400000, 0xfff0, {}, 4);
    check_round_trip(endian, 0x1000, 0x40000, id20, 4);
    check_round_trip(endian, 0x10000, 0x1ffff0000, {0xaa}, 8);
    check_round_trip(endian, 0, 0xfffffff0, id20, 4);
  }
}

TEST_CASE("round trip: 1- and 2-byte address offsets") {
  for (Endian endian : {Endian::Little, Endian::Big}) {
    for (uint64_t last : {uint64_t(0xf0), uint64_t(0xfff0)}) {
      BuilderOptions options;
      options.endian = endian;
      Builder b(options);
      b.add_file({"/d", "a.c"});
      Function first{{0x7000, 0x7010}, "first", {{0x7000, 1, 1}, {0x700f, 0, 2}}, std::nullopt, {}, {}};
      Function second{{0x7000 + last, 0x7000 + last + 4}, "second", {}, std::nullopt, {}, {}};
      REQUIRE(b.add_function(second).ok());
      REQUIRE(b.add_function(first).ok());
      auto bytes = b.encode();
      REQUIRE(bytes.ok());
      auto reader = Reader::parse(*bytes);
      REQUIRE(reader.ok());
      CHECK(reader->header().addr_off_size == (last <= 0xff ? 1 : 2));
      REQUIRE(reader->function_count() == 2);
      CHECK(*reader->decode_function(0) == first);
      CHECK(*reader->decode_function(1) == second);
    }
  }
}

TEST_CASE("round trip: lookups see the encoded inline chain") {
  Builder b;
  for (const FileEntry& f : kFiles) b.add_file(f);
  for (const Function& f : sample_functions(0x10000, 0x40000)) REQUIRE(b.add_function(f).ok());
  auto bytes = b.encode();
  REQUIRE(bytes.ok());
  auto reader = Reader::parse(*bytes);
  REQUIRE(reader.ok());
  // 0x10014 is inside inl_1..inl_5's first ranges (each starts 1 byte deeper:
  // 0x10010, 0x10011, ... 0x10014); inl_6 starts at 0x10015.
  auto result = reader->lookup(0x10014);
  REQUIRE(result.ok());
  REQUIRE(result->has_value());
  const auto& frames = (*result)->frames;
  std::vector<std::string> names;
  for (const auto& f : frames) names.emplace_back(f.name);
  CHECK(names == std::vector<std::string>{"inl_5", "inl_4", "inl_3", "inl_2", "inl_1", "deep"});
  CHECK(frames[0].line == 3);  // last row at 0x10003 (same-address rows: last wins)
  CHECK(frames[0].basename == "util.h");
  CHECK(frames[0].offset == 0);
  CHECK(frames.back().offset == 0x14);
  CHECK(frames.back().line == 107);  // inl_1's call site: util.h:107
  CHECK(frames.back().basename == "util.h");
}

namespace {

// Random inline subtree whose ranges nest inside `parent`'s ranges.
InlineNode random_node(std::mt19937_64& rng, const std::vector<AddressRange>& parent, int depth) {
  InlineNode node;
  node.name = "n" + std::to_string(rng() % 50);
  node.call_file = static_cast<uint32_t>(rng() % kFiles.size());
  node.call_line = static_cast<uint32_t>(rng() % 3 ? rng() % 2000 : rng());
  for (const AddressRange& p : parent) {
    if (p.size() < 4 || rng() % 3 == 0) continue;
    uint64_t a = p.start + rng() % (p.size() / 2);
    uint64_t b = a + 1 + rng() % (p.end - a - 1);
    node.ranges.push_back({a, b});
  }
  if (node.ranges.empty()) node.ranges.push_back({parent.front().start, parent.front().start + 1});
  // Several children may share addresses (LLVM does not forbid it).
  if (depth < 6)
    for (uint64_t n = rng() % 3; n-- > 0;) node.children.push_back(random_node(rng, node.ranges, depth + 1));
  return node;
}

}  // namespace

TEST_CASE("round trip: random line tables and inline trees decode to the model") {
  std::mt19937_64 rng(12345);
  for (Endian endian : {Endian::Little, Endian::Big}) {
    BuilderOptions options;
    options.endian = endian;
    Builder b(options);
    for (const FileEntry& f : kFiles) b.add_file(f);
    uint64_t start = 0x100000;
    for (int i = 0; i < 300; ++i) {
      Function f;
      const uint64_t size = 1 + rng() % (i % 10 == 0 ? 0x100000 : 0x400);
      f.range = {start, start + size};
      f.name = "fn" + std::to_string(i);
      uint64_t addr = start;
      uint32_t line = static_cast<uint32_t>(rng() % 100000);
      for (uint64_t rows = rng() % 60; rows-- > 0;) {
        f.lines.push_back({addr, static_cast<uint32_t>(rng() % kFiles.size()), line});
        const uint64_t kind = rng() % 10;
        addr += kind < 6 ? rng() % 16 : kind < 9 ? rng() % 300 : rng() % (size / 4 + 1);
        if (addr >= f.range.end) break;
        const int64_t jump = kind < 7 ? int64_t(rng() % 9) - 3 : int64_t(rng() % 200000) - 100000;
        line = static_cast<uint32_t>(int64_t(line) + jump);
      }
      if (rng() % 2) {
        InlineNode root{{f.range}, f.name, 0, 0, {}};
        for (uint64_t n = 1 + rng() % 3; n-- > 0;) root.children.push_back(random_node(rng, root.ranges, 1));
        f.inline_tree = root;
      }
      REQUIRE(b.add_function(f).ok());
      start += size + rng() % 64;
    }
    const std::vector<Function> expected = b.finalize();
    auto bytes = b.encode();
    REQUIRE(bytes.ok());
    auto reader = Reader::parse(*bytes);
    REQUIRE(reader.ok());
    REQUIRE(reader->function_count() == expected.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      auto decoded = reader->decode_function(i);
      REQUIRE_MESSAGE(decoded.ok(), decoded.error().message);
      if (!(*decoded == expected[i])) ++mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(reader->verify().ok());
  }
}
