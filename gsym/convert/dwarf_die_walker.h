// gsym/convert/dwarf_die_walker.h - the structure of one unit's DIE tree, read
// straight from .debug_info and .debug_abbrev: each DIE's offset, tag and
// whether it has children, in pre-order, with the ends of child lists.
//
// Why not libdw's dwarf_child/dwarf_siblingof: they look every DIE's
// abbreviation up again in a locked hash table and scan its attributes once
// more for the sibling; on C++ DWARF, where most DIEs are types, members and
// parameters the converter never reads, that was most of the conversion time.
// Here a unit's abbreviations are parsed once into a table indexed by code,
// and DIEs whose attributes are all of fixed size are skipped in one step.
// The converter reads the attributes of the DIEs it needs from these bytes
// too (for_each_attribute, die_at for references inside the unit), with
// libdw for the forms it does not read itself.
//
// Like LLVM's DWARF parser, the walk is linear; the caller may skip a DIE's
// children through its DW_AT_sibling (skip_children) and read them back
// later (descendants).
// Input is untrusted: every read is bounds-checked, and malformed input ends
// the walk with an error message, never reads outside the unit.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gsym {

struct DwarfUnitShape {
  uint16_t version = 4;
  uint8_t address_size = 8;
  uint8_t offset_size = 4;  // 4 = DWARF32, 8 = DWARF64
  bool little_endian = true;
};

class DwarfDieWalker {
 public:
  // One step of the walk.
  struct Step {
    enum Kind : uint8_t { Die, EndOfChildren, End } kind = End;
    uint64_t offset = 0;  // of the DIE in .debug_info (Die)
    uint32_t tag = 0;
    bool has_children = false;
    uint32_t abbrev = 0;                // its abbreviation code
    const uint8_t* attributes = nullptr;  // its attribute values
  };

  // One attribute of a DIE: its name, form and where its value is.
  struct Attribute {
    uint16_t name = 0;
    uint16_t form = 0;
    const uint8_t* value = nullptr;
    int64_t implicit_const = 0;  // DW_FORM_implicit_const's value
  };

  // Calls `f(const Attribute&)` for each attribute of the DIE `step` returned
  // (by the latest next(): the unit's bytes must still be there).
  template <class F>
  bool for_each_attribute(const Step& step, F&& f) const {
    return visit_attributes(step, false, f);
  }

  // The attribute names for_each_wanted_attribute gives (at most 32); set
  // before start(), which plans where each abbreviation holds them.
  void want_attributes(std::span<const uint16_t> names);

  // for_each_attribute for the wanted attributes only, in the DIE's order,
  // with the same result. A DIE whose values are all of fixed size (most
  // inlined subroutines, abstract subprograms) is read at the offsets its
  // abbreviation's plan holds, without stepping over the others.
  template <class F>
  bool for_each_wanted_attribute(const Step& step, F&& f) const {
    if (step.kind != Step::Die || step.abbrev >= abbrevs_.size()) return false;
    const Abbrev& a = abbrevs_[step.abbrev];
    if (a.fixed_size < 0) return visit_attributes(step, true, f);
    if (end_ - step.attributes < a.fixed_size) return false;  // as for_each_attribute's checks
    for (uint32_t i = 0; i < a.wanted_count; ++i) {
      const WantedAt& w = wanted_at_[a.wanted_begin + i];
      const Spec& spec = specs_[w.spec];
      f(Attribute{spec.name, spec.form, step.attributes + w.offset, spec.implicit_const});
    }
    return true;
  }

  // Whether the DIE `step` returned has an attribute `name` of its own.
  bool has_attribute(const Step& step, uint16_t name) const {
    if (step.kind != Step::Die || step.abbrev >= abbrevs_.size()) return false;
    const Abbrev& a = abbrevs_[step.abbrev];
    for (uint32_t i = 0; i < a.specs_count; ++i)
      if (specs_[a.specs_begin + i].name == name) return true;
    return false;
  }

  // The value of a constant, reference (unit-relative as stored), address,
  // flag or section-offset attribute; false for other forms (strings,
  // blocks, indexed forms, indirect).
  bool unsigned_value(const Attribute& attr, uint64_t& value) const;

  // Where a unit's string attributes point: the string sections, and for
  // DWARF 5's indexed forms its DW_AT_str_offsets_base into
  // .debug_str_offsets (unknown: those forms are not read).
  struct StringSections {
    std::span<const uint8_t> debug_str, debug_line_str, debug_str_offsets;
    std::optional<uint64_t> str_offsets_base;
  };
  // The string of a DW_FORM_string, strp, line_strp or strx/strx1-4
  // attribute, as libdw's dwarf_formstring gives it: a pointer into the DIE
  // or .debug_str / .debug_line_str. False for other forms, and for any
  // offset or index outside its section or a string not ended inside it.
  bool string_value(const Attribute& attr, const StringSections& sections, const char*& value) const;

  // The address of a DW_FORM_addr attribute, or of an indexed one
  // (addrx/addrx1-4) in `debug_addr` from the unit's DW_AT_addr_base
  // `addr_base`, as libdw's dwarf_formaddr gives it; false for other forms,
  // an unknown base or an entry outside the section.
  bool address_value(const Attribute& attr, std::span<const uint8_t> debug_addr,
                     std::optional<uint64_t> addr_base, uint64_t& value) const;

  // Entry `index` of the unit's addresses in `debug_addr` (from its
  // DW_AT_addr_base `addr_base`): an addrx form's value, or a range list's
  // DW_RLE_*x operand. False for an unknown base or an entry outside the
  // section.
  bool indexed_address(std::span<const uint8_t> debug_addr, std::optional<uint64_t> addr_base, uint64_t index,
                       uint64_t& value) const;

  // Where a DW_AT_ranges attribute's list starts in its section: a
  // DW_FORM_sec_offset's value, or for DW_FORM_rnglistx the entry of the
  // unit's offset table in `debug_rnglists` (from its DW_AT_rnglists_base
  // `rnglists_base`) plus that base, as libdw's dwarf_ranges finds it. False
  // for other forms, an unknown base, a unit before DWARF 5, and an index or
  // base outside the section (libdw's error cases).
  bool range_list_offset(const Attribute& attr, std::span<const uint8_t> debug_rnglists,
                         std::optional<uint64_t> rnglists_base, uint64_t& offset) const;

  // The DIE at .debug_info offset `offset` of the unit being walked, as
  // next() returns one (its attributes for for_each_attribute), without
  // moving the walk; End when no DIE of a defined abbreviation starts there.
  // Used for references inside the unit (abstract_origin, specification).
  Step die_at(uint64_t offset) const;

  // Reads the abbreviation table at `abbrev_offset` of `debug_abbrev`.
  // `unit` is the unit's DIE bytes: from its first DIE (at .debug_info
  // offset `first_die_offset`) to the end of the unit.
  bool start(std::span<const uint8_t> debug_abbrev, uint64_t abbrev_offset,
             std::span<const uint8_t> unit, uint64_t first_die_offset, const DwarfUnitShape& shape);

  // The next step: a DIE (its attributes are skipped, so the following step
  // is its first child if it has children, else its next sibling), the end
  // of the current child list, or End (the unit DIE's children are done, or
  // an error: check ok()).
  // Inline for the common step, a DIE of a one-byte abbreviation code whose
  // values are all of fixed size (three in four of a C program's): the
  // call and the Step returned through memory were a third of the walk's
  // cost. Anything else, errors included, is next_step()'s.
  Step next() {
    if (!finished_ && (depth_ != 0 || !started_) && pos_ != end_) {
      const uint8_t code = *pos_;
      if (code != 0 && code < 0x80 && code < abbrevs_.size()) {
        const Abbrev& a = abbrevs_[code];
        const uint8_t* const attributes = pos_ + 1;
        if (a.defined && a.fixed_size >= 0 && end_ - attributes >= a.fixed_size) {
          Step step;
          step.kind = Step::Die;
          step.offset = first_offset_ + static_cast<uint64_t>(pos_ - begin_);
          step.tag = a.tag;
          step.has_children = a.has_children;
          step.abbrev = code;
          step.attributes = attributes;
          last_die_ = attributes;
          started_ = true;
          if (a.has_children) ++depth_;
          pos_ = attributes + a.fixed_size;
          return step;
        }
      }
    }
    return next_step();
  }

  // The DW_AT_sibling of `step`, the DIE next() just returned, as stored
  // (a reference relative to its unit's header); false when it has none or
  // one of another form than ref1/2/4/8/udata.
  bool sibling(const Step& step, uint64_t& value) const;

  // Moves the walk past the children of `step`, the DIE next() just
  // returned, to its next sibling at .debug_info offset `sibling` (its
  // DW_AT_sibling): the following next() returns that sibling, as if the
  // children and the end of their list had been walked. False, with the
  // walk unmoved, unless `step` has children and `sibling` lies after its
  // attributes, inside the unit, right after a null entry (the end of a
  // child list).
  bool skip_children(const Step& step, uint64_t sibling);

  // Each DIE below the DIE at `offset` (its children, theirs, ... in
  // pre-order) with its parent and tag, appended to `out`, without moving
  // the walk; at most `max_depth` levels. False on bytes that do not decode,
  // a subtree deeper than that, or one that runs past the unit.
  struct Descendant {
    uint64_t offset = 0, parent = 0;
    uint32_t tag = 0;
  };
  bool descendants(uint64_t offset, uint32_t max_depth, std::vector<Descendant>& out) const;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  struct Abbrev {
    uint32_t tag = 0;
    bool has_children = false;
    bool defined = false;
    int32_t fixed_size = -1;  // all attribute values' total size, -1 = varies
    uint32_t ops_begin = 0, ops_count = 0;
    uint32_t specs_begin = 0, specs_count = 0;
    // Its wanted attributes in wanted_at_, when fixed_size >= 0.
    uint32_t wanted_begin = 0, wanted_count = 0;
    // DW_AT_sibling: its offset in the attribute bytes and width (ref1/2/4/8)
    // when the values before it are of fixed size; else, when it is there,
    // sibling_scan (for_each_attribute finds it).
    int16_t sibling_at = -1;
    uint8_t sibling_width = 0;
    bool sibling_scan = false;
  };
  // How to skip the attribute values: runs of fixed-size values merged into
  // one op (form 0, `size` bytes), other forms one op each.
  struct SkipOp {
    uint16_t form = 0;
    uint16_t size = 0;
  };
  struct Spec {
    uint16_t name = 0;
    uint16_t form = 0;
    int16_t size = -1;  // fixed_form_size(form), computed once
    bool wanted = false;  // its name is one of want_attributes'
    int64_t implicit_const = 0;
  };
  // A wanted attribute of an abbreviation of fixed size: its spec and the
  // offset of its value from the DIE's first.
  struct WantedAt {
    uint32_t spec = 0;
    uint32_t offset = 0;
  };
  // for_each_attribute, or with `wanted_only` for_each_wanted_attribute.
  template <class F>
  bool visit_attributes(const Step& step, bool wanted_only, F& f) const {
    if (step.kind != Step::Die || step.abbrev >= abbrevs_.size()) return false;
    const Abbrev& a = abbrevs_[step.abbrev];
    const uint8_t* p = step.attributes;
    for (uint32_t i = 0; i < a.specs_count; ++i) {
      const Spec& spec = specs_[a.specs_begin + i];
      const Attribute attr{spec.name, spec.form, p, spec.implicit_const};
      if (spec.size >= 0) {
        if (end_ - p < spec.size) return false;
        p += spec.size;
      } else if (!skip_variable_value(spec.form, p, 0)) {
        return false;
      }
      if (!wanted_only || spec.wanted) f(attr);
    }
    return true;
  }
  Step next_step();  // next() for every case
  bool parse_abbrevs(std::span<const uint8_t> section, uint64_t offset);
  // Moves `p` from a DIE's first attribute value past its last: PastEnd if
  // they run past the unit, BadValue (`bad_form`) if a value does not decode.
  enum class Skip : uint8_t { Ok, PastEnd, BadValue };
  Skip skip_attributes(const Abbrev& a, const uint8_t*& p, uint16_t& bad_form) const;
  void fail_attributes(uint64_t offset, Skip skip, uint16_t bad_form);
  bool skip_value(uint64_t form, const uint8_t*& p, int indirections) const;
  // skip_value for a form whose size is not fixed (fixed_form_size < 0).
  bool skip_variable_value(uint64_t form, const uint8_t*& p, int indirections) const;
  int fixed_form_size(uint64_t form) const;  // -1 = not fixed
  // fixed_form_size for the unit's shape, from a table for the standard
  // forms (parse_abbrevs asks for every attribute of every abbreviation).
  int form_size(uint64_t form) const {
    return form < standard_form_sizes_.size() ? standard_form_sizes_[form] : fixed_form_size(form);
  }
  std::array<int8_t, 0x2d> standard_form_sizes_{};  // DW_FORM_addr .. DW_FORM_addrx4
  void fail(std::string message);

  std::vector<Abbrev> abbrevs_;  // by code (codes are small and dense in practice)
  std::vector<SkipOp> ops_;
  std::vector<Spec> specs_;
  std::vector<WantedAt> wanted_at_;
  std::vector<uint16_t> wanted_names_;
  DwarfUnitShape shape_;
  const uint8_t* begin_ = nullptr;
  const uint8_t* pos_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t first_offset_ = 0;
  uint32_t depth_ = 0;  // open child lists
  const uint8_t* last_die_ = nullptr;  // attributes of the DIE next() returned last
  bool started_ = false;
  bool finished_ = false;
  std::string error_;
};

}  // namespace gsym
