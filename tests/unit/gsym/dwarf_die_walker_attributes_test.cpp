// DwarfDieWalker's attribute access (what the converter reads of
// subprograms and inlined subroutines without libdw): each attribute's name,
// form and value, in abbreviation order, in both byte orders and with both
// address sizes; strings; a DIE found again by its offset; DWARF 5's
// indexed strings, addresses and range lists.
#include <doctest/doctest.h>

#include <dwarf.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gsym/convert/dwarf_die_walker.h"

using namespace gsym;

namespace {

struct Assembler {
  std::vector<uint8_t> bytes;
  bool little = true;
  Assembler& u8(uint8_t b) {
    bytes.push_back(b);
    return *this;
  }
  Assembler& fixed(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) {
      const int shift = little ? 8 * i : 8 * (width - 1 - i);
      bytes.push_back(static_cast<uint8_t>(v >> shift));
    }
    return *this;
  }
  Assembler& uleb(uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      bytes.push_back(v ? uint8_t(b | 0x80) : b);
    } while (v);
    return *this;
  }
  Assembler& sleb(int64_t v) {
    for (;;) {
      uint8_t b = v & 0x7f;
      v >>= 7;
      const bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
      bytes.push_back(done ? b : uint8_t(b | 0x80));
      if (done) return *this;
    }
  }
  Assembler& str(const char* s) {
    bytes.insert(bytes.end(), s, s + std::strlen(s) + 1);
    return *this;
  }
};

struct Seen {
  uint16_t name, form;
  bool has_value;
  uint64_t value;
};

void check_inlined_subroutine(bool little, uint8_t address_size) {
  Assembler abbrevs;
  // 1: compile unit with children, no attributes.
  abbrevs.uleb(1).uleb(DW_TAG_compile_unit).u8(DW_CHILDREN_yes).u8(0).u8(0);
  // 2: an inlined subroutine as gcc writes it, plus forms that have no
  // plain unsigned value.
  abbrevs.uleb(2).uleb(DW_TAG_inlined_subroutine).u8(DW_CHILDREN_no);
  abbrevs.uleb(DW_AT_abstract_origin).uleb(DW_FORM_ref4);
  abbrevs.uleb(DW_AT_entry_pc).uleb(DW_FORM_addr);
  abbrevs.uleb(DW_AT_GNU_entry_view).uleb(DW_FORM_data1);
  abbrevs.uleb(DW_AT_low_pc).uleb(DW_FORM_addr);
  abbrevs.uleb(DW_AT_high_pc).uleb(DW_FORM_data8);
  abbrevs.uleb(DW_AT_call_file).uleb(DW_FORM_implicit_const).sleb(3);
  abbrevs.uleb(DW_AT_call_line).uleb(DW_FORM_udata);
  abbrevs.uleb(DW_AT_call_column).uleb(DW_FORM_data2);
  abbrevs.uleb(DW_AT_external).uleb(DW_FORM_flag_present);
  abbrevs.uleb(DW_AT_name).uleb(DW_FORM_string);
  abbrevs.uleb(DW_AT_linkage_name).uleb(DW_FORM_strp);
  abbrevs.uleb(DW_AT_location).uleb(DW_FORM_exprloc);
  abbrevs.uleb(DW_AT_sibling).uleb(DW_FORM_ref_udata);
  abbrevs.u8(0).u8(0);
  abbrevs.u8(0);

  Assembler unit;
  unit.little = little;
  const uint64_t first = 0x0c;
  unit.uleb(1);
  const uint64_t inlined_offset = first + unit.bytes.size();
  const uint64_t address = address_size == 8 ? 0x1122334455667788ull : 0x11223344ull;
  unit.uleb(2)
      .fixed(0x2a, 4)
      .fixed(address - 1, address_size)
      .u8(7)
      .fixed(address, address_size)
      .fixed(0x123456789aull, 8)
      .uleb(300)
      .fixed(0xbeef, 2)
      .str("inlined")
      .fixed(0x40, 4)
      .uleb(2)
      .u8(DW_OP_lit1)
      .u8(DW_OP_stack_value)
      .uleb(0x81);
  unit.u8(0);

  DwarfUnitShape shape;
  shape.version = 5;
  shape.address_size = address_size;
  shape.little_endian = little;
  DwarfDieWalker walker;
  REQUIRE(walker.start(abbrevs.bytes, 0, unit.bytes, first, shape));
  const DwarfDieWalker::Step cu = walker.next();
  REQUIRE(cu.kind == DwarfDieWalker::Step::Die);
  CHECK_FALSE(walker.has_attribute(cu, DW_AT_name));
  const DwarfDieWalker::Step step = walker.next();
  REQUIRE(step.kind == DwarfDieWalker::Step::Die);
  CHECK(step.offset == inlined_offset);
  CHECK(step.tag == DW_TAG_inlined_subroutine);
  CHECK(walker.has_attribute(step, DW_AT_low_pc));
  CHECK(walker.has_attribute(step, DW_AT_call_file));
  CHECK_FALSE(walker.has_attribute(step, DW_AT_ranges));

  std::vector<Seen> seen;
  REQUIRE(walker.for_each_attribute(step, [&](const DwarfDieWalker::Attribute& a) {
    uint64_t v = 0;
    const bool has = walker.unsigned_value(a, v);
    seen.push_back({a.name, a.form, has, v});
  }));
  const std::vector<Seen> expected = {
      {DW_AT_abstract_origin, DW_FORM_ref4, true, 0x2a},
      {DW_AT_entry_pc, DW_FORM_addr, true, address - 1},
      {DW_AT_GNU_entry_view, DW_FORM_data1, true, 7},
      {DW_AT_low_pc, DW_FORM_addr, true, address},
      {DW_AT_high_pc, DW_FORM_data8, true, 0x123456789aull},
      {DW_AT_call_file, DW_FORM_implicit_const, true, 3},
      {DW_AT_call_line, DW_FORM_udata, true, 300},
      {DW_AT_call_column, DW_FORM_data2, true, 0xbeef},
      {DW_AT_external, DW_FORM_flag_present, true, 1},
      {DW_AT_name, DW_FORM_string, false, 0},
      {DW_AT_linkage_name, DW_FORM_strp, false, 0},
      {DW_AT_location, DW_FORM_exprloc, false, 0},
      {DW_AT_sibling, DW_FORM_ref_udata, true, 0x81},
  };
  REQUIRE(seen.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(seen[i].name == expected[i].name);
    CHECK(seen[i].form == expected[i].form);
    CHECK(seen[i].has_value == expected[i].has_value);
    if (expected[i].has_value) CHECK(seen[i].value == expected[i].value);
  }
  // The string's bytes are where the attribute says.
  walker.for_each_attribute(step, [&](const DwarfDieWalker::Attribute& a) {
    if (a.name == DW_AT_name) CHECK(std::string(reinterpret_cast<const char*>(a.value)) == "inlined");
  });

  // Strings as dwarf_formstring gives them: inline, or at the offset in
  // .debug_str (the linkage name, 0x40) or .debug_line_str; an offset outside
  // the section, or a string that runs off its end, is not read.
  std::vector<uint8_t> debug_str(0x40, 'x');
  const std::string linkage = "_Z7inlinedv";
  // Byte by byte: gcc 12's -Warray-bounds misreads a range insert here.
  for (char c : linkage) debug_str.push_back(static_cast<uint8_t>(c));
  debug_str.push_back(0);
  const std::vector<uint8_t> short_str(0x40, 0), unterminated(0x45, 'y');
  auto strings = [](std::span<const uint8_t> str, std::span<const uint8_t> line_str) {
    return DwarfDieWalker::StringSections{str, line_str, {}, {}};
  };
  walker.for_each_attribute(step, [&](const DwarfDieWalker::Attribute& a) {
    const char* s = nullptr;
    if (a.name == DW_AT_name) {
      REQUIRE(walker.string_value(a, strings({}, {}), s));
      CHECK(std::string(s) == "inlined");
      CHECK(reinterpret_cast<const uint8_t*>(s) == a.value);
    } else if (a.name == DW_AT_linkage_name) {
      REQUIRE(walker.string_value(a, strings(debug_str, {}), s));
      CHECK(std::string(s) == linkage);
      CHECK(reinterpret_cast<const uint8_t*>(s) == debug_str.data() + 0x40);
      CHECK_FALSE(walker.string_value(a, strings(short_str, debug_str), s));  // strp reads .debug_str only
      CHECK_FALSE(walker.string_value(a, strings(unterminated, {}), s));
    } else {
      CHECK_FALSE(walker.string_value(a, strings(debug_str, debug_str), s));  // not a string form
    }
  });

  // die_at: the DIE at an offset, as the walk gave it, without moving the walk.
  const DwarfDieWalker::Step again = walker.die_at(inlined_offset);
  REQUIRE(again.kind == DwarfDieWalker::Step::Die);
  CHECK(again.offset == step.offset);
  CHECK(again.tag == step.tag);
  CHECK(again.abbrev == step.abbrev);
  CHECK(again.attributes == step.attributes);
  CHECK(walker.die_at(first).tag == DW_TAG_compile_unit);
  CHECK(walker.die_at(first).has_children);
  const uint64_t unit_end = first + unit.bytes.size();
  CHECK(walker.die_at(unit_end - 1).kind == DwarfDieWalker::Step::End);  // the child list's 0
  CHECK(walker.die_at(unit_end).kind == DwarfDieWalker::Step::End);      // past the unit
  CHECK(walker.die_at(first - 1).kind == DwarfDieWalker::Step::End);     // before it
  CHECK(walker.die_at(inlined_offset + 1).kind == DwarfDieWalker::Step::End);  // code 0x2a: undefined

  CHECK(walker.next().kind == DwarfDieWalker::Step::EndOfChildren);
  const DwarfDieWalker::Step end = walker.next();
  CHECK(end.kind == DwarfDieWalker::Step::End);
  CHECK(walker.ok());
  // Steps that are not DIEs have no attributes.
  CHECK_FALSE(walker.for_each_attribute(end, [](const DwarfDieWalker::Attribute&) {}));
  CHECK_FALSE(walker.has_attribute(end, DW_AT_low_pc));
}

// Starts `walker` on a DWARF `version` unit of `abbrevs` and `unit` (its
// first DIE at .debug_info offset 0x0c, 64-bit addresses); its first DIE.
DwarfDieWalker::Step first_die(DwarfDieWalker& walker, const Assembler& abbrevs, const Assembler& unit, bool little,
                               uint16_t version = 5) {
  DwarfUnitShape shape;
  shape.version = version;
  shape.little_endian = little;
  REQUIRE(walker.start(abbrevs.bytes, 0, unit.bytes, 0x0c, shape));
  const DwarfDieWalker::Step step = walker.next();
  REQUIRE(step.kind == DwarfDieWalker::Step::Die);
  return step;
}

}  // namespace

TEST_CASE("DIE walker: attributes of a DIE, in order, with their values") {
  SUBCASE("little-endian, 64-bit addresses") { check_inlined_subroutine(true, 8); }
  SUBCASE("big-endian, 64-bit addresses") { check_inlined_subroutine(false, 8); }
  SUBCASE("little-endian, 32-bit addresses") { check_inlined_subroutine(true, 4); }
}

namespace {

std::vector<Seen> seen_attributes(const DwarfDieWalker& walker, const DwarfDieWalker::Step& step, bool wanted_only,
                                  std::span<const uint16_t> wanted, bool& read) {
  std::vector<Seen> seen;
  auto record = [&](const DwarfDieWalker::Attribute& a) {
    uint64_t v = 0;
    const bool has = walker.unsigned_value(a, v);
    seen.push_back({a.name, a.form, has, v});
  };
  if (wanted_only) {
    read = walker.for_each_wanted_attribute(step, record);
  } else {
    read = walker.for_each_attribute(step, [&](const DwarfDieWalker::Attribute& a) {
      for (uint16_t name : wanted)
        if (a.name == name) record(a);
    });
  }
  return seen;
}

void check_wanted_attributes(bool little) {
  // 2: every value of fixed size (as gcc writes inlined subroutines), a
  // repeated attribute among them; 3: the same with an exprloc and an inline
  // string between the wanted ones.
  Assembler abbrevs;
  abbrevs.uleb(1).uleb(DW_TAG_compile_unit).u8(DW_CHILDREN_yes).u8(0).u8(0);
  for (int code : {2, 3}) {
    abbrevs.uleb(code).uleb(DW_TAG_inlined_subroutine).u8(DW_CHILDREN_no);
    abbrevs.uleb(DW_AT_abstract_origin).uleb(DW_FORM_ref4);
    abbrevs.uleb(DW_AT_entry_pc).uleb(DW_FORM_addr);
    if (code == 3) abbrevs.uleb(DW_AT_location).uleb(DW_FORM_exprloc);
    abbrevs.uleb(DW_AT_low_pc).uleb(DW_FORM_addr);
    abbrevs.uleb(DW_AT_high_pc).uleb(DW_FORM_data8);
    abbrevs.uleb(DW_AT_decl_file).uleb(DW_FORM_implicit_const).sleb(5);
    if (code == 3) abbrevs.uleb(DW_AT_name).uleb(DW_FORM_string);
    abbrevs.uleb(DW_AT_call_file).uleb(DW_FORM_data1);
    abbrevs.uleb(DW_AT_call_line).uleb(DW_FORM_data2);
    abbrevs.uleb(DW_AT_call_line).uleb(DW_FORM_data4);  // repeated: both are given
    abbrevs.uleb(DW_AT_sibling).uleb(DW_FORM_ref4);
    abbrevs.u8(0).u8(0);
  }
  abbrevs.u8(0);

  Assembler unit;
  unit.little = little;
  const uint64_t first = 0x0c;
  unit.uleb(1);
  const uint64_t fixed_offset = first + unit.bytes.size();
  auto body = [&](bool variable) {
    unit.fixed(0x2a, 4).fixed(0x1000, 8);
    if (variable) unit.uleb(2).u8(DW_OP_lit1).u8(DW_OP_stack_value);
    unit.fixed(0x1010, 8).fixed(0x40, 8);
    if (variable) unit.str("inlined");
    unit.u8(3).fixed(0x1234, 2).fixed(0x56789, 4).fixed(0x77, 4);
  };
  unit.uleb(2);
  body(false);
  const uint64_t variable_offset = first + unit.bytes.size();
  unit.uleb(3);
  body(true);
  unit.u8(0);

  const std::vector<uint16_t> wanted = {DW_AT_abstract_origin, DW_AT_low_pc,    DW_AT_high_pc, DW_AT_decl_file,
                                        DW_AT_name,            DW_AT_call_file, DW_AT_call_line};
  DwarfUnitShape shape;
  shape.version = 5;
  shape.little_endian = little;
  DwarfDieWalker walker;
  walker.want_attributes(wanted);
  REQUIRE(walker.start(abbrevs.bytes, 0, unit.bytes, first, shape));
  REQUIRE(walker.next().kind == DwarfDieWalker::Step::Die);
  for (uint64_t offset : {fixed_offset, variable_offset}) {
    CAPTURE(offset);
    const DwarfDieWalker::Step step = walker.next();
    REQUIRE(step.kind == DwarfDieWalker::Step::Die);
    REQUIRE(step.offset == offset);
    bool read_all = false, read_wanted = false;
    const std::vector<Seen> all = seen_attributes(walker, step, false, wanted, read_all);
    const std::vector<Seen> planned = seen_attributes(walker, step, true, wanted, read_wanted);
    CHECK(read_all);
    CHECK(read_wanted);
    std::vector<Seen> expected = {
        {DW_AT_abstract_origin, DW_FORM_ref4, true, 0x2a},   {DW_AT_low_pc, DW_FORM_addr, true, 0x1010},
        {DW_AT_high_pc, DW_FORM_data8, true, 0x40},          {DW_AT_decl_file, DW_FORM_implicit_const, true, 5},
        {DW_AT_call_file, DW_FORM_data1, true, 3},           {DW_AT_call_line, DW_FORM_data2, true, 0x1234},
        {DW_AT_call_line, DW_FORM_data4, true, 0x56789}};
    if (offset == variable_offset) expected.insert(expected.begin() + 4, {DW_AT_name, DW_FORM_string, false, 0});
    for (const std::vector<Seen>* seen : {&all, &planned}) {
      REQUIRE(seen->size() == expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        CAPTURE(i);
        CHECK((*seen)[i].name == expected[i].name);
        CHECK((*seen)[i].form == expected[i].form);
        CHECK((*seen)[i].has_value == expected[i].has_value);
        if (expected[i].has_value) CHECK((*seen)[i].value == expected[i].value);
      }
    }
  }
  CHECK(walker.next().kind == DwarfDieWalker::Step::EndOfChildren);

  // A DIE of the fixed-size abbreviation that the unit's end cuts (die_at
  // finds it; its values are not all there): refused, as by
  // for_each_attribute, even where the wanted values are whole.
  const size_t fixed_size = static_cast<size_t>(variable_offset - fixed_offset);
  std::vector<uint8_t> cut(unit.bytes.begin(), unit.bytes.begin() + static_cast<long>(fixed_offset - first + fixed_size - 2));
  DwarfDieWalker cut_walker;
  cut_walker.want_attributes(wanted);
  REQUIRE(cut_walker.start(abbrevs.bytes, 0, cut, first, shape));
  const DwarfDieWalker::Step cut_step = cut_walker.die_at(fixed_offset);
  REQUIRE(cut_step.kind == DwarfDieWalker::Step::Die);
  bool read = true;
  seen_attributes(cut_walker, cut_step, false, wanted, read);
  CHECK_FALSE(read);
  seen_attributes(cut_walker, cut_step, true, wanted, read);
  CHECK_FALSE(read);

  // Nothing wanted: no attribute is given, and DIEs are still checked.
  DwarfDieWalker none;
  REQUIRE(none.start(abbrevs.bytes, 0, unit.bytes, first, shape));
  REQUIRE(none.next().kind == DwarfDieWalker::Step::Die);
  const DwarfDieWalker::Step plain = none.next();
  CHECK(seen_attributes(none, plain, true, wanted, read).empty());
  CHECK(read);
}

}  // namespace

TEST_CASE("DIE walker: the wanted attributes, read by an abbreviation's plan or by stepping, as for_each_attribute") {
  SUBCASE("little-endian") { check_wanted_attributes(true); }
  SUBCASE("big-endian") { check_wanted_attributes(false); }
}

TEST_CASE("DIE walker: DWARF 5's indexed strings and addresses, as libdw reads them") {
  for (const bool little : {true, false}) {
    CAPTURE(little);
    Assembler abbrevs;
    abbrevs.uleb(1).uleb(DW_TAG_compile_unit).u8(DW_CHILDREN_no);
    abbrevs.uleb(DW_AT_name).uleb(DW_FORM_strx1);
    abbrevs.uleb(DW_AT_producer).uleb(DW_FORM_strx);
    abbrevs.uleb(DW_AT_comp_dir).uleb(DW_FORM_strx3);
    abbrevs.uleb(DW_AT_low_pc).uleb(DW_FORM_addrx);
    abbrevs.uleb(DW_AT_high_pc).uleb(DW_FORM_addrx2);
    abbrevs.uleb(DW_AT_entry_pc).uleb(DW_FORM_addr);
    abbrevs.u8(0).u8(0).u8(0);
    Assembler unit;
    unit.little = little;
    unit.uleb(1).u8(2).uleb(0).fixed(1, 3).uleb(1).fixed(2, 2).fixed(0x401000, 8);

    // .debug_str: three strings; .debug_str_offsets: a header, then the
    // unit's entries (its base: 8) pointing at them out of order.
    std::vector<uint8_t> debug_str;
    for (const char* s : {"main.c", "clang", "/src"}) debug_str.insert(debug_str.end(), s, s + std::strlen(s) + 1);
    Assembler offsets;
    offsets.little = little;
    offsets.fixed(0, 8).fixed(7, 4).fixed(13, 4).fixed(0, 4);  // index 0: "clang", 1: "/src", 2: "main.c"
    Assembler addresses;
    addresses.little = little;
    addresses.fixed(0, 8).fixed(0x1000, 8).fixed(0x2000, 8).fixed(0x3000, 8);

    DwarfDieWalker walker;
    const DwarfDieWalker::Step cu = first_die(walker, abbrevs, unit, little);

    DwarfDieWalker::StringSections sections{debug_str, {}, offsets.bytes, 8};
    std::vector<std::string> names;
    std::vector<uint64_t> pcs;
    REQUIRE(walker.for_each_attribute(cu, [&](const DwarfDieWalker::Attribute& a) {
      const char* s = nullptr;
      uint64_t pc = 0;
      if (walker.string_value(a, sections, s)) names.push_back(s);
      if (walker.address_value(a, addresses.bytes, 8, pc)) pcs.push_back(pc);
      // Without a base nothing indexed is read; strings are not addresses.
      if (a.form != DW_FORM_addr) {
        CHECK_FALSE(walker.address_value(a, addresses.bytes, std::nullopt, pc));
        CHECK_FALSE(walker.string_value(a, {debug_str, {}, offsets.bytes, std::nullopt}, s));
      }
    }));
    CHECK(names == std::vector<std::string>{"main.c", "clang", "/src"});  // strx1 2, strx 0, strx3 1
    CHECK(pcs == std::vector<uint64_t>{0x2000, 0x3000, 0x401000});      // addrx 1, addrx2 2, addr

    // Entries past their section, or a string offset past .debug_str, are not read.
    walker.for_each_attribute(cu, [&](const DwarfDieWalker::Attribute& a) {
      const char* s = nullptr;
      uint64_t pc = 0;
      if (a.name == DW_AT_name) {  // index 2, at 8 + 2 * 4 = 16: the section must hold 20 bytes
        CHECK(walker.string_value(a, {debug_str, {}, std::span(offsets.bytes).first(20), 8}, s));
        CHECK_FALSE(walker.string_value(a, {debug_str, {}, std::span(offsets.bytes).first(19), 8}, s));
        CHECK_FALSE(walker.string_value(a, {debug_str, {}, offsets.bytes, UINT64_MAX - 3}, s));
      }
      if (a.name == DW_AT_comp_dir) {  // "/src" at 13 of .debug_str's 18 bytes
        CHECK(walker.string_value(a, {std::span(debug_str).first(18), {}, offsets.bytes, 8}, s));
        CHECK_FALSE(walker.string_value(a, {std::span(debug_str).first(17), {}, offsets.bytes, 8}, s));  // no NUL
        CHECK_FALSE(walker.string_value(a, {std::span(debug_str).first(13), {}, offsets.bytes, 8}, s));
      }
      if (a.name == DW_AT_high_pc) {  // index 2, at 8 + 2 * 8 = 24: 32 bytes needed
        CHECK(walker.address_value(a, std::span(addresses.bytes).first(32), 8, pc));
        CHECK_FALSE(walker.address_value(a, std::span(addresses.bytes).first(31), 8, pc));
        CHECK_FALSE(walker.address_value(a, addresses.bytes, UINT64_MAX - 7, pc));
      }
    });
  }
}

TEST_CASE("DIE walker: where a DW_AT_ranges list starts, sec_offset or rnglistx, as libdw finds it") {
  for (const bool little : {true, false}) {
    CAPTURE(little);
    Assembler abbrevs;
    abbrevs.uleb(1).uleb(DW_TAG_lexical_block).u8(DW_CHILDREN_no);
    abbrevs.uleb(DW_AT_ranges).uleb(DW_FORM_rnglistx);
    abbrevs.uleb(DW_AT_ranges).uleb(DW_FORM_rnglistx);
    abbrevs.uleb(DW_AT_ranges).uleb(DW_FORM_sec_offset);
    abbrevs.uleb(DW_AT_name).uleb(DW_FORM_data4);
    abbrevs.u8(0).u8(0).u8(0);
    Assembler unit;
    unit.little = little;
    unit.uleb(1).uleb(1).uleb(200).fixed(0x40, 4).fixed(0x40, 4);  // index 1, index 200, offset 0x40, a constant

    // .debug_rnglists: a 12-byte header, then the unit's offset table (its
    // base: 12) of two entries, relative to the base.
    Assembler rnglists;
    rnglists.little = little;
    rnglists.fixed(0, 4).fixed(5, 2).u8(8).u8(0).fixed(2, 4).fixed(8, 4).fixed(0x21, 4);

    DwarfDieWalker walker;
    const DwarfDieWalker::Step block = first_die(walker, abbrevs, unit, little);
    std::vector<DwarfDieWalker::Attribute> attrs;
    REQUIRE(walker.for_each_attribute(block, [&](const DwarfDieWalker::Attribute& a) { attrs.push_back(a); }));
    REQUIRE(attrs.size() == 4);
    uint64_t offset = 0;
    CHECK(walker.range_list_offset(attrs[0], rnglists.bytes, 12, offset));
    CHECK(offset == 12 + 0x21);                                                      // entry 1, plus the base
    CHECK_FALSE(walker.range_list_offset(attrs[0], rnglists.bytes, std::nullopt, offset));  // no base
    CHECK(walker.range_list_offset(attrs[0], std::span(rnglists.bytes).first(20), 12, offset));
    CHECK_FALSE(walker.range_list_offset(attrs[0], std::span(rnglists.bytes).first(19), 12, offset));  // entry cut
    CHECK_FALSE(walker.range_list_offset(attrs[0], rnglists.bytes, 17, offset));       // base leaves no room
    CHECK_FALSE(walker.range_list_offset(attrs[1], rnglists.bytes, 12, offset));       // index 200: past the section
    CHECK(walker.range_list_offset(attrs[2], rnglists.bytes, std::nullopt, offset));   // sec_offset: as stored
    CHECK(offset == 0x40);
    CHECK_FALSE(walker.range_list_offset(attrs[3], rnglists.bytes, 12, offset));       // a constant is not a list
    // The same bytes as a DWARF 4 unit: libdw would index .debug_ranges, so no answer here.
    DwarfDieWalker old_walker;
    const DwarfDieWalker::Step old_block = first_die(old_walker, abbrevs, unit, little, 4);
    int seen = 0;
    REQUIRE(old_walker.for_each_attribute(old_block, [&](const DwarfDieWalker::Attribute& a) {
      if (a.form != DW_FORM_rnglistx) return;
      ++seen;
      CHECK_FALSE(old_walker.range_list_offset(a, rnglists.bytes, 12, offset));
    }));
    CHECK(seen == 2);

    // .debug_addr entries by index from the unit's base, as addrx reads them.
    Assembler addresses;
    addresses.little = little;
    addresses.fixed(0, 8).fixed(0x1000, 8).fixed(0x2000, 8);
    uint64_t address = 0;
    CHECK(walker.indexed_address(addresses.bytes, 8, 1, address));
    CHECK(address == 0x2000);
    CHECK_FALSE(walker.indexed_address(addresses.bytes, 8, 2, address));
    CHECK_FALSE(walker.indexed_address(addresses.bytes, std::nullopt, 0, address));
    CHECK_FALSE(walker.indexed_address(addresses.bytes, 8, UINT64_MAX / 4, address));
  }
}
