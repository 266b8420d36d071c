// Builder::add_flat_function: a function given in flat form encodes to the
// same bytes as the same function given as a Function, mixes with rich
// functions under the same finalize rules, materializes exactly, rejects every
// malformed tree without changing the builder, and reads back through Reader.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gsym/base/huge_pages.h"
#include "gsym/builder/builder.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

// String offsets of the names every builder below interns, in this order
// (add_file first, then add_string), so that all builders share one table.
struct Names {
  uint32_t outer, inl_a, inl_b, inl_c, deep, deeper, bare, with_lines, zero;
};

Names intern(Builder& b) {
  CHECK(b.add_file({"/src", "main.c"}) == 1);
  CHECK(b.add_file({"/src", "util.h"}) == 2);
  CHECK(b.add_file({"/inc", "vec.h"}) == 3);
  Names n;
  n.outer = b.add_string("outer");
  n.inl_a = b.add_string("inl_a");
  n.inl_b = b.add_string("inl_b");
  n.inl_c = b.add_string("inl_c");
  n.deep = b.add_string("deep");
  n.deeper = b.add_string("deeper");
  n.bare = b.add_string("bare_sym");
  n.with_lines = b.add_string("with_lines");
  n.zero = b.add_string("zero");
  // "" 0, "/src" 1, "main.c" 6, "util.h" 13, "/inc" 20, "vec.h" 25, "outer" 31.
  CHECK(n.outer == 31);
  CHECK(n.inl_a == 37);
  return n;
}

// A flat function with its own storage.
struct OwnedFlat {
  AddressRange range;
  uint32_t name = 0;
  std::vector<LineEntry> lines;
  std::vector<FlatInlineNode> nodes;
  std::vector<AddressRange> ranges;

  FlatFunction view() const {
    FlatFunction f;
    f.range = range;
    f.name = name;
    f.lines = lines;
    f.inline_nodes = nodes;
    f.inline_ranges = ranges;
    return f;
  }
};

const std::vector<LineEntry> kOuterLines = {{0x1000, 1, 10}, {0x1010, 2, 20}, {0x1020, 3, 5},
                                            {0x1040, 1, 12}, {0x1080, 2, 21}, {0x10f0, 1, 30}};

// outer [0x1000, 0x1100), rows in three files, and a three-level inline tree:
//   outer
//     inl_a   {[0x1030,0x1040) [0x1010,0x1020) [0x1020,0x1028) [0x1050,0x1050)}
//       deep    {[0x1034,0x1038) [0x1012,0x1014)}
//         deeper  [0x1035,0x1036)
//       inl_c   [0x1020,0x1024)
//     inl_b   {[0x1060,0x1070) [0x1064,0x1080)}
//     (no name, call file 0) {[0x1090,0x1098) [0x1098,0x10a0)}
// The ranges as given are unsorted, touching, overlapping and empty.
Function rich_outer() {
  Function f;
  f.range = {0x1000, 0x1100};
  f.name = "outer";
  f.lines = kOuterLines;
  InlineNode deeper{{{0x1035, 0x1036}}, "deeper", 3, 7, {}};
  InlineNode deep{{{0x1034, 0x1038}, {0x1012, 0x1014}}, "deep", 2, 22, {deeper}};
  InlineNode inl_c{{{0x1020, 0x1024}}, "inl_c", 3, 40, {}};
  InlineNode inl_a{{{0x1030, 0x1040}, {0x1010, 0x1020}, {0x1020, 0x1028}, {0x1050, 0x1050}},
                   "inl_a", 1, 11, {deep, inl_c}};
  InlineNode inl_b{{{0x1060, 0x1070}, {0x1064, 0x1080}}, "inl_b", 2, 13, {}};
  InlineNode anonymous{{{0x1090, 0x1098}, {0x1098, 0x10a0}}, "", 0, 0, {}};
  f.inline_tree = InlineNode{{{0x1080, 0x1100}, {0x1000, 0x1080}}, "outer", 0, 0, {inl_a, inl_b, anonymous}};
  return f;
}

// The same function as the builder stores it: node ranges normalized.
Function normalized_outer() {
  Function f = rich_outer();
  InlineNode& root = *f.inline_tree;
  root.ranges = {{0x1000, 0x1100}};
  root.children[0].ranges = {{0x1010, 0x1028}, {0x1030, 0x1040}};
  root.children[0].children[0].ranges = {{0x1012, 0x1014}, {0x1034, 0x1038}};
  root.children[1].ranges = {{0x1060, 0x1080}};
  root.children[2].ranges = {{0x1090, 0x10a0}};
  return f;
}

// rich_outer() in flat form, written out by hand; the range list is not in
// node order and has an entry no node uses.
OwnedFlat flat_outer(const Names& n) {
  OwnedFlat f;
  f.range = {0x1000, 0x1100};
  f.name = n.outer;
  f.lines = kOuterLines;
  f.ranges = {
      {0x1060, 0x1070}, {0x1064, 0x1080},                                      // 0-1 inl_b
      {0x1080, 0x1100}, {0x1000, 0x1080},                                      // 2-3 outer
      {0xdead, 0xbeef},                                                        // 4 unused
      {0x1035, 0x1036},                                                        // 5 deeper
      {0x1030, 0x1040}, {0x1010, 0x1020}, {0x1020, 0x1028}, {0x1050, 0x1050},  // 6-9 inl_a
      {0x1034, 0x1038}, {0x1012, 0x1014},                                      // 10-11 deep
      {0x1020, 0x1024},                                                        // 12 inl_c
      {0x1090, 0x1098}, {0x1098, 0x10a0},                                      // 13-14 anonymous
  };
  //         ranges  name      call file, line  children
  f.nodes = {{2, 2, n.outer, 0, 0, 3},   {6, 4, n.inl_a, 1, 11, 2}, {10, 2, n.deep, 2, 22, 1},
             {5, 1, n.deeper, 3, 7, 0},  {12, 1, n.inl_c, 3, 40, 0}, {0, 2, n.inl_b, 2, 13, 0},
             {13, 2, 0, 0, 0, 0}};
  return f;
}

Function rich_bare() {
  Function f;
  f.range = {0x2000, 0x2010};
  f.name = "bare_sym";
  return f;
}
OwnedFlat flat_bare(const Names& n) {
  OwnedFlat f;
  f.range = {0x2000, 0x2010};
  f.name = n.bare;
  return f;
}

const std::vector<LineEntry> kWithLinesRows = {{0x1100, 2, 1}, {0x1100, 3, 2}, {0x1170, 1, 3}};
Function rich_with_lines() {
  Function f;
  f.range = {0x1100, 0x1180};
  f.name = "with_lines";
  f.lines = kWithLinesRows;
  return f;
}
OwnedFlat flat_with_lines(const Names& n) {
  OwnedFlat f;
  f.range = {0x1100, 0x1180};
  f.name = n.with_lines;
  f.lines = kWithLinesRows;
  return f;
}

// Zero-size, with one row at its start.
Function rich_zero() {
  Function f;
  f.range = {0x3000, 0x3000};
  f.name = "zero";
  f.lines = {{0x3000, 1, 99}};
  return f;
}
OwnedFlat flat_zero(const Names& n) {
  OwnedFlat f;
  f.range = {0x3000, 0x3000};
  f.name = n.zero;
  f.lines = {{0x3000, 1, 99}};
  return f;
}

std::vector<uint8_t> encode_ok(Builder& b) {
  auto bytes = b.encode();
  if (!bytes) FAIL("encode failed: " << bytes.error().message);
  return *bytes;
}

std::string flat_error(Builder& b, const OwnedFlat& f) {
  Status s = b.add_flat_function(f.view());
  return s ? std::string("(accepted)") : s.error().message;
}

// Any function in flat form, names interned through `b` (for tests where a
// hand-written flat copy adds nothing; every name must already be interned
// so that this does not change the string table).
OwnedFlat flatten(Builder& b, const Function& f) {
  OwnedFlat out;
  out.range = f.range;
  out.name = b.add_string(f.name);
  out.lines = f.lines;
  struct Walk {
    Builder& b;
    OwnedFlat& out;
    void node(const InlineNode& n) {
      out.nodes.push_back({static_cast<uint32_t>(out.ranges.size()), static_cast<uint32_t>(n.ranges.size()),
                           b.add_string(n.name), n.call_file, n.call_line,
                           static_cast<uint32_t>(n.children.size())});
      out.ranges.insert(out.ranges.end(), n.ranges.begin(), n.ranges.end());
      for (const InlineNode& child : n.children) node(child);
    }
  };
  if (f.inline_tree) Walk{b, out}.node(*f.inline_tree);
  return out;
}

}  // namespace

TEST_CASE("flat builder: a flat function encodes to the same bytes as the same Function") {
  for (Endian endian : {Endian::Little, Endian::Big}) {
    CAPTURE(int(endian));
    BuilderOptions options;
    options.endian = endian;
    Builder rich(options), flat(options);
    intern(rich);
    const Names n = intern(flat);
    REQUIRE(rich.add_function(rich_outer()).ok());
    REQUIRE(rich.add_function(rich_bare()).ok());
    REQUIRE(rich.add_function(rich_with_lines()).ok());
    REQUIRE(rich.add_function(rich_zero()).ok());
    // Another order: the output does not depend on it.
    REQUIRE(flat.add_flat_function(flat_zero(n).view()).ok());
    REQUIRE(flat.add_flat_function(flat_with_lines(n).view()).ok());
    REQUIRE(flat.add_flat_function(flat_bare(n).view()).ok());
    REQUIRE(flat.add_flat_function(flat_outer(n).view()).ok());
    CHECK(flat.function_count() == 4);
    const std::vector<uint8_t> expected = encode_ok(rich);
    CHECK(encode_ok(flat) == expected);
    // Node ranges given already normalized (sorted, non-empty, apart).
    Builder flat_normalized(options);
    intern(flat_normalized);
    const OwnedFlat normalized = flatten(flat_normalized, normalized_outer());
    REQUIRE(normalized.ranges.size() == 9);
    REQUIRE(flat_normalized.add_flat_function(normalized.view()).ok());
    for (const OwnedFlat& f : {flat_bare(n), flat_with_lines(n), flat_zero(n)})
      REQUIRE(flat_normalized.add_flat_function(f.view()).ok());
    CHECK(encode_ok(flat_normalized) == expected);
    // The flat copy's storage need not outlive the call.
    Builder from_temporaries(options);
    intern(from_temporaries);
    {
      OwnedFlat outer = flat_outer(n);
      REQUIRE(from_temporaries.add_flat_function(outer.view()).ok());
      std::fill(outer.ranges.begin(), outer.ranges.end(), AddressRange{0xdead, 0xbeef});
      std::fill(outer.nodes.begin(), outer.nodes.end(), FlatInlineNode{9, 9, 9, 9, 9, 9});
      std::fill(outer.lines.begin(), outer.lines.end(), LineEntry{9, 9, 9});
    }
    for (const OwnedFlat& f : {flat_bare(n), flat_with_lines(n), flat_zero(n)})
      REQUIRE(from_temporaries.add_flat_function(f.view()).ok());
    CHECK(encode_ok(from_temporaries) == expected);
  }
  SUBCASE("each function alone") {
    Builder probe;
    const Names n = intern(probe);
    const std::vector<std::pair<Function, OwnedFlat>> pairs = {
        {rich_outer(), flat_outer(n)}, {rich_bare(), flat_bare(n)},
        {rich_with_lines(), flat_with_lines(n)}, {rich_zero(), flat_zero(n)}};
    for (const auto& [function, flat_function] : pairs) {
      CAPTURE(function.name);
      Builder rich, flat;
      intern(rich);
      intern(flat);
      REQUIRE(rich.add_function(function).ok());
      REQUIRE(flat.add_flat_function(flat_function.view()).ok());
      CHECK(encode_ok(flat) == encode_ok(rich));
    }
  }
}

TEST_CASE("flat builder: finalize() materializes flat functions exactly") {
  Builder b;
  const Names n = intern(b);
  REQUIRE(b.add_flat_function(flat_zero(n).view()).ok());
  REQUIRE(b.add_flat_function(flat_outer(n).view()).ok());
  REQUIRE(b.add_flat_function(flat_bare(n).view()).ok());
  CHECK(b.finalized_count() == 3);
  const std::vector<Function> expected = {normalized_outer(), rich_bare(), rich_zero()};
  CHECK(b.finalize() == expected);
  CHECK(b.finalize() == expected);  // idempotent
  CHECK(b.finalized_count() == b.finalize().size());

  // Adding after finalize() is seen by the next finalize.
  REQUIRE(b.add_flat_function(flat_with_lines(n).view()).ok());
  CHECK(b.finalized_count() == 4);
  const std::vector<Function>& again = b.finalize();
  REQUIRE(again.size() == 4);
  CHECK(again[0] == normalized_outer());
  CHECK(again[1] == rich_with_lines());
  CHECK(again[2] == rich_bare());
  CHECK(again[3] == rich_zero());

  // The same as a builder fed the Functions.
  Builder rich;
  intern(rich);
  for (const Function& f : {rich_outer(), rich_bare(), rich_zero(), rich_with_lines()})
    REQUIRE(rich.add_function(f).ok());
  CHECK(rich.finalize() == b.finalize());

  SUBCASE("counts after de-duplication") {
    Builder d;
    const Names dn = intern(d);
    for (int i = 0; i < 3; ++i) REQUIRE(d.add_flat_function(flat_outer(dn).view()).ok());
    REQUIRE(d.add_flat_function(flat_bare(dn).view()).ok());
    OwnedFlat alias = flat_bare(dn);
    alias.name = dn.deep;  // same range, another name
    REQUIRE(d.add_flat_function(alias.view()).ok());
    CHECK(d.function_count() == 5);
    CHECK(d.finalized_count() == 2);
    CHECK(d.finalize().size() == 2);
    CHECK(d.finalize()[1].name == "deep");  // "deep" > "bare_sym"
  }
}

namespace {

// Inputs for the mixed test; `flat` marks those that are added in flat form.
struct Input {
  Function function;
  bool flat;
};

Function named(uint64_t start, uint64_t end, std::string name, std::vector<LineEntry> lines = {}) {
  Function f;
  f.range = {start, end};
  f.name = std::move(name);
  f.lines = std::move(lines);
  return f;
}

std::vector<Input> mixed_inputs() {
  std::vector<Input> in;
  // One range, three records: a bare symbol, then the full function twice
  // (identical: one is dropped), the later richer one wins.
  in.push_back({named(0x1000, 0x1100, "outer"), true});
  in.push_back({rich_outer(), false});
  in.push_back({rich_outer(), true});
  // Bare aliases: the greatest name wins, flat or not.
  in.push_back({named(0x2000, 0x2010, "alias_a"), true});
  in.push_back({named(0x2000, 0x2010, "alias_z"), false});
  in.push_back({named(0x2000, 0x2010, "alias_m"), true});
  in.push_back({named(0x2100, 0x2110, "alias_z"), true});
  in.push_back({named(0x2100, 0x2110, "alias_a"), false});
  // Equal LLVM keys (range, no tree, row addresses): the content decides.
  in.push_back({named(0x4000, 0x4010, "dup", {{0x4000, 1, 6}}), false});
  in.push_back({named(0x4000, 0x4010, "dup", {{0x4000, 1, 5}}), true});
  in.push_back({named(0x4100, 0x4110, "dup", {{0x4100, 2, 5}}), true});
  in.push_back({named(0x4100, 0x4110, "dup", {{0x4100, 1, 5}}), false});
  // Same range and tree size, different child names.
  Function t_a = named(0x5000, 0x5020, "t5", {{0x5000, 1, 1}});
  t_a.inline_tree = InlineNode{{{0x5000, 0x5020}}, "t5", 0, 0, {InlineNode{{{0x5004, 0x5008}}, "inl_a", 1, 3, {}}}};
  Function t_b = t_a;
  t_b.inline_tree->children[0].name = "inl_b";
  in.push_back({t_b, false});
  in.push_back({t_a, true});
  Function t_c = t_a;  // call line only
  t_c.range = {0x5100, 0x5120};
  t_c.lines = {{0x5100, 1, 1}};
  t_c.inline_tree = InlineNode{{{0x5100, 0x5120}}, "t5", 0, 0, {InlineNode{{{0x5104, 0x5108}}, "inl_a", 1, 4, {}}}};
  Function t_d = t_c;
  t_d.inline_tree->children[0].call_line = 3;
  in.push_back({t_c, true});
  in.push_back({t_d, false});
  // Flat against flat, differing in one field each: the greater wins.
  Function t_e = named(0x5200, 0x5220, "t5");
  t_e.inline_tree = InlineNode{{{0x5200, 0x5220}}, "t5", 0, 0, {InlineNode{{{0x5204, 0x5209}}, "inl_a", 1, 3, {}}}};
  Function t_f = t_e;
  t_f.inline_tree->children[0].ranges = {{0x5204, 0x5208}};
  in.push_back({t_e, true});  // the greater child range
  in.push_back({t_f, true});
  Function t_g = t_e;
  t_g.range = {0x5300, 0x5320};
  t_g.inline_tree = InlineNode{{{0x5300, 0x5320}}, "t5", 0, 0, {InlineNode{{{0x5304, 0x5308}}, "inl_a", 2, 3, {}}}};
  Function t_h = t_g;
  t_h.inline_tree->children[0].call_file = 1;
  in.push_back({t_g, true});  // the greater call file
  in.push_back({t_h, true});
  Function t_i = t_g;
  t_i.range = {0x5400, 0x5420};
  t_i.inline_tree = InlineNode{{{0x5400, 0x5420}}, "t5", 0, 0, {InlineNode{{{0x5404, 0x5408}}, "inl_b", 1, 3, {}}}};
  Function t_j = t_i;
  t_j.inline_tree->children[0].name = "inl_a";
  in.push_back({t_i, true});  // the greater child name
  in.push_back({t_j, true});
  Function t_k = t_g;
  t_k.range = {0x5480, 0x54a0};
  t_k.inline_tree = InlineNode{{{0x5480, 0x54a0}}, "t5", 0, 0, {InlineNode{{{0x5484, 0x5488}}, "inl_a", 1, 9, {}}}};
  Function t_l = t_k;
  t_l.inline_tree->children[0].call_line = 8;
  in.push_back({t_k, true});  // the greater call line
  in.push_back({t_l, true});
  in.push_back({named(0x5500, 0x5510, "dup", {{0x5500, 1, 7}}), true});  // the greater line
  in.push_back({named(0x5500, 0x5510, "dup", {{0x5500, 1, 5}}), true});
  in.push_back({named(0x5600, 0x5610, "alias_m"), true});  // the greater name
  in.push_back({named(0x5600, 0x5610, "alias_a"), true});
  // A zero-size record swallowed by the sized one at its start; an
  // overlapping one kept.
  in.push_back({named(0x6000, 0x6000, "zero_in"), true});
  in.push_back({named(0x6000, 0x6040, "sized"), false});
  in.push_back({named(0x6010, 0x6020, "inner"), true});
  // A trailing zero-size flat record reaches the end of its text range.
  in.push_back({named(0x7000, 0x7000, "tail", {{0x7000, 2, 8}}), true});
  return in;
}

void intern_mixed(Builder& b) {
  intern(b);
  for (const char* s : {"alias_a", "alias_m", "alias_z", "dup", "t5", "zero_in", "sized", "inner", "tail"})
    b.add_string(s);
}

struct Built {
  std::vector<Function> finalized;
  std::vector<uint8_t> bytes;
  size_t count = 0;
};

Built build(const std::vector<Input>& inputs, const BuilderOptions& options, bool use_flat) {
  Builder b(options);
  intern_mixed(b);
  for (const Input& in : inputs) {
    if (use_flat && in.flat) {
      const OwnedFlat f = flatten(b, in.function);
      REQUIRE(b.add_flat_function(f.view()).ok());
    } else {
      REQUIRE(b.add_function(in.function).ok());
    }
  }
  Built out;
  out.count = b.finalized_count();
  out.finalized = b.finalize();
  out.bytes = encode_ok(b);
  return out;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

// One line per function: name, range, rows (file:line), the root's children
// (name, call file:line, ranges).
std::vector<std::string> summary(const std::vector<Function>& functions) {
  std::vector<std::string> out;
  for (const Function& f : functions) {
    std::string s = f.name + " [" + hex(f.range.start) + "," + hex(f.range.end) + ")";
    for (const LineEntry& row : f.lines) s += " " + std::to_string(row.file) + ":" + std::to_string(row.line);
    if (f.inline_tree)
      for (const InlineNode& child : f.inline_tree->children) {
        s += " {" + child.name + " " + std::to_string(child.call_file) + ":" + std::to_string(child.call_line);
        for (size_t i = 0; i < child.ranges.size(); ++i)
          s += (i ? "," : " ") + hex(child.ranges[i].start) + "-" + hex(child.ranges[i].end);
        s += "}";
      }
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("flat builder: flat and rich functions mixed follow the same finalize rules") {
  BuilderOptions options;
  options.text_ranges = {{0x7000, 0x7100}};
  const std::vector<Input> inputs = mixed_inputs();

  const Built rich = build(inputs, options, false);
  const Built mixed = build(inputs, options, true);
  CHECK(summary(rich.finalized) ==
        std::vector<std::string>{
            "outer [1000,1100) 1:10 2:20 3:5 1:12 2:21 1:30 {inl_a 1:11 1010-1028,1030-1040} "
            "{inl_b 2:13 1060-1080} { 0:0 1090-10a0}",
            "alias_z [2000,2010)",
            "alias_z [2100,2110)",
            "dup [4000,4010) 1:6",
            "dup [4100,4110) 2:5",
            "t5 [5000,5020) 1:1 {inl_b 1:3 5004-5008}",
            "t5 [5100,5120) 1:1 {inl_a 1:4 5104-5108}",
            "t5 [5200,5220) {inl_a 1:3 5204-5209}",
            "t5 [5300,5320) {inl_a 2:3 5304-5308}",
            "t5 [5400,5420) {inl_b 1:3 5404-5408}",
            "t5 [5480,54a0) {inl_a 1:9 5484-5488}",
            "dup [5500,5510) 1:7",
            "alias_m [5600,5610)",
            "sized [6000,6040)",
            "inner [6010,6020)",
            "tail [7000,7100) 2:8",
        });
  CHECK(rich.finalized[0] == normalized_outer());
  CHECK(mixed.finalized == rich.finalized);
  CHECK(mixed.count == 16);
  CHECK(rich.count == 16);
  CHECK(mixed.bytes == rich.bytes);

  // Reversed insertion order: the same result (ties broken by content).
  std::vector<Input> reversed(inputs.rbegin(), inputs.rend());
  const Built mixed_reversed = build(reversed, options, true);
  CHECK(mixed_reversed.finalized == rich.finalized);
  CHECK(mixed_reversed.bytes == rich.bytes);

  SUBCASE("insertion-order ties: LLVM's rule, later wins") {
    BuilderOptions llvm = options;
    llvm.insertion_order_ties = true;
    for (const auto& order : {inputs, reversed}) {
      const Built r = build(order, llvm, false);
      const Built m = build(order, llvm, true);
      CHECK(m.finalized == r.finalized);
      CHECK(m.bytes == r.bytes);
      CHECK(m.count == r.count);
    }
    const Built forward = build(inputs, llvm, true);
    const std::vector<std::string> names = summary(forward.finalized);
    REQUIRE(names.size() == 16);
    CHECK(names[1] == "alias_m [2000,2010)");
    CHECK(names[2] == "alias_a [2100,2110)");
    CHECK(names[3] == "dup [4000,4010) 1:5");
    CHECK(names[4] == "dup [4100,4110) 1:5");
    CHECK(names[7] == "t5 [5200,5220) {inl_a 1:3 5204-5208}");
    CHECK(names[10] == "t5 [5480,54a0) {inl_a 1:8 5484-5488}");
    CHECK(names[12] == "alias_a [5600,5610)");
  }
  SUBCASE("no de-duplication: every record kept, sorted") {
    BuilderOptions keep = options;
    keep.deduplicate = false;
    const Built r = build(inputs, keep, false);
    const Built m = build(inputs, keep, true);
    CHECK(m.count == inputs.size());
    CHECK(m.finalized.size() == inputs.size());
    CHECK(m.finalized == r.finalized);
    CHECK(m.bytes == r.bytes);
  }
}

TEST_CASE("flat builder: every rejected flat function leaves the builder unchanged") {
  Builder b, untouched;
  const Names n = intern(b);
  intern(untouched);
  REQUIRE(b.add_flat_function(flat_bare(n).view()).ok());
  REQUIRE(untouched.add_flat_function(flat_bare(n).view()).ok());
  const OwnedFlat good = flat_outer(n);
  // Node indices in flat_outer: 0 outer, 1 inl_a, 2 deep, 3 deeper, 4 inl_c,
  // 5 inl_b, 6 unnamed. Range indices: see flat_outer.
  const std::string in_outer = " in function \"outer\"";

  struct Case {
    const char* label;
    OwnedFlat function;
    std::string error;
  };
  std::vector<Case> cases;
  auto add = [&](const char* label, auto mutate, std::string error) {
    OwnedFlat f = good;
    mutate(f);
    cases.push_back({label, std::move(f), std::move(error)});
  };
  add("name 0", [](OwnedFlat& f) { f.name = 0; }, "function at 0x1000 has an empty name");
  add("name inside a string", [&](OwnedFlat& f) { f.name = n.outer + 1; },
      "function at 0x1000 has name offset 32, which is not a string added with add_string");
  add("name inside a file name", [](OwnedFlat& f) { f.name = 8; },
      "function at 0x1000 has name offset 8, which is not a string added with add_string");
  add("name at the end of the table", [&](OwnedFlat& f) { f.name = n.zero + 5; },
      "function at 0x1000 has name offset " + std::to_string(n.zero + 5) +
          ", which is not a string added with add_string");
  add("name far outside the table", [](OwnedFlat& f) { f.name = 0xfffffff0; },
      "function at 0x1000 has name offset 4294967280, which is not a string added with add_string");
  add("reversed range", [](OwnedFlat& f) { f.range = {0x1100, 0x1000}; },
      "function \"outer\" has a reversed range [0x1100, 0x1000)");
  add("4 GiB", [](OwnedFlat& f) { f.range.end = f.range.start + 0x100000000; },
      "function \"outer\" is larger than 4 GiB - 1 (size 0x100000000)");
  add("row before the range", [](OwnedFlat& f) { f.lines[0].address = 0xfff; },
      "line row at 0xfff is outside the function range [0x1000, 0x1100)" + in_outer);
  add("row at the range end", [](OwnedFlat& f) { f.lines.back().address = 0x1100; },
      "line row at 0x1100 is outside the function range [0x1000, 0x1100)" + in_outer);
  add("descending rows", [](OwnedFlat& f) { f.lines[2].address = 0x100f; },
      "line rows are not in ascending address order (0x100f after 0x1010)" + in_outer);
  add("row file not in the table", [](OwnedFlat& f) { f.lines[1].file = 4; },
      "line row at 0x1010 uses file 4 but the file table has 4 entries" + in_outer);
  add("node ranges start past the list", [](OwnedFlat& f) { f.nodes[3].ranges_begin = 15; },
      "inline node \"deeper\" has ranges outside the range list" + in_outer);
  add("node ranges end past the list", [](OwnedFlat& f) { f.nodes[6].ranges_count = 3; },
      "inline node \"\" has ranges outside the range list" + in_outer);
  add("node ranges wrap around 32 bits",
      [](OwnedFlat& f) {
        f.nodes[6].ranges_begin = 0xffffffff;
        f.nodes[6].ranges_count = 2;
      },
      "inline node \"\" has ranges outside the range list" + in_outer);
  add("reversed node range", [](OwnedFlat& f) { f.ranges[8] = {0x1028, 0x1020}; },
      "inline node \"inl_a\" has a reversed range [0x1028, 0x1020)" + in_outer);
  add("reversed single range", [](OwnedFlat& f) { f.ranges[5] = {0x1036, 0x1035}; },
      "inline node \"deeper\" has a reversed range [0x1036, 0x1035)" + in_outer);
  add("sorted, apart ranges, one outside the parent",
      [](OwnedFlat& f) {
        f.ranges[10] = {0x1012, 0x1014};
        f.ranges[11] = {0x1034, 0x1041};
      },
      "inline range [0x1034, 0x1041) of \"deep\" is outside its parent" + in_outer);
  add("node without ranges", [](OwnedFlat& f) { f.nodes[6].ranges_count = 0; },
      "inline node \"\" has no non-empty range" + in_outer);
  add("node with only empty ranges", [](OwnedFlat& f) { f.ranges[5] = {0x1035, 0x1035}; },
      "inline node \"deeper\" has no non-empty range" + in_outer);
  add("root past the function", [](OwnedFlat& f) { f.ranges[2] = {0x1080, 0x1101}; },
      "inline range [0x1000, 0x1101) of \"outer\" is outside its parent" + in_outer);
  add("child across a gap of its parent's ranges", [](OwnedFlat& f) { f.ranges[12] = {0x1024, 0x1034}; },
      "inline range [0x1024, 0x1034) of \"inl_c\" is outside its parent" + in_outer);
  // Inside its grandparent inl_a, outside its parent deep.
  add("grandchild outside its parent", [](OwnedFlat& f) { f.ranges[5] = {0x1038, 0x1039}; },
      "inline range [0x1038, 0x1039) of \"deeper\" is outside its parent" + in_outer);
  add("call file not in the table", [](OwnedFlat& f) { f.nodes[5].call_file = 4; },
      "inline node \"inl_b\" has call file 4 but the file table has 4 entries" + in_outer);
  add("root call file not in the table", [](OwnedFlat& f) { f.nodes[0].call_file = 100; },
      "inline node \"outer\" has call file 100 but the file table has 4 entries" + in_outer);
  add("node name inside a string", [&](OwnedFlat& f) { f.nodes[4].name = n.inl_c + 1; },
      "inline node name offset " + std::to_string(n.inl_c + 1) + " is not an added string" + in_outer);
  add("more children than follow", [](OwnedFlat& f) { f.nodes[0].child_count = 4; },
      "an inline node declares more children than follow it" + in_outer);
  add("last node claims a child", [](OwnedFlat& f) { f.nodes[6].child_count = 1; },
      "an inline node declares more children than follow it" + in_outer);
  add("tree cut short", [](OwnedFlat& f) { f.nodes.resize(4); },
      "an inline node declares more children than follow it" + in_outer);
  add("nodes after the end of the tree", [](OwnedFlat& f) { f.nodes[0].child_count = 2; },
      "inline nodes follow the end of the tree" + in_outer);
  add("a second root", [](OwnedFlat& f) { f.nodes[0].child_count = 0; },
      "inline nodes follow the end of the tree" + in_outer);
  add("too deep", [](OwnedFlat& f) {
        f.nodes.assign(Builder::kMaxInlineDepth + 1, FlatInlineNode{2, 2, f.name, 1, 1, 1});
        f.nodes.back().child_count = 0;
      },
      "inline tree deeper than 256 levels" + in_outer);

  for (const Case& c : cases) {
    CAPTURE(c.label);
    CHECK(flat_error(b, c.function) == c.error);
    CHECK(b.function_count() == 1);
  }
  CHECK(b.finalized_count() == 1);
  CHECK(encode_ok(b) == encode_ok(untouched));

  // Still fully usable: the good function lands exactly as in the builder
  // that never saw a bad call.
  REQUIRE(b.add_flat_function(good.view()).ok());
  REQUIRE(untouched.add_flat_function(good.view()).ok());
  CHECK(b.finalize() == untouched.finalize());
  CHECK(encode_ok(b) == encode_ok(untouched));
}

TEST_CASE("flat builder: the depth limit and sizes at the limits") {
  Builder probe;
  const Names n = intern(probe);
  // A chain of kMaxInlineDepth nodes is accepted and encodes like the same
  // chain given as a Function.
  OwnedFlat chain;
  chain.range = {0x1000, 0x1100};
  chain.name = n.outer;
  chain.ranges = {{0x1000, 0x1100}, {0x1000 + 0x80, 0x1000 + 0x90}};
  chain.nodes.assign(Builder::kMaxInlineDepth, FlatInlineNode{1, 1, n.deep, 2, 9, 1});
  chain.nodes.front() = {0, 1, n.outer, 0, 0, 1};
  chain.nodes.back().child_count = 0;
  Function rich = named(0x1000, 0x1100, "outer");
  rich.inline_tree = InlineNode{{{0x1000, 0x1100}}, "outer", 0, 0, {}};
  InlineNode* node = &*rich.inline_tree;
  for (size_t i = 1; i < Builder::kMaxInlineDepth; ++i) {
    node->children.push_back(InlineNode{{{0x1080, 0x1090}}, "deep", 2, 9, {}});
    node = &node->children.back();
  }
  Builder flat_builder, rich_builder;
  intern(flat_builder);
  intern(rich_builder);
  REQUIRE(flat_builder.add_flat_function(chain.view()).ok());
  REQUIRE(rich_builder.add_function(rich).ok());
  CHECK(flat_builder.finalize() == rich_builder.finalize());
  CHECK(encode_ok(flat_builder) == encode_ok(rich_builder));

  // The largest size version 1 can hold.
  Builder big;
  const Names bn = intern(big);
  OwnedFlat largest;
  largest.range = {0x10000, 0x10000 + 0xffffffffull};
  largest.name = bn.bare;
  largest.lines = {{0x10000, 1, 1}, {0x10000 + 0xfffffffeull, 1, 2}};
  CHECK(flat_error(big, largest) == "(accepted)");
  CHECK(big.finalize()[0].range.size() == 0xffffffffull);
}

namespace {

std::string frames_text(const Reader& reader, uint64_t addr) {
  auto found = reader.lookup(addr);
  if (!found) return "error: " + found.error().message;
  if (!*found) return "(none)";
  std::string out;
  for (const LookupFrame& f : (*found)->frames) {
    out += std::string(f.name) + " +" + std::to_string(f.offset);
    if (!f.directory.empty() || !f.basename.empty())
      out += " " + std::string(f.directory) + "/" + std::string(f.basename) + ":" + std::to_string(f.line);
    out += f.inlined ? " inlined\n" : "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("flat builder: Reader answers lookups in flat-built bytes") {
  for (Endian endian : {Endian::Little, Endian::Big}) {
    CAPTURE(int(endian));
    BuilderOptions options;
    options.endian = endian;
    Builder b(options);
    const Names n = intern(b);
    for (const OwnedFlat& f : {flat_outer(n), flat_bare(n), flat_with_lines(n)})
      REQUIRE(b.add_flat_function(f.view()).ok());
    const std::vector<uint8_t> bytes = encode_ok(b);
    auto reader = Reader::parse(bytes);
    REQUIRE(reader.ok());
    CHECK(reader->function_count() == 3);
    auto report = reader->verify();
    REQUIRE(report.ok());
    CHECK(report->inline_nodes == 7);
    CHECK(report->line_rows == 9);

    // Innermost first; each outer frame gets the call site of the frame
    // inside it, offsets from each frame's first range start.
    CHECK(frames_text(*reader, 0x1035) ==
          "deeper +0 /inc/vec.h:5 inlined\n"
          "deep +35 /inc/vec.h:7 inlined\n"
          "inl_a +37 /src/util.h:22 inlined\n"
          "outer +53 /src/main.c:11\n");
    CHECK(frames_text(*reader, 0x1013) ==
          "deep +1 /src/util.h:20 inlined\n"
          "inl_a +3 /src/util.h:22 inlined\n"
          "outer +19 /src/main.c:11\n");
    CHECK(frames_text(*reader, 0x1022) ==
          "inl_c +2 /inc/vec.h:5 inlined\n"
          "inl_a +18 /inc/vec.h:40 inlined\n"
          "outer +34 /src/main.c:11\n");
    CHECK(frames_text(*reader, 0x1065) ==
          "inl_b +5 /src/main.c:12 inlined\n"
          "outer +101 /src/util.h:13\n");
    // The unnamed node has call file 0: it adds no frame.
    CHECK(frames_text(*reader, 0x1095) == "outer +149 /src/util.h:21\n");
    // In inl_a's range list but in none of its normalized ranges.
    CHECK(frames_text(*reader, 0x102a) == "outer +42 /inc/vec.h:5\n");
    CHECK(frames_text(*reader, 0x1170) == "with_lines +112 /src/main.c:3\n");
    CHECK(frames_text(*reader, 0x2005) == "bare_sym +5\n");
    CHECK(frames_text(*reader, 0x1180) == "(none)");
    CHECK(frames_text(*reader, 0xfff) == "(none)");

    auto decoded = reader->decode_function(0);
    REQUIRE(decoded.ok());
    CHECK(*decoded == normalized_outer());
  }
}

TEST_CASE("flat builder: names anywhere in a large string table") {
  // Hundreds of strings of assorted lengths: string starts on both sides of
  // every 64-byte boundary.
  Builder rich, flat;
  std::vector<std::string> names;
  for (int i = 0; i < 600; ++i)
    names.push_back(std::string(1 + (i * 37) % 150, char('a' + i % 26)) + std::to_string(i));
  std::vector<uint32_t> offsets;
  uint64_t next_offset = 1;
  for (const std::string& name : names) {
    const uint32_t offset = flat.add_string(name);
    CHECK(rich.add_string(name) == offset);
    CHECK(offset == next_offset);
    next_offset += name.size() + 1;
    offsets.push_back(offset);
  }
  CHECK(flat.add_string(names[17]) == offsets[17]);  // interned once

  for (size_t i = 0; i < names.size(); ++i) {
    CAPTURE(i);
    const uint64_t start = 0x10000 + 0x100 * i;
    const size_t child = (i * 7 + 3) % names.size();
    OwnedFlat f;
    f.range = {start, start + 0x100};
    f.ranges = {{start, start + 0x100}, {start + 0x10, start + 0x20}};
    f.nodes = {{0, 1, offsets[i], 0, 0, 1}, {1, 1, offsets[child], 0, 0, 0}};
    // Inside a name, or on the NUL before it: not a string start.
    f.name = offsets[i] + 1;
    CHECK(flat_error(flat, f) == "function at " + ("0x" + hex(start)) + " has name offset " +
                                     std::to_string(offsets[i] + 1) +
                                     ", which is not a string added with add_string");
    f.name = offsets[i] - 1;
    if (i > 0) CHECK(flat_error(flat, f) != "(accepted)");
    f.name = offsets[i];
    f.nodes[1].name = offsets[child] + 2;
    CHECK(flat_error(flat, f) == "inline node name offset " + std::to_string(offsets[child] + 2) +
                                     " is not an added string in function \"" + names[i] + "\"");
    f.nodes[1].name = offsets[child];
    CHECK(flat_error(flat, f) == "(accepted)");

    Function g = named(start, start + 0x100, names[i]);
    g.inline_tree = InlineNode{{{start, start + 0x100}}, names[i], 0, 0,
                               {InlineNode{{{start + 0x10, start + 0x20}}, names[child], 0, 0, {}}}};
    REQUIRE(rich.add_function(g).ok());
  }
  CHECK(flat.function_count() == names.size());
  CHECK(encode_ok(flat) == encode_ok(rich));
}

TEST_CASE("flat builder: rows in an adopted block are referenced and encode like copied ones") {
  Builder copied, adopting;
  intern(copied);
  const Names n = intern(adopting);
  for (const OwnedFlat& f : {flat_outer(n), flat_with_lines(n), flat_zero(n), flat_bare(n)})
    REQUIRE(copied.add_flat_function(f.view()).ok());

  // Every function's rows, one after another, in one block (as a converted
  // unit's); outer's rows are written after adopting, before it is added.
  const OwnedFlat outer = flat_outer(n), with_lines = flat_with_lines(n), zero = flat_zero(n);
  HugePageVector<LineEntry> block;
  block.insert(block.end(), outer.lines.size(), LineEntry{});
  block.insert(block.end(), with_lines.lines.begin(), with_lines.lines.end());
  block.insert(block.end(), zero.lines.begin(), zero.lines.end());
  const LineEntry* const stored = block.data();
  const std::span<LineEntry> rows = adopting.adopt_line_rows(std::move(block));
  REQUIRE(rows.data() == stored);  // the block itself, not a copy
  REQUIRE(rows.size() == outer.lines.size() + with_lines.lines.size() + zero.lines.size());
  std::copy(outer.lines.begin(), outer.lines.end(), rows.begin());
  auto add_with_rows = [&](const OwnedFlat& f, std::span<const LineEntry> lines) {
    FlatFunction view = f.view();
    view.lines = lines;
    return adopting.add_flat_function(view);
  };
  REQUIRE(add_with_rows(outer, rows.subspan(0, outer.lines.size())).ok());
  REQUIRE(add_with_rows(with_lines, rows.subspan(outer.lines.size(), with_lines.lines.size())).ok());
  // Rows reaching past the block's end are not the block's: copied.
  std::vector<LineEntry> tail(rows.end() - 1, rows.end());
  REQUIRE(add_with_rows(zero, tail).ok());
  REQUIRE(adopting.add_flat_function(flat_bare(n).view()).ok());
  // A rejected function references nothing: the builder is unchanged.
  CHECK(!add_with_rows(with_lines, rows.subspan(0, 2)).ok());
  CHECK(encode_ok(adopting) == encode_ok(copied));
  CHECK(adopting.finalize() == copied.finalize());
}

TEST_CASE("huge page vector: large blocks start on a 2 MiB boundary and keep their contents when grown") {
  HugePageVector<uint64_t> small(16, 7);
  CHECK(small[15] == 7);
  HugePageVector<uint64_t> large;
  const size_t count = huge_pages::kMinBytes / sizeof(uint64_t) + 5;
  large.reserve(count);
  CHECK(reinterpret_cast<uintptr_t>(large.data()) % (uintptr_t{2} << 20) == 0);
  for (size_t i = 0; i < count; ++i) large.push_back(i * 3);
  large.push_back(1);  // past the reservation: a new block, the rows copied
  CHECK(reinterpret_cast<uintptr_t>(large.data()) % (uintptr_t{2} << 20) == 0);
  bool intact = true;
  for (size_t i = 0; i < count; ++i) intact = intact && large[i] == i * 3;
  CHECK(intact);
  CHECK(large.back() == 1);
  HugePageVector<uint64_t> moved = std::move(large);
  CHECK(moved.size() == count + 1);
}

TEST_CASE("flat builder: names of flat functions are read back by offset across the string table") {
  // Strings of 1 to 90 bytes: several start in one 64-byte word of the
  // table, others span words; each function is named by one of them.
  Builder b;
  std::vector<std::string> names;
  std::vector<uint32_t> offsets;
  for (size_t i = 0; i < 300; ++i) {
    names.push_back(std::string(1 + (i * 37) % 90, char('a' + i % 26)) + std::to_string(i));
    offsets.push_back(b.add_string(names.back()));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    FlatFunction f;
    f.range = {0x1000 + 0x10 * i, 0x1000 + 0x10 * i + 8};
    f.name = offsets[i];
    REQUIRE(b.add_flat_function(f).ok());
  }
  const std::vector<Function>& functions = b.finalize();
  REQUIRE(functions.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) CHECK(functions[i].name == names[i]);
}
