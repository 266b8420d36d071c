// DwarfDieWalker: exact step sequences over hand-assembled .debug_abbrev and
// .debug_info bytes (tree shape, every form's skip length, proved by the
// offset of the DIE that follows) and malformed input (each case ends the
// walk with an error and never reads outside the spans it was given).
#include <doctest/doctest.h>

#include <dwarf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gsym/convert/dwarf_die_walker.h"

using namespace gsym;

namespace {

struct Bytes {
  std::vector<uint8_t> v;

  size_t size() const { return v.size(); }
  Bytes& u8(uint8_t b) {
    v.push_back(b);
    return *this;
  }
  Bytes& raw(std::initializer_list<uint8_t> bytes) {
    v.insert(v.end(), bytes.begin(), bytes.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& bytes) {
    v.insert(v.end(), bytes.begin(), bytes.end());
    return *this;
  }
  Bytes& fill(size_t n, uint8_t b) {
    v.insert(v.end(), n, b);
    return *this;
  }
  Bytes& uleb(uint64_t value) {
    do {
      uint8_t b = value & 0x7f;
      value >>= 7;
      if (value) b |= 0x80;
      v.push_back(b);
    } while (value);
    return *this;
  }
  Bytes& sleb(int64_t value) {
    for (;;) {
      uint8_t b = value & 0x7f;
      value >>= 7;  // arithmetic shift
      const bool done = (value == 0 && !(b & 0x40)) || (value == -1 && (b & 0x40));
      v.push_back(done ? b : uint8_t(b | 0x80));
      if (done) return *this;
    }
  }
  Bytes& str(const char* s) {
    v.insert(v.end(), s, s + std::strlen(s) + 1);
    return *this;
  }
};

struct AttrSpec {
  AttrSpec(uint64_t name_, uint64_t form_) : name(name_), form(form_) {}
  AttrSpec(uint64_t name_, uint64_t form_, int64_t value) : name(name_), form(form_), implicit_const(value) {}
  uint64_t name;
  uint64_t form;
  std::optional<int64_t> implicit_const;
};

// One abbreviation declaration, terminated by the (0, 0) attribute pair.
void abbrev(Bytes& table, uint64_t code, uint64_t tag, bool children,
            const std::vector<AttrSpec>& attrs) {
  table.uleb(code).uleb(tag).u8(children ? DW_CHILDREN_yes : DW_CHILDREN_no);
  for (const AttrSpec& a : attrs) {
    table.uleb(a.name).uleb(a.form);
    if (a.implicit_const) table.sleb(*a.implicit_const);
  }
  table.u8(0).u8(0);
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

// Expected-step text, one line per step.
std::string die(uint64_t offset, uint32_t tag, bool children = false) {
  return "Die " + hex(offset) + " tag " + hex(tag) + (children ? " children" : "") + "\n";
}
std::string end_of_children(uint64_t offset) { return "EndOfChildren " + hex(offset) + "\n"; }
const std::string kEnd = "End\n";

struct Walk {
  bool started = false;
  std::string steps;
  bool ok = false;
  std::string error;
};

// Heap copies of exactly the given size, so that any read past a span is a
// heap overflow under ASan.
struct ExactBuffer {
  explicit ExactBuffer(const std::vector<uint8_t>& bytes)
      : size(bytes.size()), data(std::make_unique<uint8_t[]>(bytes.size())) {
    if (size) std::memcpy(data.get(), bytes.data(), size);
  }
  size_t size;
  std::unique_ptr<uint8_t[]> data;
};

Walk run(DwarfDieWalker& walker, std::span<const uint8_t> abbrevs, uint64_t abbrev_offset,
         std::span<const uint8_t> unit, uint64_t first_die_offset, const DwarfUnitShape& shape) {
  Walk w;
  w.started = walker.start(abbrevs, abbrev_offset, unit, first_die_offset, shape);
  for (int i = 0; i < 100000; ++i) {
    const DwarfDieWalker::Step s = walker.next();
    switch (s.kind) {
      case DwarfDieWalker::Step::Die:
        w.steps += die(s.offset, s.tag, s.has_children);
        break;
      case DwarfDieWalker::Step::EndOfChildren:
        w.steps += end_of_children(s.offset);
        break;
      case DwarfDieWalker::Step::End:
        w.steps += kEnd;
        break;
    }
    if (s.kind == DwarfDieWalker::Step::End) {
      // End is final.
      for (int again = 0; again < 3; ++again)
        if (walker.next().kind != DwarfDieWalker::Step::End) w.steps += "(step after End)\n";
      break;
    }
  }
  w.ok = walker.ok();
  w.error = walker.error();
  return w;
}

// Walks exact-size copies of `abbrevs` and `unit`.
Walk walk(const Bytes& abbrevs, uint64_t abbrev_offset, const Bytes& unit, uint64_t first_die_offset,
          const DwarfUnitShape& shape = {}) {
  ExactBuffer a(abbrevs.v), u(unit.v);
  DwarfDieWalker walker;
  return run(walker, {a.data.get(), a.size}, abbrev_offset, {u.data.get(), u.size}, first_die_offset,
             shape);
}

// The same, but the unit span is followed in memory by `tail`: bytes that
// would let the walk go on if it read past the unit's end.
Walk walk_with_tail(const Bytes& abbrevs, const Bytes& unit, const std::vector<uint8_t>& tail,
                    uint64_t first_die_offset, const DwarfUnitShape& shape = {}) {
  Bytes joined = unit;
  joined.raw(tail);
  ExactBuffer a(abbrevs.v), u(joined.v);
  DwarfDieWalker walker;
  return run(walker, {a.data.get(), a.size}, 0, {u.data.get(), unit.size()}, first_die_offset, shape);
}

constexpr uint64_t kFirst = 0x0b;  // first DIE after a 32-bit DWARF 4 unit header

}  // namespace

TEST_CASE("DIE walker: pre-order steps, child-list ends and offsets of a nested unit") {
  Bytes abbrevs;
  // A decoy table at offset 0: the walker must read the one at the offset given.
  abbrev(abbrevs, 1, DW_TAG_base_type, false, {});
  abbrevs.u8(0);
  const uint64_t table = abbrevs.size();
  REQUIRE(table == 6);
  abbrev(abbrevs, 1, DW_TAG_compile_unit, true,
         {{DW_AT_producer, DW_FORM_strp}, {DW_AT_language, DW_FORM_data2}, {DW_AT_name, DW_FORM_string}});
  abbrev(abbrevs, 2, DW_TAG_subprogram, true,
         {{DW_AT_name, DW_FORM_strp},
          {DW_AT_low_pc, DW_FORM_addr},
          {DW_AT_high_pc, DW_FORM_data4},
          {DW_AT_frame_base, DW_FORM_exprloc}});
  abbrev(abbrevs, 3, DW_TAG_formal_parameter, false, {{DW_AT_name, DW_FORM_string}, {DW_AT_type, DW_FORM_ref4}});
  abbrev(abbrevs, 4, DW_TAG_inlined_subroutine, true,
         {{DW_AT_abstract_origin, DW_FORM_ref4},
          {DW_AT_low_pc, DW_FORM_addr},
          {DW_AT_high_pc, DW_FORM_udata},
          {DW_AT_call_file, DW_FORM_data1},
          {DW_AT_call_line, DW_FORM_udata}});
  abbrev(abbrevs, 5, DW_TAG_variable, false, {{DW_AT_name, DW_FORM_string}, {DW_AT_location, DW_FORM_exprloc}});
  abbrev(abbrevs, 6, DW_TAG_lexical_block, true, {{DW_AT_low_pc, DW_FORM_addr}, {DW_AT_high_pc, DW_FORM_data8}});
  abbrev(abbrevs, 7, DW_TAG_lexical_block, true, {});
  abbrev(abbrevs, 8, DW_TAG_GNU_call_site, false, {{DW_AT_low_pc, DW_FORM_addr}});  // two-byte tag
  abbrev(abbrevs, 200, DW_TAG_variable, false, {{DW_AT_name, DW_FORM_string}});      // two-byte code
  abbrev(abbrevs, 9, DW_TAG_partial_unit, false, {{DW_AT_name, DW_FORM_string}});
  abbrevs.u8(0);

  Bytes unit;
  std::string expected;
  auto at = [&] { return kFirst + unit.size(); };
  const uint8_t kFill = 0x7e;  // attribute bytes: an undefined code if mistaken for one

  expected += die(at(), DW_TAG_compile_unit, true);
  unit.uleb(1).fill(4, kFill).fill(2, kFill).str("t.c");
  expected += die(at(), DW_TAG_subprogram, true);
  CHECK(at() == 0x16);
  unit.uleb(2).fill(4, kFill).fill(8, kFill).fill(4, kFill).raw({1, DW_OP_call_frame_cfa});
  expected += die(at(), DW_TAG_formal_parameter);
  CHECK(at() == 0x29);
  unit.uleb(3).str("x").fill(4, kFill);
  expected += die(at(), DW_TAG_inlined_subroutine, true);
  unit.uleb(4).fill(4, kFill).fill(8, kFill).raw({0x90, 0x01}).u8(kFill).raw({0xff, 0xff, 0x03});
  expected += die(at(), DW_TAG_formal_parameter);
  unit.uleb(3).str("y").fill(4, kFill);
  expected += end_of_children(at());
  unit.u8(0);
  expected += die(at(), DW_TAG_GNU_call_site);
  unit.uleb(8).fill(8, kFill);
  expected += end_of_children(at());
  unit.u8(0);
  expected += die(at(), DW_TAG_variable);
  unit.uleb(200).str("g");
  expected += die(at(), DW_TAG_variable);
  unit.uleb(5).str("v").raw({9, DW_OP_addr}).fill(8, kFill);
  expected += die(at(), DW_TAG_lexical_block, true);
  unit.uleb(6).fill(16, kFill);
  expected += die(at(), DW_TAG_lexical_block, true);
  unit.uleb(6).fill(16, kFill);
  expected += die(at(), DW_TAG_variable);
  unit.uleb(5).str("").raw({0});
  expected += end_of_children(at());
  unit.u8(0);
  expected += die(at(), DW_TAG_lexical_block, true);  // children announced, list empty
  unit.uleb(7);
  expected += end_of_children(at());
  unit.u8(0);
  expected += end_of_children(at());  // outer lexical block
  unit.u8(0);
  expected += end_of_children(at());  // compile unit
  unit.u8(0);
  expected += kEnd;
  CHECK(at() == 0x90);
  unit.u8(0).u8(0);  // padding after the tree is not part of it

  const Walk w = walk(abbrevs, table, unit, kFirst);
  CHECK(w.started);
  CHECK(w.error == "");
  CHECK(w.ok);
  CHECK(w.steps == expected);

  SUBCASE("a unit DIE without children is the whole walk") {
    Bytes single;
    single.uleb(9).str("a.c").u8(5);  // a stray byte after it is never read
    const Walk s = walk(abbrevs, table, single, 0x1000);
    CHECK(s.ok);
    CHECK(s.steps == die(0x1000, DW_TAG_partial_unit) + kEnd);
  }
  SUBCASE("one walker walks unit after unit; start() clears an earlier error") {
    ExactBuffer a(abbrevs.v), u(unit.v);
    Bytes bad;
    bad.u8(0);
    ExactBuffer b(bad.v);
    DwarfDieWalker walker;
    const Walk first = run(walker, {a.data.get(), a.size}, table, {b.data.get(), b.size}, 0x20, {});
    CHECK_FALSE(first.ok);
    const Walk second = run(walker, {a.data.get(), a.size}, table, {u.data.get(), u.size}, kFirst, {});
    CHECK(second.ok);
    CHECK(second.error == "");
    CHECK(second.steps == expected);
    const Walk third = run(walker, {a.data.get(), a.size}, 0, {u.data.get(), u.size}, kFirst, {});
    // The decoy table: code 1 is a childless base type without attributes, so
    // the walk ends after its one byte.
    CHECK(third.ok);
    CHECK(third.steps == die(kFirst, DW_TAG_base_type) + kEnd);
  }
}

namespace {

struct FormCase {
  const char* label;
  DwarfUnitShape shape;
  std::vector<AttrSpec> attrs;
  std::vector<uint8_t> value;  // all attribute values of the DIE, in order
};

// A unit: unit DIE (code 1) { the DIE under test (code 2); a marker (code 3) }.
// The marker's offset proves how many bytes the walker skipped.
Walk walk_form(const FormCase& c, bool extra_udata) {
  Bytes abbrevs;
  abbrev(abbrevs, 1, DW_TAG_compile_unit, true, {});
  std::vector<AttrSpec> attrs = c.attrs;
  // A trailing variable-size attribute moves the DIE off the all-fixed fast
  // path onto the per-attribute skip.
  if (extra_udata) attrs.push_back({DW_AT_call_line, DW_FORM_udata});
  abbrev(abbrevs, 2, DW_TAG_variable, false, attrs);
  abbrev(abbrevs, 3, DW_TAG_pointer_type, false, {});
  abbrevs.u8(0);
  Bytes unit;
  unit.uleb(1).uleb(2).raw(c.value);
  if (extra_udata) unit.raw({0x85, 0x01});
  unit.uleb(3).u8(0);
  return walk(abbrevs, 0, unit, 0x40, c.shape);
}

std::string form_steps(size_t value_size) {
  return die(0x40, DW_TAG_compile_unit, true) + die(0x41, DW_TAG_variable) +
         die(0x42 + value_size, DW_TAG_pointer_type) + end_of_children(0x43 + value_size) + kEnd;
}

DwarfUnitShape shape(uint16_t version, uint8_t address_size, uint8_t offset_size, bool little = true) {
  DwarfUnitShape s;
  s.version = version;
  s.address_size = address_size;
  s.offset_size = offset_size;
  s.little_endian = little;
  return s;
}

std::vector<uint8_t> filled(size_t n) { return std::vector<uint8_t>(n, 0x7e); }

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("DIE walker: every form is skipped by its exact size") {
  const DwarfUnitShape v4 = shape(4, 8, 4);
  std::vector<FormCase> cases = {
      {"data1", v4, {{DW_AT_byte_size, DW_FORM_data1}}, filled(1)},
      {"data2", v4, {{DW_AT_byte_size, DW_FORM_data2}}, filled(2)},
      {"data4", v4, {{DW_AT_byte_size, DW_FORM_data4}}, filled(4)},
      {"data8", v4, {{DW_AT_byte_size, DW_FORM_data8}}, filled(8)},
      {"data16", shape(5, 8, 4), {{DW_AT_const_value, DW_FORM_data16}}, filled(16)},
      {"flag", v4, {{DW_AT_external, DW_FORM_flag}}, filled(1)},
      {"flag_present", v4, {{DW_AT_external, DW_FORM_flag_present}}, {}},
      {"ref1", v4, {{DW_AT_type, DW_FORM_ref1}}, filled(1)},
      {"ref2", v4, {{DW_AT_type, DW_FORM_ref2}}, filled(2)},
      {"ref4", v4, {{DW_AT_type, DW_FORM_ref4}}, filled(4)},
      {"ref8", v4, {{DW_AT_type, DW_FORM_ref8}}, filled(8)},
      {"ref_sig8", v4, {{DW_AT_type, DW_FORM_ref_sig8}}, filled(8)},
      {"ref_sup4", shape(5, 8, 4), {{DW_AT_type, DW_FORM_ref_sup4}}, filled(4)},
      {"ref_sup8", shape(5, 8, 4), {{DW_AT_type, DW_FORM_ref_sup8}}, filled(8)},
      {"ref_udata", v4, {{DW_AT_type, DW_FORM_ref_udata}}, {0xff, 0x80, 0x01}},
      {"addr, address_size 8", v4, {{DW_AT_low_pc, DW_FORM_addr}}, filled(8)},
      {"addr, address_size 4", shape(4, 4, 4), {{DW_AT_low_pc, DW_FORM_addr}}, filled(4)},
      {"strp, offset_size 4", shape(4, 8, 4), {{DW_AT_name, DW_FORM_strp}}, filled(4)},
      {"strp, offset_size 8", shape(4, 4, 8), {{DW_AT_name, DW_FORM_strp}}, filled(8)},
      {"line_strp, offset_size 8", shape(5, 4, 8), {{DW_AT_name, DW_FORM_line_strp}}, filled(8)},
      {"sec_offset, offset_size 4", shape(4, 8, 4), {{DW_AT_ranges, DW_FORM_sec_offset}}, filled(4)},
      {"sec_offset, offset_size 8", shape(4, 4, 8), {{DW_AT_ranges, DW_FORM_sec_offset}}, filled(8)},
      {"strp_sup, offset_size 8", shape(5, 4, 8), {{DW_AT_name, DW_FORM_strp_sup}}, filled(8)},
      {"GNU_strp_alt, offset_size 4", shape(4, 8, 4), {{DW_AT_name, DW_FORM_GNU_strp_alt}}, filled(4)},
      {"GNU_ref_alt, offset_size 8", shape(4, 4, 8), {{DW_AT_type, DW_FORM_GNU_ref_alt}}, filled(8)},
      // ref_addr was address-sized in DWARF 2, offset-sized from DWARF 3 on.
      {"ref_addr, version 2, address_size 8", shape(2, 8, 4), {{DW_AT_type, DW_FORM_ref_addr}}, filled(8)},
      {"ref_addr, version 2, address_size 4", shape(2, 4, 8), {{DW_AT_type, DW_FORM_ref_addr}}, filled(4)},
      {"ref_addr, version 3, offset_size 4", shape(3, 8, 4), {{DW_AT_type, DW_FORM_ref_addr}}, filled(4)},
      {"ref_addr, version 4, offset_size 8", shape(4, 4, 8), {{DW_AT_type, DW_FORM_ref_addr}}, filled(8)},
      {"implicit_const: no bytes in the DIE, a multi-byte SLEB in the abbreviation",
       shape(5, 8, 4),
       {{DW_AT_decl_line, DW_FORM_implicit_const, -200}, {DW_AT_byte_size, DW_FORM_data2}},
       filled(2)},
      {"implicit_const with a large positive value",
       shape(5, 8, 4),
       {{DW_AT_decl_line, DW_FORM_implicit_const, int64_t{1} << 62}, {DW_AT_byte_size, DW_FORM_data1}},
       filled(1)},
      {"strx1", shape(5, 8, 4), {{DW_AT_name, DW_FORM_strx1}}, filled(1)},
      {"strx2", shape(5, 8, 4), {{DW_AT_name, DW_FORM_strx2}}, filled(2)},
      {"strx3", shape(5, 8, 4), {{DW_AT_name, DW_FORM_strx3}}, filled(3)},
      {"strx4", shape(5, 8, 4), {{DW_AT_name, DW_FORM_strx4}}, filled(4)},
      {"addrx1", shape(5, 8, 4), {{DW_AT_low_pc, DW_FORM_addrx1}}, filled(1)},
      {"addrx2", shape(5, 8, 4), {{DW_AT_low_pc, DW_FORM_addrx2}}, filled(2)},
      {"addrx3", shape(5, 8, 4), {{DW_AT_low_pc, DW_FORM_addrx3}}, filled(3)},
      {"addrx4", shape(5, 8, 4), {{DW_AT_low_pc, DW_FORM_addrx4}}, filled(4)},
      {"udata, one byte", v4, {{DW_AT_decl_line, DW_FORM_udata}}, {0x7f}},
      {"udata, three bytes", v4, {{DW_AT_decl_line, DW_FORM_udata}}, {0x80, 0x80, 0x01}},
      {"udata, ten bytes", v4, {{DW_AT_decl_line, DW_FORM_udata}},
       {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
      {"sdata", v4, {{DW_AT_const_value, DW_FORM_sdata}}, {0xff, 0x7f}},
      {"strx", shape(5, 8, 4), {{DW_AT_name, DW_FORM_strx}}, {0x81, 0x02}},
      {"addrx", shape(5, 8, 4), {{DW_AT_low_pc, DW_FORM_addrx}}, {0x83, 0x80, 0x00}},
      {"loclistx", shape(5, 8, 4), {{DW_AT_location, DW_FORM_loclistx}}, {0x05}},
      {"rnglistx", shape(5, 8, 4), {{DW_AT_ranges, DW_FORM_rnglistx}}, {0x90, 0x03}},
      {"GNU_addr_index", v4, {{DW_AT_low_pc, DW_FORM_GNU_addr_index}}, {0xa0, 0x01}},
      {"GNU_str_index", v4, {{DW_AT_name, DW_FORM_GNU_str_index}}, {0x22}},
      {"string", v4, {{DW_AT_name, DW_FORM_string}}, {'a', 'b', 'c', 0}},
      {"empty string", v4, {{DW_AT_name, DW_FORM_string}}, {0}},
      {"block1", v4, {{DW_AT_location, DW_FORM_block1}}, {3, 0x7e, 0x7e, 0x7e}},
      {"block1, empty", v4, {{DW_AT_location, DW_FORM_block1}}, {0}},
      {"block2, little-endian length", v4, {{DW_AT_location, DW_FORM_block2}}, {2, 0, 0x7e, 0x7e}},
      {"block2, big-endian length", shape(4, 8, 4, false), {{DW_AT_location, DW_FORM_block2}},
       {0, 2, 0x7e, 0x7e}},
      {"block4, little-endian length", v4, {{DW_AT_location, DW_FORM_block4}}, {3, 0, 0, 0, 0x7e, 0x7e, 0x7e}},
      {"block4, big-endian length", shape(4, 8, 4, false), {{DW_AT_location, DW_FORM_block4}},
       {0, 0, 0, 3, 0x7e, 0x7e, 0x7e}},
      {"block2, 0x102 bytes", v4, {{DW_AT_location, DW_FORM_block2}}, cat({0x02, 0x01}, filled(0x102))},
      {"block, multi-byte ULEB length", v4, {{DW_AT_location, DW_FORM_block}},
       cat({0x81, 0x01}, filled(129))},
      {"exprloc", v4, {{DW_AT_location, DW_FORM_exprloc}}, {2, DW_OP_fbreg, 0x7e}},
      {"indirect to data2", v4, {{DW_AT_byte_size, DW_FORM_indirect}}, {DW_FORM_data2, 0x7e, 0x7e}},
      {"indirect to string", v4, {{DW_AT_name, DW_FORM_indirect}}, {DW_FORM_string, 'x', 0}},
      {"indirect to flag_present", v4, {{DW_AT_external, DW_FORM_indirect}}, {DW_FORM_flag_present}},
      {"indirect to addr", shape(4, 4, 4), {{DW_AT_low_pc, DW_FORM_indirect}},
       {DW_FORM_addr, 0x7e, 0x7e, 0x7e, 0x7e}},
      {"indirect to block1", v4, {{DW_AT_location, DW_FORM_indirect}}, {DW_FORM_block1, 1, 0x7e}},
      {"indirect to indirect to data1", v4, {{DW_AT_byte_size, DW_FORM_indirect}},
       {DW_FORM_indirect, DW_FORM_data1, 0x7e}},
      {"indirect: the longest chain allowed (four more indirections)", v4,
       {{DW_AT_byte_size, DW_FORM_indirect}},
       {DW_FORM_indirect, DW_FORM_indirect, DW_FORM_indirect, DW_FORM_indirect, DW_FORM_data1, 0x7e}},
      {"many attributes, fixed runs between variable ones",
       shape(5, 8, 4),
       {{DW_AT_byte_size, DW_FORM_data1},
        {DW_AT_decl_file, DW_FORM_data2},
        {DW_AT_decl_line, DW_FORM_udata},
        {DW_AT_type, DW_FORM_ref4},
        {DW_AT_external, DW_FORM_flag_present},
        {DW_AT_decl_column, DW_FORM_implicit_const, -5},
        {DW_AT_const_value, DW_FORM_data8},
        {DW_AT_name, DW_FORM_string},
        {DW_AT_low_pc, DW_FORM_addr},
        {DW_AT_location, DW_FORM_block1},
        {DW_AT_ranges, DW_FORM_sec_offset},
        {DW_AT_high_pc, DW_FORM_data4}},
       cat(cat(cat(filled(3), {0xe5, 0x8e, 0x26}), cat(filled(12), {'n', 0})),
           cat(filled(8), cat({2, 0x7e, 0x7e}, filled(8))))},
  };
  // More than 0xffff bytes of fixed-size values in one run: several skip ops.
  FormCase wide{"4200 data16 attributes", shape(5, 8, 4), {}, filled(4200 * 16)};
  wide.attrs.assign(4200, AttrSpec{DW_AT_const_value, DW_FORM_data16});
  cases.push_back(wide);

  for (const FormCase& c : cases) {
    for (bool extra_udata : {false, true}) {
      CAPTURE(c.label);
      CAPTURE(extra_udata);
      const Walk w = walk_form(c, extra_udata);
      CHECK(w.error == "");
      CHECK(w.steps == form_steps(c.value.size() + (extra_udata ? 2 : 0)));
    }
  }
}

TEST_CASE("DIE walker: block lengths follow the unit's byte order") {
  // The same bytes, read with the other byte order, give a length past the unit.
  FormCase block2{"block2", shape(4, 8, 4, false), {{DW_AT_location, DW_FORM_block2}}, {2, 0, 0x7e, 0x7e}};
  Walk w = walk_form(block2, false);
  CHECK_FALSE(w.ok);
  CHECK(w.error == "DIE at 0x41: cannot read an attribute of form 0x3");
  CHECK(w.steps == die(0x40, DW_TAG_compile_unit, true) + kEnd);
  FormCase block4{"block4", shape(4, 8, 4, true), {{DW_AT_location, DW_FORM_block4}}, {0, 0, 0, 3, 0x7e, 0x7e, 0x7e}};
  w = walk_form(block4, false);
  CHECK_FALSE(w.ok);
  CHECK(w.error == "DIE at 0x41: cannot read an attribute of form 0x4");
  CHECK(w.steps == die(0x40, DW_TAG_compile_unit, true) + kEnd);
}

namespace {

// The abbreviations most malformed units below use.
Bytes basic_abbrevs() {
  Bytes a;
  abbrev(a, 1, DW_TAG_compile_unit, true, {{DW_AT_name, DW_FORM_string}});
  abbrev(a, 2, DW_TAG_subprogram, true, {{DW_AT_low_pc, DW_FORM_addr}, {DW_AT_high_pc, DW_FORM_data4}});
  abbrev(a, 3, DW_TAG_variable, false, {{DW_AT_name, DW_FORM_string}, {DW_AT_location, DW_FORM_block1}});
  abbrev(a, 4, DW_TAG_formal_parameter, false, {{DW_AT_decl_line, DW_FORM_udata}, {DW_AT_type, DW_FORM_ref4}});
  abbrev(a, 5, DW_TAG_variable, false, {{DW_AT_location, DW_FORM_block2}});
  abbrev(a, 6, DW_TAG_variable, false, {{DW_AT_location, DW_FORM_block4}});
  abbrev(a, 7, DW_TAG_variable, false, {{DW_AT_location, DW_FORM_block}});
  abbrev(a, 8, DW_TAG_variable, false, {{DW_AT_location, DW_FORM_exprloc}});
  abbrev(a, 9, DW_TAG_variable, false, {{DW_AT_byte_size, DW_FORM_indirect}});
  abbrev(a, 10, DW_TAG_variable, false, {{DW_AT_decl_line, DW_FORM_udata}});
  a.u8(0);
  return a;
}

// A failed walk: no error-free end, the message, and the steps before it.
void check_fails(const Walk& w, const std::string& error, const std::string& steps) {
  CHECK_FALSE(w.ok);
  CHECK(w.error == error);
  CHECK(w.steps == steps);
}

}  // namespace

TEST_CASE("DIE walker: malformed units end the walk with an error") {
  const Bytes abbrevs = basic_abbrevs();
  const std::string cu = die(0x100, DW_TAG_compile_unit, true);
  // Enough bytes to complete almost anything the walker might read on with.
  const std::vector<uint8_t> tail = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

  SUBCASE("empty unit") {
    Bytes unit;
    check_fails(walk_with_tail(abbrevs, unit, {0x01, 0x00, 0x00}, 0x100),
                "unit ends inside its DIE tree at 0x100", kEnd);
  }
  SUBCASE("truncated ULEB abbreviation code") {
    Bytes unit;
    unit.uleb(1).str("a").u8(0x83);
    check_fails(walk_with_tail(abbrevs, unit, {0x00, 0x00, 0x00}, 0x100),
                "unit ends inside its DIE tree at 0x103", cu + kEnd);
  }
  SUBCASE("undefined abbreviation codes") {
    for (uint64_t code : {uint64_t{11}, uint64_t{0x7e}, uint64_t{1} << 16, uint64_t{1} << 40, UINT64_MAX}) {
      CAPTURE(code);
      Bytes unit;
      unit.uleb(1).str("a").uleb(code).u8(0);
      check_fails(walk(abbrevs, 0, unit, 0x100),
                  "DIE at 0x103 uses undefined abbreviation " + std::to_string(code), cu + kEnd);
    }
  }
  SUBCASE("a gap in the abbreviation codes is undefined") {
    Bytes a;
    abbrev(a, 1, DW_TAG_compile_unit, true, {});
    abbrev(a, 5, DW_TAG_variable, false, {});
    a.u8(0);
    Bytes unit;
    unit.uleb(1).uleb(5).uleb(3).u8(0);
    check_fails(walk(a, 0, unit, 0x100), "DIE at 0x102 uses undefined abbreviation 3",
                cu + die(0x101, DW_TAG_variable) + kEnd);
  }
  SUBCASE("an abbreviation code defined twice") {
    Bytes a;
    abbrev(a, 1, DW_TAG_compile_unit, true, {});
    abbrev(a, 2, DW_TAG_variable, false, {});
    abbrev(a, 2, DW_TAG_subprogram, false, {});
    a.u8(0);
    Bytes unit;
    unit.uleb(1).uleb(2).u8(0);
    const Walk w = walk(a, 0, unit, 0x100);
    CHECK_FALSE(w.started);
    check_fails(w, "abbreviation code 2 is defined twice", kEnd);
  }
  SUBCASE("an abbreviation code above the table limit") {
    Bytes a;
    abbrev(a, 1, DW_TAG_compile_unit, true, {});
    abbrev(a, uint64_t{1} << 40, DW_TAG_variable, false, {});
    a.u8(0);
    Bytes unit;
    unit.uleb(1).u8(0);
    const Walk w = walk(a, 0, unit, 0x100);
    CHECK_FALSE(w.started);
    check_fails(w, "abbreviation code 1099511627776 is too large", kEnd);
  }
  SUBCASE("abbreviation offset outside .debug_abbrev") {
    Bytes unit;
    unit.uleb(1).str("a").u8(0);
    for (uint64_t offset : {uint64_t(abbrevs.size()), uint64_t(abbrevs.size()) + 1, UINT64_MAX}) {
      CAPTURE(offset);
      const Walk w = walk(abbrevs, offset, unit, 0x100);
      CHECK_FALSE(w.started);
      check_fails(w, "abbreviation offset " + hex(offset) + " is outside .debug_abbrev", kEnd);
    }
    const Walk empty = walk(Bytes{}, 0, unit, 0x100);
    check_fails(empty, "abbreviation offset 0x0 is outside .debug_abbrev", kEnd);
  }
  SUBCASE("truncated abbreviation tables") {
    Bytes unit;
    unit.uleb(1).u8(0);
    Bytes full;
    abbrev(full, 1, DW_TAG_compile_unit, true, {{DW_AT_name, DW_FORM_string}, {DW_AT_decl_line, DW_FORM_udata}});
    full.u8(0);
    REQUIRE(full.size() == 10);
    // Cut after each byte: inside the code/tag/children header the table is
    // truncated; inside the attribute list the abbreviation is.
    const std::vector<std::string> errors = {
        "abbreviation offset 0x0 is outside .debug_abbrev",  // nothing left
        "truncated abbreviation table at 0x0",               // code only
        "truncated abbreviation table at 0x0",               // code, tag
        "truncated abbreviation 1",                          // header done, no attributes
        "truncated abbreviation 1",
        "truncated abbreviation 1",
        "truncated abbreviation 1",
        "truncated abbreviation 1",
        "truncated abbreviation 1",  // the (0, 0) pair cut in half
        "truncated abbreviation table at 0x0",  // no terminating code 0
    };
    for (size_t cut = 0; cut < full.size(); ++cut) {
      CAPTURE(cut);
      Bytes a;
      a.v.assign(full.v.begin(), full.v.begin() + cut);
      const Walk w = walk(a, 0, unit, 0x100);
      CHECK_FALSE(w.started);
      check_fails(w, errors[cut], kEnd);
    }
    Bytes a;
    a.u8(0x81);  // a code's ULEB cut short
    check_fails(walk(a, 0, unit, 0x100), "truncated abbreviation table at 0x0", kEnd);
    Bytes tag_cut;
    tag_cut.uleb(1).u8(0x80);
    check_fails(walk(tag_cut, 0, unit, 0x100), "truncated abbreviation table at 0x0", kEnd);
    Bytes implicit_cut;  // implicit_const whose SLEB is cut short
    implicit_cut.uleb(1).uleb(DW_TAG_compile_unit).u8(1).uleb(DW_AT_decl_line).uleb(DW_FORM_implicit_const).u8(0x80);
    check_fails(walk(implicit_cut, 0, unit, 0x100), "truncated abbreviation 1", kEnd);
    Bytes at_offset;  // a table at a nonzero offset, truncated
    at_offset.u8(0).uleb(1).uleb(DW_TAG_compile_unit).u8(1).u8(0).u8(0);
    const Walk w = walk(at_offset, 1, unit, 0x100);
    check_fails(w, "truncated abbreviation table at 0x1", kEnd);
  }
  SUBCASE("unknown forms") {
    Bytes unit;
    unit.uleb(1).uleb(2).u8(0x7e).u8(0).u8(0);
    // Found when a DIE using the abbreviation is skipped.
    for (uint64_t form : {uint64_t{0x2d}, uint64_t{0x99}, uint64_t{0x1f03}}) {
      CAPTURE(form);
      Bytes a;
      abbrev(a, 1, DW_TAG_compile_unit, true, {});
      abbrev(a, 2, DW_TAG_variable, false, {{DW_AT_name, form}});
      a.u8(0);
      check_fails(walk(a, 0, unit, 0x100), "DIE at 0x101: cannot read an attribute of form " + hex(form),
                  cu + kEnd);
    }
    // Found while parsing the abbreviations.
    for (uint64_t form : {uint64_t{0}, uint64_t{0x10000}, UINT64_MAX}) {
      CAPTURE(form);
      Bytes a;
      abbrev(a, 1, DW_TAG_compile_unit, true, {});
      abbrev(a, 2, DW_TAG_variable, false, {{DW_AT_name, form}});
      a.u8(0);
      const Walk w = walk(a, 0, unit, 0x100);
      CHECK_FALSE(w.started);
      check_fails(w, "abbreviation 2 has an unknown form " + hex(form), kEnd);
    }
  }
  SUBCASE("attributes running past the end of the unit") {
    Bytes fixed;  // subprogram: addr (8) + data4 (4), only 7 bytes left
    fixed.uleb(1).str("a").uleb(2).fill(7, 0x7e);
    check_fails(walk_with_tail(abbrevs, fixed, tail, 0x100), "DIE at 0x103 runs past the end of its unit",
                cu + kEnd);
    Bytes fixed_exact;  // the same DIE complete, then the unit ends
    fixed_exact.uleb(1).str("a").uleb(2).fill(12, 0x7e);
    check_fails(walk_with_tail(abbrevs, fixed_exact, tail, 0x100), "unit ends inside its DIE tree at 0x110",
                cu + die(0x103, DW_TAG_subprogram, true) + kEnd);
    Bytes fixed_run;  // formal parameter: udata, then ref4 with 3 bytes left
    fixed_run.uleb(1).str("a").uleb(4).u8(0x05).fill(3, 0x7e);
    check_fails(walk_with_tail(abbrevs, fixed_run, tail, 0x100), "DIE at 0x103 runs past the end of its unit",
                cu + kEnd);
    Bytes leb;  // udata whose last byte is missing
    leb.uleb(1).str("a").uleb(10).raw({0x80, 0x80});
    check_fails(walk_with_tail(abbrevs, leb, tail, 0x100), "DIE at 0x103: cannot read an attribute of form 0xf",
                cu + kEnd);
    Bytes overlong;  // udata of more than the longest ULEB
    overlong.uleb(1).str("a").uleb(10).fill(12, 0x80).u8(0x01).u8(0);
    check_fails(walk(abbrevs, 0, overlong, 0x100), "DIE at 0x103: cannot read an attribute of form 0xf",
                cu + kEnd);
  }
  SUBCASE("block lengths past the end of the unit") {
    struct Case {
      uint8_t code;
      std::vector<uint8_t> value;
      const char* form;
    };
    const std::vector<Case> cases = {
        {3, {'v', 0, 5, 0x7e, 0x7e}, "0xa"},                           // block1: 5 of 2
        {3, {'v', 0}, "0xa"},                                          // block1: no length byte
        {5, {0x05, 0x00, 0x7e}, "0x3"},                                // block2
        {5, {0x05}, "0x3"},                                            // block2: half a length
        {6, {0xff, 0xff, 0xff, 0xff, 0x7e}, "0x4"},                    // block4: 4 GiB
        {6, {0x01, 0x00, 0x00}, "0x4"},                                // block4: 3 of 4 length bytes
        {7, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "0x9"},  // block: 2^64 - 1
        {7, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}, "0x9"},      // block: 2^62
        {8, {0x03, 0x7e, 0x7e}, "0x18"},                               // exprloc
        {8, {0x83}, "0x18"},                                           // exprloc: cut ULEB
    };
    for (const Case& c : cases) {
      CAPTURE(c.form);
      CAPTURE(c.value.size());
      Bytes unit;
      unit.uleb(1).str("a").uleb(c.code).raw(c.value);
      check_fails(walk_with_tail(abbrevs, unit, tail, 0x100),
                  std::string("DIE at 0x103: cannot read an attribute of form ") + c.form, cu + kEnd);
    }
  }
  SUBCASE("a string without its NUL") {
    Bytes unit;
    unit.uleb(1).str("a").uleb(3).raw({'a', 'b', 'c'});
    check_fails(walk_with_tail(abbrevs, unit, tail, 0x100), "DIE at 0x103: cannot read an attribute of form 0x8",
                cu + kEnd);
    Bytes unit_die;  // the unit DIE's own name
    unit_die.uleb(1).raw({'a', 'b'});
    check_fails(walk_with_tail(abbrevs, unit_die, tail, 0x100),
                "DIE at 0x100: cannot read an attribute of form 0x8", kEnd);
  }
  SUBCASE("the unit ends inside the tree") {
    Bytes unit;  // unit DIE { subprogram { variable } } without either terminating 0
    unit.uleb(1).str("a").uleb(2).fill(12, 0x7e).uleb(3).str("v").raw({1, 0x7e});
    const std::string steps = cu + die(0x103, DW_TAG_subprogram, true) + die(0x110, DW_TAG_variable);
    check_fails(walk_with_tail(abbrevs, unit, tail, 0x100), "unit ends inside its DIE tree at 0x115", steps + kEnd);
    unit.u8(0);  // one of the two
    check_fails(walk_with_tail(abbrevs, unit, tail, 0x100), "unit ends inside its DIE tree at 0x116",
                steps + end_of_children(0x115) + kEnd);
  }
  SUBCASE("a unit whose first entry is a null entry") {
    Bytes unit;
    unit.u8(0).uleb(1).str("a").u8(0);
    check_fails(walk(abbrevs, 0, unit, 0x100), "the unit has no unit DIE", kEnd);
  }
  SUBCASE("DW_FORM_indirect") {
    struct Case {
      std::vector<uint8_t> value;
      const char* error;
    };
    const std::vector<Case> cases = {
        // One indirection more than the longest chain allowed.
        {{DW_FORM_indirect, DW_FORM_indirect, DW_FORM_indirect, DW_FORM_indirect, DW_FORM_indirect,
          DW_FORM_data1, 0x7e, 0},
         "DIE at 0x103: cannot read an attribute of form 0x16"},
        // An endless chain.
        {std::vector<uint8_t>(64, DW_FORM_indirect), "DIE at 0x103: cannot read an attribute of form 0x16"},
        // implicit_const has its value in the abbreviation: not possible here.
        {{DW_FORM_implicit_const, 0x7e, 0}, "DIE at 0x103: cannot read an attribute of form 0x16"},
        {{0x00, 0x7e, 0}, "DIE at 0x103: cannot read an attribute of form 0x16"},
        {{0x99, 0x7e, 0}, "DIE at 0x103: cannot read an attribute of form 0x16"},
        {{0x80}, "DIE at 0x103: cannot read an attribute of form 0x16"},  // the form's ULEB cut
        {{DW_FORM_data4, 0x7e}, "DIE at 0x103: cannot read an attribute of form 0x16"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.value.size());
      CAPTURE(int(c.value[0]));
      Bytes unit;
      unit.uleb(1).str("a").uleb(9).raw(c.value);
      check_fails(walk_with_tail(abbrevs, unit, tail, 0x100), c.error, cu + kEnd);
    }
  }
  SUBCASE("offset size neither 4 nor 8") {
    Bytes unit;
    unit.uleb(1).str("a").u8(0);
    for (uint8_t offset_size : {0, 2, 12}) {
      CAPTURE(int(offset_size));
      const Walk w = walk(abbrevs, 0, unit, 0x100, shape(4, 8, offset_size));
      CHECK_FALSE(w.started);
      check_fails(w, "unit offset size " + std::to_string(offset_size), kEnd);
    }
  }
}

// A unit of a struct with members and a nested struct, then a function:
// what skip_children jumps over and descendants() reads back.
namespace {
struct TypeUnit {
  Bytes abbrevs, unit;
  uint64_t structure = 0, member_a = 0, nested = 0, member_b = 0, method = 0, member_c = 0, function = 0,
           end_of_unit = 0;
};

TypeUnit type_unit() {
  TypeUnit t;
  abbrev(t.abbrevs, 1, DW_TAG_compile_unit, true, {{DW_AT_name, DW_FORM_string}});
  abbrev(t.abbrevs, 2, DW_TAG_structure_type, true, {{DW_AT_name, DW_FORM_string}, {DW_AT_sibling, DW_FORM_ref4}});
  abbrev(t.abbrevs, 3, DW_TAG_member, false, {{DW_AT_name, DW_FORM_string}, {DW_AT_type, DW_FORM_ref4}});
  abbrev(t.abbrevs, 4, DW_TAG_subprogram, false, {{DW_AT_name, DW_FORM_string}, {DW_AT_declaration, DW_FORM_flag_present}});
  abbrev(t.abbrevs, 5, DW_TAG_subprogram, false, {{DW_AT_name, DW_FORM_string}, {DW_AT_low_pc, DW_FORM_addr}});
  t.abbrevs.u8(0);
  auto at = [&] { return kFirst + t.unit.size(); };
  t.unit.uleb(1).str("t.cc");
  t.structure = at();
  t.unit.uleb(2).str("S").fill(4, 0);  // sibling patched below
  const size_t sibling_field = t.unit.size() - 4;
  t.member_a = at();
  t.unit.uleb(3).str("a").fill(4, 0);
  t.nested = at();
  t.unit.uleb(2).str("N").fill(4, 0);
  t.member_b = at();
  t.unit.uleb(3).str("b").fill(4, 0);
  t.unit.u8(0);  // end of N
  t.method = at();
  t.unit.uleb(4).str("m");
  t.member_c = at();
  t.unit.uleb(3).str("c").fill(4, 0);
  t.unit.u8(0);  // end of S
  t.function = at();
  t.unit.uleb(5).str("f").fill(8, 0);
  t.unit.u8(0);  // end of the unit DIE's children
  t.end_of_unit = at();
  // References are relative to the unit header, kFirst bytes before the first DIE.
  const uint32_t relative = uint32_t(t.function);
  std::memcpy(&t.unit.v[sibling_field], &relative, 4);
  return t;
}
}  // namespace

TEST_CASE("DIE walker: skip_children goes to the sibling; descendants reads the skipped subtree") {
  const TypeUnit t = type_unit();
  ExactBuffer a(t.abbrevs.v), u(t.unit.v);
  DwarfDieWalker walker;
  REQUIRE(walker.start({a.data.get(), a.size}, 0, {u.data.get(), u.size}, kFirst, {}));
  REQUIRE(walker.next().tag == DW_TAG_compile_unit);
  const DwarfDieWalker::Step structure = walker.next();
  REQUIRE(structure.offset == t.structure);

  SUBCASE("skipped: the next step is the sibling, and the walk ends as usual") {
    uint64_t sibling = 0;
    REQUIRE(walker.sibling(structure, sibling));
    CHECK(sibling == t.function);  // as stored: relative to a unit header at offset 0
    REQUIRE(walker.skip_children(structure, t.function));
    const DwarfDieWalker::Step function = walker.next();
    CHECK(function.offset == t.function);
    CHECK(function.tag == DW_TAG_subprogram);
    CHECK(walker.next().kind == DwarfDieWalker::Step::EndOfChildren);
    CHECK(walker.next().kind == DwarfDieWalker::Step::End);
    CHECK(walker.ok());
    // Read back after the walk, from the unit's bytes.
    std::vector<DwarfDieWalker::Descendant> below;
    REQUIRE(walker.descendants(t.structure, 64, below));
    std::string got;
    for (const auto& d : below) got += hex(d.offset) + " of " + hex(d.parent) + " tag " + hex(d.tag) + "\n";
    CHECK(got == hex(t.member_a) + " of " + hex(t.structure) + " tag " + hex(DW_TAG_member) + "\n" +
                     hex(t.nested) + " of " + hex(t.structure) + " tag " + hex(DW_TAG_structure_type) + "\n" +
                     hex(t.member_b) + " of " + hex(t.nested) + " tag " + hex(DW_TAG_member) + "\n" +
                     hex(t.method) + " of " + hex(t.structure) + " tag " + hex(DW_TAG_subprogram) + "\n" +
                     hex(t.member_c) + " of " + hex(t.structure) + " tag " + hex(DW_TAG_member) + "\n");
    below.clear();
    CHECK(walker.descendants(t.member_a, 64, below));  // no children: nothing, and fine
    CHECK(below.empty());
    CHECK_FALSE(walker.descendants(t.structure, 1, below));  // N is a second level
    CHECK_FALSE(walker.descendants(t.end_of_unit, 64, below));  // no DIE there
  }
  SUBCASE("a sibling before the DIE's children, inside a DIE or past the unit moves nothing") {
    // member_a + 1: inside a DIE, not after the end of a child list.
    for (uint64_t bad : {uint64_t{0}, t.structure, t.member_a, t.member_a + 1, t.end_of_unit + 1, UINT64_MAX}) {
      CAPTURE(bad);
      CHECK_FALSE(walker.skip_children(structure, bad));
    }
    CHECK(walker.next().offset == t.member_a);
  }
  SUBCASE("only the DIE just returned, with children, can be skipped") {
    const DwarfDieWalker::Step member_a = walker.next();
    uint64_t sibling = 0;
    CHECK_FALSE(walker.sibling(member_a, sibling));            // it has none
    CHECK_FALSE(walker.sibling(structure, sibling));           // not the last step
    CHECK_FALSE(walker.skip_children(member_a, t.function));   // no children
    CHECK_FALSE(walker.skip_children(structure, t.function));  // not the last step
    CHECK(walker.next().offset == t.nested);
  }
  SUBCASE("a subtree cut short fails without reading past the unit") {
    ExactBuffer cut(std::vector<uint8_t>(t.unit.v.begin(), t.unit.v.begin() + long(t.member_c - kFirst)));
    DwarfDieWalker short_walker;
    REQUIRE(short_walker.start({a.data.get(), a.size}, 0, {cut.data.get(), cut.size}, kFirst, {}));
    std::vector<DwarfDieWalker::Descendant> below;
    CHECK_FALSE(short_walker.descendants(t.structure, 64, below));
    CHECK(below.size() == 4);  // what was read before the end
  }
}
