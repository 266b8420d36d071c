#include "gsym/convert/dwarf_die_walker.h"

#include <dwarf.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "gsym/base/expected.h"
#include "gsym/format/leb128.h"

namespace gsym {

namespace {

// Codes above this are kept out of the code-indexed table (a hostile table
// could name code 2^63); real producers number their abbreviations 1, 2, ...
constexpr uint64_t kMaxAbbrevCode = 1u << 16;
constexpr size_t kMaxForms = 1u << 24;

// LEB128 by leb128.h's rule with one byte of padding allowed beyond the
// shortest 64-bit form; false on truncation, overlong or overflowing values
// (LLVM: "uleb128 too big").
constexpr unsigned kDwarfLebBytes = kMaxLebBytes + 1;

// Inlined for the one-byte case (DIE and abbreviation codes, names, forms:
// a call per DIE code was a tenth of the walk); longer values call out.
[[gnu::noinline]] bool read_long_uleb(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  return leb128::decode_uleb<kDwarfLebBytes>(p, end, value) == leb128::Result::Ok;
}
[[gnu::always_inline]] inline bool read_uleb(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  if (p != end && *p < 0x80) {
    value = *p++;
    return true;
  }
  return read_long_uleb(p, end, value);
}

bool read_sleb(const uint8_t*& p, const uint8_t* end, int64_t& value) {
  return leb128::decode_sleb<kDwarfLebBytes>(p, end, value) == leb128::Result::Ok;
}

bool skip_leb(const uint8_t*& p, const uint8_t* end) { return leb128::skip<kDwarfLebBytes>(p, end); }

// The `width`-byte unsigned number at `p` in the file's byte order (the
// caller has checked the bytes are there). In the host's order, one load:
// the byte loop was most of reading a DIE's constants and references.
template <class T>
uint64_t load(const uint8_t* p) {
  T word;
  std::memcpy(&word, p, sizeof word);
  return word;
}
uint64_t read_word(const uint8_t* p, int width, bool little) {
  if (little == (std::endian::native == std::endian::little)) {
    switch (width) {
      case 1: return p[0];
      case 2: return load<uint16_t>(p);
      case 4: return load<uint32_t>(p);
      case 8: return load<uint64_t>(p);
      default: break;
    }
  }
  uint64_t word = 0;
  for (int i = 0; i < width; ++i) word |= uint64_t(p[i]) << (little ? 8 * i : 8 * (width - 1 - i));
  return word;
}

}  // namespace

void DwarfDieWalker::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  finished_ = true;
}

int DwarfDieWalker::fixed_form_size(uint64_t form) const {
  switch (form) {
    case DW_FORM_flag_present:
    case DW_FORM_implicit_const:
      return 0;
    case DW_FORM_data1:
    case DW_FORM_ref1:
    case DW_FORM_flag:
    case DW_FORM_strx1:
    case DW_FORM_addrx1:
      return 1;
    case DW_FORM_data2:
    case DW_FORM_ref2:
    case DW_FORM_strx2:
    case DW_FORM_addrx2:
      return 2;
    case DW_FORM_strx3:
    case DW_FORM_addrx3:
      return 3;
    case DW_FORM_data4:
    case DW_FORM_ref4:
    case DW_FORM_strx4:
    case DW_FORM_addrx4:
    case DW_FORM_ref_sup4:
      return 4;
    case DW_FORM_data8:
    case DW_FORM_ref8:
    case DW_FORM_ref_sig8:
    case DW_FORM_ref_sup8:
      return 8;
    case DW_FORM_data16:
      return 16;
    case DW_FORM_addr:
      return shape_.address_size;
    case DW_FORM_ref_addr:
      return shape_.version <= 2 ? shape_.address_size : shape_.offset_size;
    case DW_FORM_strp:
    case DW_FORM_line_strp:
    case DW_FORM_sec_offset:
    case DW_FORM_strp_sup:
    case DW_FORM_GNU_ref_alt:
    case DW_FORM_GNU_strp_alt:
      return shape_.offset_size;
    default:
      return -1;
  }
}

bool DwarfDieWalker::parse_abbrevs(std::span<const uint8_t> section, uint64_t offset) {
  abbrevs_.clear();
  ops_.clear();
  specs_.clear();
  wanted_at_.clear();
  if (offset >= section.size()) {
    fail("abbreviation offset " + hex_number(offset) + " is outside .debug_abbrev");
    return false;
  }
  const uint8_t* p = section.data() + offset;
  const uint8_t* const end = section.data() + section.size();
  for (;;) {
    uint64_t code, tag, name, form;
    if (!read_uleb(p, end, code)) break;
    if (code == 0) return true;
    if (!read_uleb(p, end, tag) || p >= end) break;
    const bool has_children = *p++ != 0;
    if (code > kMaxAbbrevCode) {
      fail("abbreviation code " + std::to_string(code) + " is too large");
      return false;
    }
    if (code >= abbrevs_.size()) abbrevs_.resize(code + 1);
    Abbrev& a = abbrevs_[code];
    if (a.defined) {
      fail("abbreviation code " + std::to_string(code) + " is defined twice");
      return false;
    }
    a.defined = true;
    a.tag = static_cast<uint32_t>(tag);
    a.has_children = has_children;
    a.ops_begin = static_cast<uint32_t>(ops_.size());
    a.specs_begin = static_cast<uint32_t>(specs_.size());
    a.wanted_begin = static_cast<uint32_t>(wanted_at_.size());
    int64_t fixed = 0;
    for (;;) {
      if (!read_uleb(p, end, name) || !read_uleb(p, end, form)) {
        fail("truncated abbreviation " + std::to_string(code));
        return false;
      }
      if (name == 0 && form == 0) break;
      int64_t implicit_const = 0;
      if (form == DW_FORM_implicit_const && !read_sleb(p, end, implicit_const)) {
        fail("truncated abbreviation " + std::to_string(code));
        return false;
      }
      if (form == 0 || form > UINT16_MAX || ops_.size() >= kMaxForms) {
        fail("abbreviation " + std::to_string(code) + " has an unknown form " + hex_number(form));
        return false;
      }
      const int size = form_size(form);
      if (name == DW_AT_sibling) {  // where its value is, when the bytes before it are of fixed size
        const bool fixed_ref = form == DW_FORM_ref1 || form == DW_FORM_ref2 || form == DW_FORM_ref4 || form == DW_FORM_ref8;
        a.sibling_at = fixed_ref && fixed >= 0 && fixed < INT16_MAX ? static_cast<int16_t>(fixed) : int16_t{-1};
        a.sibling_width = fixed_ref ? static_cast<uint8_t>(size) : 0;
        a.sibling_scan = a.sibling_at < 0;
      }
      const uint16_t short_name = static_cast<uint16_t>(name <= UINT16_MAX ? name : 0);
      const bool wanted = short_name != 0 && std::find(wanted_names_.begin(), wanted_names_.end(), short_name) !=
                                                 wanted_names_.end();
      if (wanted && fixed >= 0 && fixed < INT32_MAX)
        wanted_at_.push_back({static_cast<uint32_t>(specs_.size()), static_cast<uint32_t>(fixed)});
      specs_.push_back({short_name, static_cast<uint16_t>(form), static_cast<int16_t>(size), wanted, implicit_const});
      fixed = size < 0 || fixed < 0 ? -1 : fixed + size;
      if (size == 0) continue;
      if (size > 0 && ops_.size() > a.ops_begin && ops_.back().form == 0 && ops_.back().size < 0x7fff)
        ops_.back().size = static_cast<uint16_t>(ops_.back().size + size);
      else
        ops_.push_back(size > 0 ? SkipOp{0, static_cast<uint16_t>(size)}
                                : SkipOp{static_cast<uint16_t>(form), 0});
    }
    a.ops_count = static_cast<uint32_t>(ops_.size() - a.ops_begin);
    a.specs_count = static_cast<uint32_t>(specs_.size() - a.specs_begin);
    a.fixed_size = fixed >= 0 && fixed < INT32_MAX ? static_cast<int32_t>(fixed) : -1;
    // The plan serves fixed-size abbreviations only; others keep no entries.
    if (a.fixed_size < 0) wanted_at_.resize(a.wanted_begin);
    a.wanted_count = static_cast<uint32_t>(wanted_at_.size() - a.wanted_begin);
  }
  fail("truncated abbreviation table at " + hex_number(offset));
  return false;
}

void DwarfDieWalker::want_attributes(std::span<const uint16_t> names) {
  wanted_names_.assign(names.begin(), names.begin() + std::min<size_t>(names.size(), 32));
}

bool DwarfDieWalker::start(std::span<const uint8_t> debug_abbrev, uint64_t abbrev_offset,
                           std::span<const uint8_t> unit, uint64_t first_die_offset,
                           const DwarfUnitShape& shape) {
  shape_ = shape;
  error_.clear();
  finished_ = false;
  started_ = false;
  depth_ = 0;
  last_die_ = nullptr;
  begin_ = pos_ = unit.data();
  end_ = unit.data() + unit.size();
  first_offset_ = first_die_offset;
  if (shape.offset_size != 4 && shape.offset_size != 8) {
    fail("unit offset size " + std::to_string(shape.offset_size));
    return false;
  }
  for (size_t form = 0; form < standard_form_sizes_.size(); ++form)
    standard_form_sizes_[form] = static_cast<int8_t>(fixed_form_size(form));
  return parse_abbrevs(debug_abbrev, abbrev_offset);
}

bool DwarfDieWalker::skip_value(uint64_t form, const uint8_t*& p, int indirections) const {
  const int fixed = fixed_form_size(form);
  if (fixed >= 0) {
    if (end_ - p < fixed) return false;
    p += fixed;
    return true;
  }
  return skip_variable_value(form, p, indirections);
}

bool DwarfDieWalker::skip_variable_value(uint64_t form, const uint8_t*& p, int indirections) const {
  uint64_t length = 0;
  switch (form) {
    case DW_FORM_udata:
    case DW_FORM_sdata:
    case DW_FORM_ref_udata:
    case DW_FORM_strx:
    case DW_FORM_addrx:
    case DW_FORM_loclistx:
    case DW_FORM_rnglistx:
    case DW_FORM_GNU_addr_index:
    case DW_FORM_GNU_str_index:
      return skip_leb(p, end_);
    case DW_FORM_string: {
      const void* nul = std::memchr(p, 0, static_cast<size_t>(end_ - p));
      if (!nul) return false;
      p = static_cast<const uint8_t*>(nul) + 1;
      return true;
    }
    case DW_FORM_block1:
      if (end_ - p < 1) return false;
      length = *p++;
      break;
    case DW_FORM_block2:
    case DW_FORM_block4: {
      const int width = form == DW_FORM_block2 ? 2 : 4;
      if (end_ - p < width) return false;
      length = read_word(p, width, shape_.little_endian);
      p += width;
      break;
    }
    case DW_FORM_block:
    case DW_FORM_exprloc:
      if (!read_uleb(p, end_, length)) return false;
      break;
    case DW_FORM_indirect: {
      uint64_t actual;
      if (indirections > 4 || !read_uleb(p, end_, actual) || actual == DW_FORM_implicit_const)
        return false;
      return skip_value(actual, p, indirections + 1);
    }
    default:
      return false;
  }
  if (length > static_cast<uint64_t>(end_ - p)) return false;
  p += length;
  return true;
}

// Out of next()'s way: building the message is for malformed input only.
[[gnu::noinline, gnu::cold]] void DwarfDieWalker::fail_attributes(uint64_t offset, Skip skip, uint16_t bad_form) {
  if (skip == Skip::PastEnd)
    fail("DIE at " + hex_number(offset) + " runs past the end of its unit");
  else
    fail("DIE at " + hex_number(offset) + ": cannot read an attribute of form " + hex_number(bad_form));
}

// Inlined into next(), the walk's innermost loop.
[[gnu::always_inline]] inline DwarfDieWalker::Skip DwarfDieWalker::skip_attributes(const Abbrev& a, const uint8_t*& p,
                                                      uint16_t& bad_form) const {
  if (a.fixed_size >= 0) {
    if (end_ - p < a.fixed_size) return Skip::PastEnd;
    p += a.fixed_size;
    return Skip::Ok;
  }
  for (uint32_t i = 0; i < a.ops_count; ++i) {
    const SkipOp op = ops_[a.ops_begin + i];
    if (op.form == 0) {
      if (end_ - p < op.size) return Skip::PastEnd;
      p += op.size;
    } else if (!skip_variable_value(op.form, p, 0)) {  // ops of other forms are all variable
      bad_form = op.form;
      return Skip::BadValue;
    }
  }
  return Skip::Ok;
}

DwarfDieWalker::Step DwarfDieWalker::next_step() {
  Step step;
  if (finished_) return step;
  if (started_ && depth_ == 0) {  // the unit DIE had no children, or they ended
    finished_ = true;
    return step;
  }
  const uint64_t offset = first_offset_ + static_cast<uint64_t>(pos_ - begin_);
  uint64_t code;
  if (!read_uleb(pos_, end_, code)) {
    fail("unit ends inside its DIE tree at " + hex_number(offset));
    return step;
  }
  if (code == 0) {
    if (!started_) {
      fail("the unit has no unit DIE");
      return step;
    }
    --depth_;
    step.kind = Step::EndOfChildren;
    step.offset = offset;
    return step;
  }
  const Abbrev* a = code < abbrevs_.size() ? &abbrevs_[code] : nullptr;
  if (!a || !a->defined) {
    fail("DIE at " + hex_number(offset) + " uses undefined abbreviation " + std::to_string(code));
    return step;
  }
  const uint8_t* const attributes = pos_;
  uint16_t bad_form = 0;
  if (const Skip skip = skip_attributes(*a, pos_, bad_form); skip != Skip::Ok) {
    fail_attributes(offset, skip, bad_form);
    return step;
  }
  step.abbrev = static_cast<uint32_t>(code);
  step.attributes = attributes;
  last_die_ = attributes;
  started_ = true;
  if (a->has_children) ++depth_;
  step.kind = Step::Die;
  step.offset = offset;
  step.tag = a->tag;
  step.has_children = a->has_children;
  return step;
}

bool DwarfDieWalker::sibling(const Step& step, uint64_t& value) const {
  if (step.kind != Step::Die || step.attributes != last_die_ || step.abbrev >= abbrevs_.size()) return false;
  const Abbrev& a = abbrevs_[step.abbrev];
  if (a.sibling_at >= 0) {  // inside the DIE, which next() has bounds-checked
    value = read_word(step.attributes + a.sibling_at, a.sibling_width, shape_.little_endian);
    return true;
  }
  if (!a.sibling_scan) return false;
  bool found = false;
  for_each_attribute(step, [&](const Attribute& attr) {
    if (attr.name != DW_AT_sibling) return;
    switch (attr.form) {  // references inside the unit only
      case DW_FORM_ref1: case DW_FORM_ref2: case DW_FORM_ref4: case DW_FORM_ref8: case DW_FORM_ref_udata:
        found = unsigned_value(attr, value);
        break;
      default:
        found = false;
    }
  });
  return found;
}

bool DwarfDieWalker::skip_children(const Step& step, uint64_t sibling) {
  // The walk stands just past the attributes of the DIE next() returned
  // last: before its first child.
  if (step.kind != Step::Die || !step.has_children || step.attributes != last_die_ || depth_ == 0) return false;
  const uint64_t here = first_offset_ + static_cast<uint64_t>(pos_ - begin_);
  const uint64_t size = static_cast<uint64_t>(end_ - begin_);
  if (sibling <= here || sibling - first_offset_ > size) return false;
  // The children's list ends right before the sibling with its null entry:
  // a sibling elsewhere is not believed (the walk goes through the children).
  if (begin_[sibling - first_offset_ - 1] != 0) return false;
  pos_ = begin_ + (sibling - first_offset_);
  --depth_;
  last_die_ = nullptr;
  return true;
}

bool DwarfDieWalker::descendants(uint64_t offset, uint32_t max_depth, std::vector<Descendant>& out) const {
  const Step top = die_at(offset);
  if (top.kind != Step::Die) return false;
  if (!top.has_children) return true;
  const uint8_t* p = top.attributes;
  uint16_t bad_form = 0;
  if (skip_attributes(abbrevs_[top.abbrev], p, bad_form) != Skip::Ok) return false;
  std::vector<uint64_t> parents = {offset};
  while (!parents.empty()) {
    const uint64_t at = first_offset_ + static_cast<uint64_t>(p - begin_);
    uint64_t code;
    if (!read_uleb(p, end_, code)) return false;
    if (code == 0) {
      parents.pop_back();
      continue;
    }
    if (code >= abbrevs_.size() || !abbrevs_[code].defined) return false;
    const Abbrev& a = abbrevs_[code];
    out.push_back({at, parents.back(), a.tag});
    if (skip_attributes(a, p, bad_form) != Skip::Ok) return false;
    if (a.has_children) {
      if (parents.size() >= max_depth) return false;
      parents.push_back(at);
    }
  }
  return true;
}

bool DwarfDieWalker::unsigned_value(const Attribute& attr, uint64_t& value) const {
  auto fixed = [&](int width) {
    value = read_word(attr.value, width, shape_.little_endian);
    return true;
  };
  switch (attr.form) {
    case DW_FORM_flag_present:
      value = 1;
      return true;
    case DW_FORM_implicit_const:
      value = static_cast<uint64_t>(attr.implicit_const);
      return true;
    case DW_FORM_data1:
    case DW_FORM_ref1:
    case DW_FORM_flag:
      return fixed(1);
    case DW_FORM_data2:
    case DW_FORM_ref2:
      return fixed(2);
    case DW_FORM_data4:
    case DW_FORM_ref4:
      return fixed(4);
    case DW_FORM_data8:
    case DW_FORM_ref8:
      return fixed(8);
    case DW_FORM_addr:
      return shape_.address_size <= 8 && fixed(shape_.address_size);
    case DW_FORM_sec_offset:
    case DW_FORM_ref_addr:
      return fixed(fixed_form_size(attr.form));
    case DW_FORM_udata:
    case DW_FORM_ref_udata: {
      const uint8_t* p = attr.value;
      return read_uleb(p, end_, value);
    }
    default:
      return false;
  }
}

namespace {

// The index of a strx/strx1-4 (`address` false) or addrx/addrx1-4
// (`address` true) value: its LEB128 or fixed-width number; false for any
// other form.
bool index_value(uint16_t form, bool address, const uint8_t* value, const uint8_t* end, bool little,
                 uint64_t& index) {
  int width = 0;
  switch (form) {
    case DW_FORM_strx: if (address) return false; return read_uleb(value, end, index);
    case DW_FORM_addrx: if (!address) return false; return read_uleb(value, end, index);
    case DW_FORM_strx1: case DW_FORM_strx2: case DW_FORM_strx3: case DW_FORM_strx4:
      if (address) return false;
      width = form - DW_FORM_strx1 + 1;
      break;
    case DW_FORM_addrx1: case DW_FORM_addrx2: case DW_FORM_addrx3: case DW_FORM_addrx4:
      if (!address) return false;
      width = form - DW_FORM_addrx1 + 1;
      break;
    default: return false;
  }
  index = read_word(value, width, little);
  return true;
}

// The `width`-byte word at `offset` of `section`; false past its end.
bool section_word(std::span<const uint8_t> section, uint64_t offset, int width, bool little, uint64_t& word) {
  if (offset > section.size() || section.size() - offset < static_cast<uint64_t>(width)) return false;
  word = read_word(section.data() + offset, width, little);
  return true;
}

}  // namespace

bool DwarfDieWalker::string_value(const Attribute& attr, const StringSections& sections, const char*& value) const {
  if (attr.form == DW_FORM_string) {  // for_each_attribute found its NUL inside the unit
    value = reinterpret_cast<const char*>(attr.value);
    return true;
  }
  const bool little = shape_.little_endian;
  std::span<const uint8_t> section = sections.debug_str;
  uint64_t offset = 0;
  uint64_t index = 0;
  if (attr.form == DW_FORM_strp || attr.form == DW_FORM_line_strp) {
    if (attr.form == DW_FORM_line_strp) section = sections.debug_line_str;
    offset = read_word(attr.value, shape_.offset_size, little);  // for_each_attribute checked its bytes
  } else if (index_value(attr.form, false, attr.value, end_, little, index)) {
    // .debug_str_offsets: the unit's offset-sized entries from its base.
    const uint64_t width = shape_.offset_size;
    if (!sections.str_offsets_base || index > (UINT64_MAX - *sections.str_offsets_base) / width ||
        !section_word(sections.debug_str_offsets, *sections.str_offsets_base + index * width, shape_.offset_size,
                      little, offset))
      return false;
  } else {
    return false;
  }
  if (offset >= section.size() || !std::memchr(section.data() + offset, 0, section.size() - offset)) return false;
  value = reinterpret_cast<const char*>(section.data() + offset);
  return true;
}

bool DwarfDieWalker::address_value(const Attribute& attr, std::span<const uint8_t> debug_addr,
                                   std::optional<uint64_t> addr_base, uint64_t& value) const {
  const int width = shape_.address_size;
  if (width != 4 && width != 8) return false;
  if (attr.form == DW_FORM_addr) {  // for_each_attribute checked its bytes
    value = read_word(attr.value, width, shape_.little_endian);
    return true;
  }
  uint64_t index = 0;
  return index_value(attr.form, true, attr.value, end_, shape_.little_endian, index) &&
         indexed_address(debug_addr, addr_base, index, value);
}

bool DwarfDieWalker::indexed_address(std::span<const uint8_t> debug_addr, std::optional<uint64_t> addr_base,
                                     uint64_t index, uint64_t& value) const {
  const int width = shape_.address_size;
  if ((width != 4 && width != 8) || !addr_base || index > (UINT64_MAX - *addr_base) / uint64_t(width))
    return false;
  return section_word(debug_addr, *addr_base + index * uint64_t(width), width, shape_.little_endian, value);
}

bool DwarfDieWalker::range_list_offset(const Attribute& attr, std::span<const uint8_t> debug_rnglists,
                                       std::optional<uint64_t> rnglists_base, uint64_t& offset) const {
  if (attr.form == DW_FORM_sec_offset) return unsigned_value(attr, offset);
  // rnglistx is DWARF 5's (libdw would index .debug_ranges in an older unit).
  if (attr.form != DW_FORM_rnglistx || !rnglists_base || shape_.version < 5) return false;
  uint64_t index = 0;
  const uint8_t* p = attr.value;
  if (!read_uleb(p, end_, index)) return false;
  // libdw's bounds: the base leaves room for one entry, the index names an
  // entry inside the section.
  const uint64_t width = shape_.offset_size;
  const uint64_t size = debug_rnglists.size();
  const uint64_t base = *rnglists_base;
  if (width > size || base > size - width || index > (size - width - base) / width) return false;
  uint64_t entry = 0;
  if (!section_word(debug_rnglists, base + index * width, static_cast<int>(width), shape_.little_endian, entry) ||
      entry > UINT64_MAX - base)
    return false;
  offset = base + entry;
  return true;
}

DwarfDieWalker::Step DwarfDieWalker::die_at(uint64_t offset) const {
  Step step;
  if (offset < first_offset_ || offset - first_offset_ >= static_cast<uint64_t>(end_ - begin_)) return step;
  const uint8_t* p = begin_ + (offset - first_offset_);
  uint64_t code;
  if (!read_uleb(p, end_, code) || code == 0 || code >= abbrevs_.size() || !abbrevs_[code].defined) return step;
  const Abbrev& a = abbrevs_[code];
  step.kind = Step::Die;
  step.offset = offset;
  step.tag = a.tag;
  step.has_children = a.has_children;
  step.abbrev = static_cast<uint32_t>(code);
  step.attributes = p;
  return step;
}

}  // namespace gsym
