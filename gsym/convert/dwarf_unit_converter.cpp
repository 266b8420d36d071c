#include "gsym/convert/dwarf_unit_converter.h"

#include "gsym/base/pod_array.h"
#include "gsym/convert/dwarf_die_walker.h"
#include "gsym/convert/elf_handle.h"
#include "gsym/format/leb128.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>
#include <unordered_map>

namespace gsym {

namespace {

// Deeper DIE nesting than this is treated as a malformed unit (it also bounds
// the recursion of the walk).
constexpr int kMaxDieDepth = 1024;
constexpr int kMaxDeclContextHops = 64;

// A DIE's identity across the unit's file and its dwz alt file
// (.gnu_debugaltlink): DW_FORM_GNU_ref_alt / DW_FORM_ref_sup* references
// land in the alt file, whose offsets overlap the main file's, so every memo
// is keyed by (file, offset): the offset, with the top bit set for the alt file.
using DieKey = uint64_t;
constexpr DieKey kAltFileBit = DieKey{1} << 63;

bool in_other_file(Dwarf* main, Dwarf_Die* die) { return dwarf_cu_getdwarf(die->cu) != main; }

DieKey die_key(Dwarf* main, Dwarf_Die* die) {
  return dwarf_dieoffset(die) | (in_other_file(main, die) ? kAltFileBit : 0);
}

std::string dwarf_error() {
  const char* msg = dwarf_errmsg(-1);
  return msg ? msg : "unknown libdw error";
}

// dwarf_formref_die, except DWARF 5's DW_FORM_ref_sup4/8 (dwz -5), which
// libdw 0.188 resolves in the DIE's own file at the same offset: those are
// offsets in the supplementary file (installed as the alt file).
bool formref_die(Dwarf_Attribute* attr, Dwarf_Die* result) {
  if (attr->form != DW_FORM_ref_sup4 && attr->form != DW_FORM_ref_sup8)
    return dwarf_formref_die(attr, result) != nullptr;
  Dwarf* own = dwarf_cu_getdwarf(attr->cu);
  Dwarf* alt = own ? dwarf_getalt(own) : nullptr;
  Elf* elf = own ? dwarf_getelf(own) : nullptr;
  const char* ident = elf ? elf_getident(elf, nullptr) : nullptr;
  if (!alt || !ident || !attr->valp) return false;
  // dwarf_getattrs / dwarf_attr checked the value lies inside the unit.
  const int size = attr->form == DW_FORM_ref_sup4 ? 4 : 8;
  uint64_t offset = 0;
  for (int i = 0; i < size; ++i) {
    const int shift = ident[EI_DATA] == ELFDATA2LSB ? 8 * i : 8 * (size - 1 - i);
    offset |= uint64_t(attr->valp[i]) << shift;
  }
  return dwarf_offdie(alt, offset, result) != nullptr;
}

// dwarf_attr_integrate with formref_die: the attribute of the DIE, else of
// its abstract_origin, else of its specification, ... (17 DIEs at most, as libdw).
Dwarf_Attribute* attr_integrate(Dwarf_Die* die, unsigned name, Dwarf_Attribute* mem) {
  Dwarf_Die current = *die;
  for (int hop = 0; hop < 17; ++hop) {
    if (Dwarf_Attribute* a = dwarf_attr(&current, name, mem)) return a;
    Dwarf_Attribute ref;
    if (!dwarf_attr(&current, DW_AT_abstract_origin, &ref) && !dwarf_attr(&current, DW_AT_specification, &ref))
      return nullptr;
    if (!formref_die(&ref, &current)) return nullptr;
  }
  return nullptr;
}

const char* attr_string(Dwarf_Die* die, unsigned name, bool integrate) {
  Dwarf_Attribute mem;
  Dwarf_Attribute* a = integrate ? attr_integrate(die, name, &mem) : dwarf_attr(die, name, &mem);
  return a ? dwarf_formstring(a) : nullptr;
}

std::optional<uint64_t> attr_unsigned(Dwarf_Die* die, unsigned name, bool integrate) {
  Dwarf_Attribute mem;
  Dwarf_Attribute* a = integrate ? attr_integrate(die, name, &mem) : dwarf_attr(die, name, &mem);
  Dwarf_Word v;
  if (!a || dwarf_formudata(a, &v) != 0) return std::nullopt;
  return v;
}

// The attributes the converter reads from a subprogram or inlined subroutine,
// gathered in one dwarf_getattrs pass per DIE of its abstract_origin /
// specification chain (instead of one dwarf_attr_integrate walk each).
struct DieAttributes {
  const char* linkage_name = nullptr;
  const char* name = nullptr;
  std::optional<uint64_t> call_file, call_line, decl_file, decl_line;  // call_line: own only
  // decl_file's form was DW_FORM_implicit_const (gcc's DWARF 5 for a file
  // shared by many DIEs): LLVM 22 cannot resolve such a file (the value has
  // no unit), so its decl_file/decl_line line-table fallback gives nothing.
  // Likewise a decl_file read from the dwz alt file: it indexes a partial
  // unit's line table there, not this unit's.
  bool decl_file_implicit_const = false;
  DieKey origin = 0;        // the DIE's own abstract_origin/specification target
  bool own_names = false;   // the DIE itself has a name or linkage name
  // The DIE's own address attributes (valid while the DWARF data lives).
  // [low_pc, high_pc) from the DIE's own pair, as dwarf_highpc reads it (a
  // constant-class high_pc is an offset from low_pc); unknown = ask libdw's
  // dwarf_ranges (DW_AT_ranges, or forms not read here).
  AddressRange pc_range;
  bool pc_range_known = false;
  // Where the DIE's own DW_AT_ranges list starts, when it is a
  // DW_FORM_sec_offset or a rnglistx the unit's offset table resolves (read
  // by own_die_attributes only): the list is then read by own_range_list.
  std::optional<uint64_t> ranges_offset;
};

struct AttributeScan {
  Dwarf_Attribute mips_linkage, linkage, name, origin, spec, call_file, call_line, decl_file,
      decl_line, low_pc, high_pc;
  unsigned found = 0;  // bit per member above, in order
};

int collect_attribute(Dwarf_Attribute* attr, void* arg) {
  auto* scan = static_cast<AttributeScan*>(arg);
  switch (dwarf_whatattr(attr)) {
    case DW_AT_MIPS_linkage_name: scan->mips_linkage = *attr; scan->found |= 1; break;
    case DW_AT_linkage_name: scan->linkage = *attr; scan->found |= 2; break;
    case DW_AT_name: scan->name = *attr; scan->found |= 4; break;
    case DW_AT_abstract_origin: scan->origin = *attr; scan->found |= 8; break;
    case DW_AT_specification: scan->spec = *attr; scan->found |= 16; break;
    case DW_AT_call_file: scan->call_file = *attr; scan->found |= 32; break;
    case DW_AT_call_line: scan->call_line = *attr; scan->found |= 64; break;
    case DW_AT_decl_file: scan->decl_file = *attr; scan->found |= 128; break;
    case DW_AT_decl_line: scan->decl_line = *attr; scan->found |= 256; break;
    case DW_AT_low_pc: scan->low_pc = *attr; scan->found |= 512; break;
    case DW_AT_high_pc: scan->high_pc = *attr; scan->found |= 1024; break;
    default: break;
  }
  return DWARF_CB_OK;
}

std::optional<uint64_t> form_unsigned(Dwarf_Attribute* a) {
  Dwarf_Word v;
  if (dwarf_formudata(a, &v) != 0) return std::nullopt;
  return v;
}

// Whether a high_pc of this form is an address (else a length from low_pc).
bool is_address_form(unsigned form) {
  switch (form) {
    case DW_FORM_addr:
    case DW_FORM_addrx:
    case DW_FORM_addrx1:
    case DW_FORM_addrx2:
    case DW_FORM_addrx3:
    case DW_FORM_addrx4:
    case DW_FORM_GNU_addr_index:
      return true;
    default:
      return false;
  }
}

bool own_pc_range(AttributeScan& scan, AddressRange& range) {
  Dwarf_Addr low, high;
  if (dwarf_formaddr(&scan.low_pc, &low) != 0) return false;
  if (is_address_form(dwarf_whatform(&scan.high_pc))) {
    if (dwarf_formaddr(&scan.high_pc, &high) != 0) return false;
  } else {
    Dwarf_Word offset;
    if (dwarf_formudata(&scan.high_pc, &offset) != 0) return false;
    high = low + offset;
  }
  range = {low, high};
  return true;
}

// One DIE's own values of what DieAttributes gathers along a chain (null or
// nullopt: absent or unreadable), however they were read.
struct DieHop {
  const char* mips_linkage = nullptr;
  const char* linkage = nullptr;
  const char* name = nullptr;
  bool has_names = false;  // one of the three is there, even if unreadable
  std::optional<uint64_t> call_file, call_line, decl_file, decl_line;
  bool decl_file_implicit_const = false;
  bool pc_range_known = false;
  AddressRange pc_range;
};

// Merges hop `hop` of a chain into `out`: the first DIE that has a value
// wins; the call line, names' presence and address range are the first
// DIE's own.
void merge_hop(DieAttributes& out, int hop, const DieHop& h) {
  if (!out.linkage_name) out.linkage_name = h.mips_linkage;
  if (!out.linkage_name) out.linkage_name = h.linkage;
  if (!out.name) out.name = h.name;
  if (hop == 0) {
    out.call_line = h.call_line;
    out.own_names = h.has_names;
    out.pc_range_known = h.pc_range_known;
    if (h.pc_range_known) out.pc_range = h.pc_range;
  }
  if (!out.call_file) out.call_file = h.call_file;
  if (!out.decl_file && h.decl_file) {
    out.decl_file = h.decl_file;
    out.decl_file_implicit_const = h.decl_file_implicit_const;
  }
  if (!out.decl_line) out.decl_line = h.decl_line;
}

// Like dwarf_attr_integrate for each attribute: the first DIE of the chain
// (the DIE, then its abstract_origin, else its specification, ...) that has it.
// `max_hops` DIEs are scanned at most; when the chain goes on past them and
// `unscanned` is given, it receives the next DIE (and true is stored in
// `*has_unscanned`), so a caller can continue from a memoized result.
DieAttributes die_attributes(Dwarf* main, Dwarf_Die* die, int max_hops = 16, Dwarf_Die* unscanned = nullptr,
                             bool* has_unscanned = nullptr) {
  DieAttributes out;
  Dwarf_Die current = *die;
  bool followed = false;
  for (int hop = 0; hop < max_hops; ++hop) {
    followed = false;
    AttributeScan scan;
    if (dwarf_getattrs(&current, collect_attribute, &scan, 0) != 1) break;
    DieHop h;
    if (scan.found & 1) h.mips_linkage = dwarf_formstring(&scan.mips_linkage);
    if (scan.found & 2) h.linkage = dwarf_formstring(&scan.linkage);
    if (scan.found & 4) h.name = dwarf_formstring(&scan.name);
    h.has_names = (scan.found & 7) != 0;
    if (scan.found & 32) h.call_file = form_unsigned(&scan.call_file);
    if (scan.found & 64) h.call_line = form_unsigned(&scan.call_line);
    if (scan.found & 128) {
      h.decl_file = form_unsigned(&scan.decl_file);
      h.decl_file_implicit_const =
          dwarf_whatform(&scan.decl_file) == DW_FORM_implicit_const || in_other_file(main, &current);
    }
    if (scan.found & 256) h.decl_line = form_unsigned(&scan.decl_line);
    if ((scan.found & 1536) == 1536) h.pc_range_known = own_pc_range(scan, h.pc_range);
    merge_hop(out, hop, h);
    Dwarf_Attribute* next = (scan.found & 8) ? &scan.origin : (scan.found & 16) ? &scan.spec : nullptr;
    if (!next || !formref_die(next, &current)) break;
    followed = true;
    if (hop == 0) out.origin = die_key(main, &current);
  }
  if (unscanned && followed) {
    *unscanned = current;
    *has_unscanned = true;
  }
  return out;
}

// LLVM's AddressRanges::insert: keeps ranges sorted, merging overlapping and
// touching ones; empty ranges are dropped.
void insert_range(std::vector<AddressRange>& ranges, AddressRange r) {
  if (r.start >= r.end) return;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), r);
  auto it2 = it;
  while (it2 != ranges.end() && it2->start <= r.end) ++it2;
  if (it != it2) {
    r.end = std::max(r.end, std::prev(it2)->end);
    it = ranges.erase(it, it2);
  }
  if (it != ranges.begin() && r.start <= std::prev(it)->end) {
    --it;
    it->end = std::max(it->end, r.end);
    return;
  }
  ranges.insert(it, r);
}

bool ranges_contain(std::span<const AddressRange> ranges, const AddressRange& r) {
  if (r.start >= r.end) return false;
  auto it = std::partition_point(ranges.begin(), ranges.end(),
                                 [&](const AddressRange& x) { return x.start <= r.start; });
  if (it == ranges.begin()) return false;
  --it;
  return r.end <= it->end;
}

// Whether a DIE of this tag can be asked for its parent when names are
// qualified (a subprogram, or a context: namespace, class, lexical block,
// ...). Parameters, members, variables and types other than classes cannot:
// their parent links, most of a C++ unit's, are not kept.
// Inlined: the walk asks it of every DIE.
[[gnu::always_inline]] inline bool may_be_named_through_parent(uint32_t tag) {
  switch (tag) {
    case DW_TAG_inlined_subroutine:  // its name comes from its origin, never its parents
    case DW_TAG_formal_parameter:
    case DW_TAG_variable:
    case DW_TAG_member:
    case DW_TAG_template_type_parameter:
    case DW_TAG_template_value_parameter:
    case DW_TAG_GNU_template_parameter_pack:
    case DW_TAG_GNU_formal_parameter_pack:
    case DW_TAG_enumerator:
    case DW_TAG_subrange_type:
    case DW_TAG_base_type:
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
    case DW_TAG_const_type:
    case DW_TAG_volatile_type:
    case DW_TAG_restrict_type:
    case DW_TAG_typedef:
    case DW_TAG_array_type:
    case DW_TAG_subroutine_type:
    case DW_TAG_unspecified_parameters:
    case DW_TAG_unspecified_type:
    case DW_TAG_ptr_to_member_type:
    case DW_TAG_inheritance:
    case DW_TAG_imported_declaration:
    case DW_TAG_imported_module:
    case DW_TAG_label:
    case DW_TAG_call_site:
    case DW_TAG_call_site_parameter:
    case DW_TAG_GNU_call_site:
    case DW_TAG_GNU_call_site_parameter:
      return false;
    default:
      return true;
  }
}

bool is_cplusplus_like(uint64_t language) {
  switch (language) {
    case DW_LANG_C_plus_plus:
    case DW_LANG_C_plus_plus_03:
    case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14:
    case DW_LANG_ObjC_plus_plus:
    case DW_LANG_C:
      return true;
    default:
      return false;
  }
}

// C and C++ units, whose compilers (GCC, clang) put no code below a type
// DIE at namespace scope: member functions are defined outside their class
// (DW_AT_specification). Only local classes (inside a function) hold
// definitions (GCC at -O0), and those are walked.
bool is_c_family(uint64_t language) {
  switch (language) {
    case DW_LANG_C89: case DW_LANG_C: case DW_LANG_C99: case DW_LANG_C11: case 0x2c /* DW_LANG_C17 */:
    case DW_LANG_C_plus_plus: case DW_LANG_C_plus_plus_03: case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14: case 0x2a /* DW_LANG_C_plus_plus_17 */: case 0x2b /* DW_LANG_C_plus_plus_20 */:
      return true;
    default:
      return false;
  }
}

// Whether the children of a DIE of `tag` hold no code, so the walk may skip
// them: a call site's (call-site parameters, in any unit), and in C and C++
// units (`c_family_outside_functions`, outside any function) a struct's,
// class's, union's or enum's (members, methods' declarations, nested
// types, enumerators: half the DIEs of a C++ unit).
bool children_hold_no_code(uint32_t tag, bool c_family_outside_functions) {
  switch (tag) {
    case DW_TAG_call_site:
    case DW_TAG_GNU_call_site:
      return true;
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
    case DW_TAG_union_type:
    case DW_TAG_enumeration_type:
      return c_family_outside_functions;
    default:
      return false;
  }
}

// Inline DIEs of all the unit's functions live in one pool (no per-node
// vectors to allocate and free): ranges in a shared range pool, children as
// an ordered sibling list.
constexpr uint32_t kNoNode = UINT32_MAX;

struct RawInline {
  uint32_t ranges_begin = 0, ranges_count = 0;  // the DIE's ranges, normalized
  Dwarf_Off offset = 0;              // the DIE (die_at), for the name resolved after the walk
  // What naming needs of the DIE's attributes (a few of millions of nodes'
  // bytes: DieAttributes is four times the size).
  const char* linkage_name = nullptr;
  const char* short_name = nullptr;
  DieKey origin = 0;
  bool own_names = false;
  bool name_resolved = false;
  std::string_view name;             // "" = none
  // LLVM's default when absent (invalid); larger values are stored as it,
  // as invalid (no line table has 2^32 files).
  uint32_t call_file = UINT32_MAX;
  uint32_t call_line = 0;
  uint32_t first_child = kNoNode, last_child = kNoNode, next_sibling = kNoNode;
};

struct FunctionContext {
  Dwarf_Die die;
  DieAttributes attrs;
  bool named = false;
  bool collects = false;  // has at least one valid range
  uint32_t group = 0;
  std::string_view name;
  std::vector<AddressRange> ranges;  // valid ranges, DWARF order
  bool has_inline = false;
  uint32_t root = kNoNode;  // the subprogram itself, in Impl::raw_nodes
};

// Open-addressing map from a key (a string's address, a DIE key) to a small
// index; `kEmpty` is never a key. Hot: one lookup per function and inline
// node, millions in a C++ unit, where std::unordered_map allocated a node
// per entry.
template <typename Key, Key kEmpty>
class KeyIndex {
 public:
  // Returns {index, inserted}: the key's index, or `value` stored for it.
  std::pair<uint32_t, bool> emplace(Key key, uint32_t value) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    size_t i = slot_for(key);
    if (slots_[i].key == key) return {slots_[i].value, false};
    slots_[i] = {key, value};
    ++count_;
    return {value, true};
  }
  void clear() {
    slots_.assign(64, Slot{});
    count_ = 0;
  }

 private:
  struct Slot {
    Key key = kEmpty;
    uint32_t value = 0;
  };
  static uint64_t bits(Key key) {
    if constexpr (std::is_pointer_v<Key>) return reinterpret_cast<uintptr_t>(key);
    else return static_cast<uint64_t>(key);
  }
  size_t slot_for(Key key) const {
    const size_t mask = slots_.size() - 1;
    size_t i = (bits(key) * 0x9E3779B97F4A7C15ull >> 20) & mask;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (const Slot& s : old)
      if (s.key != kEmpty) slots_[slot_for(s.key)] = s;
  }
  std::vector<Slot> slots_ = std::vector<Slot>(64);
  size_t count_ = 0;
};

// By address: each DWARF string has one.
using PointerIndex = KeyIndex<const char*, nullptr>;
// DIE keys are offsets (with kAltFileBit): never all ones.
using DieKeyIndex = KeyIndex<DieKey, ~DieKey{0}>;

}  // namespace

struct DwarfUnitConverter::Impl {
  Dwarf* dwarf;
  const DwarfLineSections& line_sections;
  const UnitConverterOptions& options;

  // Per unit.
  UnitOutput out;
  std::vector<std::vector<UnitOp>> groups;
  std::vector<std::unique_ptr<FunctionContext>> function_stack;  // null: a declaration
  std::vector<std::unique_ptr<FunctionContext>> pending;  // finished after the walk
  const DwarfLineTable* line_table = nullptr;  // the unit's: line_storage, or none
  DwarfLineTable line_storage;  // reused from unit to unit
  std::string comp_dir;
  uint64_t language = 0;
  uint8_t address_size = 8;
  std::vector<int64_t> file_cache;  // DWARF index -> local index; -1 = not yet
  std::unordered_map<std::string, uint32_t> local_file_by_path;
  PointerIndex string_index;  // by address: each DWARF string has one
  std::vector<uint32_t> file_stamp;  // per local file: last group that interned it
  std::vector<DwarfLineTable::RowRun> row_runs;
  std::vector<AddressRange> range_scratch;  // one DIE's raw ranges, reused
  std::vector<AddressRange> normalized_scratch;
  PodArray<RawInline> raw_nodes;       // per unit (realloc'd: millions in C++ units)
  PodArray<AddressRange> raw_ranges;   // per unit
  std::string path_buffer;
  bool failed = false;
  std::string failure;

  // Parent links per unit, built on first need (a referenced DIE may live in
  // another unit).
  using ParentLinks = std::vector<std::pair<Dwarf_Off, Dwarf_Off>>;  // (DIE, parent), sorted
  // The unit being walked records its links as it goes (pre-order = offset
  // order); another unit, or a DIE ahead of the walk, gets a full index.
  ParentLinks walk_parents;
  // DIEs whose children the walk skipped (by DW_AT_sibling): their
  // children's links are found on first need, in `skipped_links`.
  struct SkippedSubtree {
    Dwarf_Off die = 0, end = 0;        // [die, end): the DIE and its children
    size_t links_begin = 0, links_end = 0;  // in skipped_links, once expanded
    bool expanded = false;
  };
  std::vector<SkippedSubtree> skipped_subtrees;  // in offset order
  ParentLinks skipped_links;
  std::vector<DwarfDieWalker::Descendant> descendant_scratch;
  // Qualified names of inlined subroutines by their abstract origin: an
  // inlined DIE without names of its own is named exactly like its origin
  // (LLVM never qualifies it through its own parents), and C++ inlines the
  // same few hundred functions thousands of times.
  DieKeyIndex origin_name_index;  // -> origin_name_values
  std::vector<std::string_view> origin_name_values;
  // The rest of an abstract_origin/specification chain, by its first DIE:
  // every inlined copy of a function scans the same origin chain.
  DieKeyIndex origin_attribute_index;  // -> origin_attribute_values
  std::vector<DieAttributes> origin_attribute_values;
  // LLVM's qualification walks the same namespaces and classes for every
  // member: memoize each DIE's declaration context and each context's
  // "outer::inner" prefix (per unit).
  // Keyed by DieKey: a context may be in the alt file, and is kept as a
  // handle (its file's), never re-read by offset from the main file.
  std::unordered_map<DieKey, std::optional<Dwarf_Die>> context_of;  // nullopt = none
  std::unordered_map<DieKey, std::string> prefix_of;
  DieKey walk_unit = 0;
  std::unordered_map<DieKey, ParentLinks> other_parents;  // by unit DIE

  Impl(Dwarf* d, const DwarfLineSections& s, const UnitConverterOptions& o)
      : dwarf(d), line_sections(s), options(o) {
    walker.want_attributes(kOwnAttributeNames);
  }

  void fail(std::string message) {
    if (!failed) {
      failed = true;
      failure = std::move(message);
    }
  }

  bool valid_text_address(uint64_t addr) const {
    if (options.text_ranges.empty()) return true;
    auto it = std::upper_bound(options.text_ranges.begin(), options.text_ranges.end(), addr,
                               [](uint64_t a, const AddressRange& r) { return a < r.start; });
    return it != options.text_ranges.begin() && std::prev(it)->contains(addr);
  }

  bool is_highest_address(uint64_t addr) const {
    if (address_size == 4) return addr == UINT32_MAX;
    if (address_size == 8) return addr == UINT64_MAX;
    return false;
  }

  // --- names -------------------------------------------------------------

  static bool find_parent(std::span<const std::pair<Dwarf_Off, Dwarf_Off>> links, Dwarf_Off off,
                          Dwarf_Off& parent) {
    auto it = std::lower_bound(links.begin(), links.end(), std::pair<Dwarf_Off, Dwarf_Off>{off, 0});
    if (it == links.end() || it->first != off || it->second == 0) return false;
    parent = it->second;
    return true;
  }

  bool parent_of(Dwarf_Die* die, Dwarf_Die* parent) {
    Dwarf_Die cu;
    if (!dwarf_diecu(die, &cu, nullptr, nullptr)) return false;
    // The DIE's own file: the alt file's DIEs have their parents there.
    Dwarf* owner = dwarf_cu_getdwarf(die->cu);
    const Dwarf_Off off = dwarf_dieoffset(die), cu_off = dwarf_dieoffset(&cu);
    const DieKey cu_key = die_key(dwarf, &cu);
    Dwarf_Off parent_off = 0;
    if (cu_key == walk_unit) {
      if (const auto links = skipped_subtree_links(off)) {
        if (!find_parent(*links, off, parent_off)) return false;
        return dwarf_offdie(owner, parent_off, parent) != nullptr;
      }
    }
    if (cu_key == walk_unit && !walk_parents.empty() && off <= walk_parents.back().first) {
      if (!find_parent(walk_parents, off, parent_off)) return false;
      return dwarf_offdie(owner, parent_off, parent) != nullptr;
    }
    ParentLinks& links = other_parents[cu_key];
    if (links.empty()) {
      std::vector<Dwarf_Die> stack = {cu};
      links.emplace_back(cu_off, 0);
      while (!stack.empty()) {
        Dwarf_Die d = stack.back();
        stack.pop_back();
        Dwarf_Die child;
        if (!dwarf_haschildren(&d) || dwarf_child(&d, &child) != 0) continue;
        const Dwarf_Off d_off = dwarf_dieoffset(&d);
        Dwarf_Off previous = 0;
        do {
          const Dwarf_Off c_off = dwarf_dieoffset(&child);
          if (c_off <= previous) break;  // a backwards DW_AT_sibling: stop, never loop
          previous = c_off;
          links.emplace_back(c_off, d_off);
          stack.push_back(child);
        } while (dwarf_siblingof(&child, &child) == 0);
      }
      std::sort(links.begin(), links.end());
    }
    if (!find_parent(links, off, parent_off)) return false;
    return dwarf_offdie(owner, parent_off, parent) != nullptr;
  }

  // The links of the skipped subtree that holds `off` (read from the unit's
  // bytes on first need); nullopt when `off` is not below a skipped DIE.
  std::optional<std::span<const std::pair<Dwarf_Off, Dwarf_Off>>> skipped_subtree_links(Dwarf_Off off) {
    auto it = std::upper_bound(skipped_subtrees.begin(), skipped_subtrees.end(), off,
                               [](Dwarf_Off o, const SkippedSubtree& t) { return o < t.die; });
    if (it == skipped_subtrees.begin()) return std::nullopt;
    SkippedSubtree& subtree = *--it;
    if (off <= subtree.die || off >= subtree.end) return std::nullopt;
    if (!subtree.expanded) {
      subtree.expanded = true;
      subtree.links_begin = skipped_links.size();
      descendant_scratch.clear();
      // Bytes that do not decode end the links there: a name that needs a
      // parent past them stays unqualified.
      walker.descendants(subtree.die, kMaxDieDepth, descendant_scratch);
      for (const DwarfDieWalker::Descendant& d : descendant_scratch)
        if (may_be_named_through_parent(d.tag)) skipped_links.emplace_back(d.offset, d.parent);
      subtree.links_end = skipped_links.size();
    }
    return std::span<const std::pair<Dwarf_Off, Dwarf_Off>>(skipped_links).subspan(
        subtree.links_begin, subtree.links_end - subtree.links_begin);
  }

  bool referenced_die(Dwarf_Die* die, unsigned attr, Dwarf_Die* result) {
    Dwarf_Attribute mem;
    Dwarf_Attribute* a = dwarf_attr(die, attr, &mem);
    return a && formref_die(a, result);
  }

  // LLVM's GetParentDeclContextDIE (memoized).
  bool parent_decl_context(Dwarf_Die* die, Dwarf_Die* result, int hops) {
    const DieKey key = die_key(dwarf, die);
    if (auto it = context_of.find(key); it != context_of.end()) {
      if (!it->second) return false;
      *result = *it->second;
      return true;
    }
    const bool found = compute_decl_context(die, result, hops);
    context_of.emplace(key, found ? std::optional<Dwarf_Die>(*result) : std::nullopt);
    return found;
  }

  bool compute_decl_context(Dwarf_Die* die, Dwarf_Die* result, int hops) {
    if (hops > kMaxDeclContextHops) return false;
    Dwarf_Die ref;
    if (referenced_die(die, DW_AT_specification, &ref) && parent_decl_context(&ref, result, hops + 1))
      return true;
    if (referenced_die(die, DW_AT_abstract_origin, &ref) &&
        parent_decl_context(&ref, result, hops + 1))
      return true;
    if (dwarf_tag(die) == DW_TAG_inlined_subroutine) return false;
    Dwarf_Die parent;
    if (!parent_of(die, &parent)) return false;
    switch (dwarf_tag(&parent)) {
      case DW_TAG_namespace:
      case DW_TAG_structure_type:
      case DW_TAG_union_type:
      case DW_TAG_class_type:
      case DW_TAG_subprogram:
        *result = parent;
        return true;
      case DW_TAG_lexical_block:
        return parent_decl_context(&parent, result, hops + 1);
      default:
        return false;
    }
  }

  // The "::"-joined names of `context` and its enclosing contexts, outermost
  // first; unnamed contexts are skipped, "<lambda>" becomes "{lambda}".
  const std::string& context_prefix(Dwarf_Die* context, int depth) {
    const DieKey key = die_key(dwarf, context);
    if (auto it = prefix_of.find(key); it != prefix_of.end()) return it->second;
    std::string prefix;
    Dwarf_Die outer;
    if (depth < kMaxDeclContextHops && parent_decl_context(context, &outer, 0))
      prefix = context_prefix(&outer, depth + 1);
    const char* name = attr_string(context, DW_AT_name, true);
    if (name && *name) {
      std::string_view p = name;
      std::string part = p.size() >= 2 && p.front() == '<' && p.back() == '>'
                             ? "{" + std::string(p.substr(1, p.size() - 2)) + "}"
                             : std::string(p);
      prefix = prefix.empty() ? std::move(part) : prefix + "::" + part;
    }
    return prefix_of.emplace(key, std::move(prefix)).first->second;
  }

  // LLVM's getQualifiedNameIndex; "" = no name. The view points into the
  // DWARF data, or into out.owned_strings for composed names.
  std::string_view qualified_name(Dwarf_Die* die) {
    return qualified_name(die, attributes(die));
  }
  std::string_view qualified_name(Dwarf_Die* die, const DieAttributes& attrs) {
    return qualified_name(die, attrs.linkage_name, attrs.name);
  }
  std::string_view qualified_name(Dwarf_Die* die, const char* linkage_name, const char* short_name) {
    if (linkage_name && *linkage_name) return linkage_name;
    if (!short_name || !*short_name) return {};
    const std::string_view plain = short_name;
    if (!is_cplusplus_like(language)) return plain;
    if (plain.starts_with("_Z") &&
        (plain.find(".isra.") != std::string_view::npos || plain.find(".part.") != std::string_view::npos))
      return plain;
    Dwarf_Die context;
    if (!parent_decl_context(die, &context, 0)) return plain;
    const std::string& prefix = context_prefix(&context, 0);
    if (prefix.empty()) return plain;
    std::string name = prefix + "::" + std::string(plain);
    out.owned_strings.push_back(std::move(name));
    return out.owned_strings.back();
  }

  // --- files ---------------------------------------------------------------

  uint32_t local_file_for_path(const std::string& path) {
    auto [it, inserted] =
        local_file_by_path.emplace(path, static_cast<uint32_t>(out.files.size() + 1));
    if (inserted) {
      out.files.push_back({std::string(path_parent(path)), std::string(path_filename(path))});
      file_stamp.push_back(UINT32_MAX);
    }
    return it->second;
  }

  // die_attributes(die), with the chain past the DIE's own attributes
  // memoized (same first-found-wins merge, same 16-DIE limit).
  DieAttributes attributes(Dwarf_Die* die) {
    Dwarf_Die origin_die;
    bool has_origin = false;
    DieAttributes out = die_attributes(dwarf, die, 1, &origin_die, &has_origin);
    if (!has_origin) return out;
    inherit_from_origin(out, &origin_die);
    return out;
  }

  // Fills in what `out` lacks from the chain of its origin `origin_die`
  // (out.origin), memoized per origin.
  void inherit_from_origin(DieAttributes& out, Dwarf_Die* origin_die) {
    const auto [index, inserted] =
        origin_attribute_index.emplace(out.origin, static_cast<uint32_t>(origin_attribute_values.size()));
    if (inserted) {
      DieAttributes rest;
      if (!own_die_attributes(out.origin, 15, rest)) rest = die_attributes(dwarf, origin_die, 15);
      origin_attribute_values.push_back(rest);
    }
    const DieAttributes& rest = origin_attribute_values[index];
    if (!out.linkage_name) out.linkage_name = rest.linkage_name;
    if (!out.name) out.name = rest.name;
    if (!out.call_file) out.call_file = rest.call_file;
    if (!out.decl_file) {
      out.decl_file = rest.decl_file;
      out.decl_file_implicit_const = rest.decl_file_implicit_const;
    }
    if (!out.decl_line) out.decl_line = rest.decl_line;
  }

  void use_file(uint32_t group, uint32_t local) {
    if (local == 0 || file_stamp[local - 1] == group) return;
    file_stamp[local - 1] = group;
    groups[group].push_back({UnitOp::File, local});
  }

  // Returns the string's local index.
  uint32_t use_string(uint32_t group, std::string_view s) {
    auto [index, inserted] = string_index.emplace(s.data(), static_cast<uint32_t>(out.strings.size()));
    if (inserted) out.strings.push_back(s);
    groups[group].push_back({UnitOp::String, index});
    return index;
  }

  // LLVM's CUInfo::DWARFToGSYMFileIndex, on local indexes.
  std::optional<uint32_t> file_index(uint32_t group, uint64_t dwarf_index) {
    if (!line_table) return 0;
    if (dwarf_index >= file_cache.size()) return std::nullopt;
    int64_t& cached = file_cache[dwarf_index];
    if (cached < 0) {
      cached = line_table->file_path(dwarf_index, comp_dir, path_buffer)
                   ? local_file_for_path(path_buffer)
                   : 0;
    }
    use_file(group, static_cast<uint32_t>(cached));
    return static_cast<uint32_t>(cached);
  }

  // --- functions -------------------------------------------------------------

  // LLVM's convertFunctionLineTable: appends the rows of [start, end) to
  // out.lines.
  void convert_lines(FunctionContext& ctx, uint64_t start, uint64_t end) {
    const DwarfLineTable& table = *line_table;
    HugePageVector<LineEntry>& lines = out.lines;
    const size_t first = lines.size();
    if (!table.lookup_address_runs(start, end - start, row_runs)) {
      const DieAttributes& attrs = ctx.attrs;
      const auto& decl_file = attrs.decl_file;
      if (!decl_file || attrs.decl_file_implicit_const ||
          !table.file_path(*decl_file, comp_dir, path_buffer) || path_buffer.empty())
        return;
      const auto& decl_line = attrs.decl_line;
      if (!decl_line) return;
      const uint32_t local = local_file_for_path(path_buffer);
      use_file(ctx.group, local);
      lines.push_back({start, local, static_cast<uint32_t>(*decl_line)});
      return;
    }
    uint64_t prev_address = 0;
    // Consecutive rows mostly share a file: its index is looked up once per
    // change (file_index gives the same answer for the same group).
    uint64_t last_dwarf_file = ~uint64_t{0};
    std::optional<uint32_t> file;
    const uint32_t first_index = row_runs.empty() ? 0 : row_runs.front().first;
    for (const DwarfLineTable::RowRun& run : row_runs) {
      for (uint64_t index = run.first; index <= run.last; ++index) {
        const DwarfLineRow& row = table.rows[index];
        if (row.file != last_dwarf_file) {
          last_dwarf_file = row.file;
          file = file_index(ctx.group, row.file);
        }
        if (!file) continue;
        uint64_t address = row.address;
        if (!(address >= start && address < end)) {
          if (address < start)
            address = start;
          else
            continue;
        }
        LineEntry entry{address, *file, row.line};
        if (index != first_index && row.address < prev_address) return;
        if (lines.size() > first && lines.back().file == *file && lines.back().line == row.line)
          continue;
        if (table.ends_sequence(index)) {
          prev_address = 0;
        } else {
          lines.push_back(entry);
          prev_address = row.address;
        }
      }
    }
  }

  // LLVM's parseInlineInfo below one node, for one function range: appends
  // the children of raw node `raw_index` (and their subtrees, pre-order) to
  // out.inline_nodes below flat node `parent`. Returns the nodes added.
  uint64_t build_inline(FunctionContext& ctx, uint32_t raw_index, uint32_t parent) {
    uint64_t added = 0;
    for (uint32_t child_index = raw_nodes[raw_index].first_child; child_index != kNoNode;
         child_index = raw_nodes[child_index].next_sibling) {
      RawInline& raw = raw_nodes[child_index];
      const std::span<const AddressRange> parent_ranges(
          out.inline_ranges.data() + out.inline_nodes[parent].ranges_begin,
          out.inline_nodes[parent].ranges_count);
      std::vector<AddressRange>& ranges = normalized_scratch;
      ranges.clear();
      for (uint32_t r = 0; r < raw.ranges_count; ++r) {
        const AddressRange& range = raw_ranges[raw.ranges_begin + r];
        if (ranges_contain(parent_ranges, range)) insert_range(ranges, range);
      }
      if (ranges.empty()) continue;
      FlatInlineNode node;
      if (const std::string_view name = inline_name(raw); !name.empty())
        node.name = use_string(ctx.group, name) + 1;
      std::optional<uint32_t> call_file = file_index(ctx.group, raw.call_file);
      if (!call_file) continue;  // invalid DW_AT_call_file: LLVM drops the subtree
      node.call_file = *call_file;
      node.call_line = raw.call_line;
      node.ranges_begin = static_cast<uint32_t>(out.inline_ranges.size());
      node.ranges_count = static_cast<uint32_t>(ranges.size());
      out.inline_ranges.insert(out.inline_ranges.end(), ranges.begin(), ranges.end());
      const uint32_t index = static_cast<uint32_t>(out.inline_nodes.size());
      out.inline_nodes.push_back(node);
      ++out.inline_nodes[parent].child_count;
      added += 1 + build_inline(ctx, child_index, index);
    }
    return added;
  }

  // die_ranges with the DIE's own pc pair already read (DieAttributes).
  bool die_ranges(Dwarf_Die* die, const DieAttributes& attrs, std::vector<AddressRange>& ranges) {
    if (!attrs.pc_range_known) {
      // Without its own low_pc and high_pc, libdw reads DW_AT_ranges.
      if (attrs.ranges_offset && own_range_list(*attrs.ranges_offset, ranges)) return true;
      return die_ranges(die, ranges);
    }
    ranges.clear();
    ranges.push_back(attrs.pc_range);
    return true;
  }

  // libdw's dwarf_ranges for a DW_AT_ranges of a DIE of the unit being
  // walked (a DW_FORM_sec_offset, or clang's DW_FORM_rnglistx), read here
  // (libdw's was 5% of converting C++: inlined code split in pieces). Only
  // lists libdw reads without error: plain pairs and base selections (DWARF
  // 2-4), and every DWARF 5 entry kind but the view pair: offset_pair,
  // base_address, start_end, start_length, their .debug_addr forms
  // base_addressx, startx_endx and startx_length (from the unit's
  // DW_AT_addr_base), and end_of_list. Anything else - another entry kind, a
  // list running off its section, an address index without a base or
  // outside .debug_addr, a LEB128 libdw would read differently, more ranges
  // than die_ranges takes, a split unit - returns false and is left to
  // libdw, so the answer (or the error) stays libdw's.
  bool own_range_list(uint64_t offset, std::vector<AddressRange>& out) {
    if (split_unit || !direct_dies || (address_size != 4 && address_size != 8)) return false;
    const bool v5 = unit_version >= 5;
    const std::span<const uint8_t> section = v5 ? options.debug_rnglists : options.debug_ranges;
    if (offset >= section.size()) return false;
    uint64_t base = unit_base_address();
    if (base == ~uint64_t{0}) return false;  // libdw: an error
    const uint8_t* p = section.data() + offset;
    const uint8_t* const end = section.data() + section.size();
    const bool little = line_sections.little_endian;  // the file's byte order
    auto address = [&](uint64_t& value) {
      if (end - p < address_size) return false;
      value = 0;
      for (int i = 0; i < address_size; ++i) value |= uint64_t(p[i]) << (little ? 8 * i : 8 * (address_size - 1 - i));
      p += address_size;
      return true;
    };
    auto uleb = [&](uint64_t& value) {
      return leb128::decode_uleb<kMaxLebBytes>(p, end, value) == leb128::Result::Ok;
    };
    auto indexed = [&](uint64_t& value) {
      uint64_t index = 0;
      return uleb(index) && walker.indexed_address(options.debug_addr, unit_addr_base, index, value);
    };
    out.clear();
    const uint64_t escape = address_size == 8 ? ~uint64_t{0} : uint64_t{UINT32_MAX};
    while (out.size() <= (1u << 20)) {
      uint64_t begin = 0, finish = 0;
      if (!v5) {
        if (!address(begin) || !address(finish)) return false;
        if (begin == escape) {
          if (finish == escape) return false;
          base = finish;
          continue;
        }
        if (begin == 0 && finish == 0) return true;
        out.push_back({begin + base, finish + base});
        continue;
      }
      if (p == end) return false;
      switch (*p++) {
        case DW_RLE_end_of_list:
          return true;
        case DW_RLE_offset_pair:
          if (!uleb(begin) || !uleb(finish)) return false;
          out.push_back({begin + base, finish + base});
          break;
        case DW_RLE_base_address:
          if (!address(base)) return false;
          break;
        case DW_RLE_start_end:
          if (!address(begin) || !address(finish)) return false;
          out.push_back({begin, finish});
          break;
        case DW_RLE_start_length:
          if (!address(begin) || !uleb(finish)) return false;
          out.push_back({begin, begin + finish});
          break;
        case DW_RLE_base_addressx:
          if (!indexed(base)) return false;
          break;
        case DW_RLE_startx_endx:
          if (!indexed(begin) || !indexed(finish)) return false;
          out.push_back({begin, finish});
          break;
        case DW_RLE_startx_length:
          if (!indexed(begin) || !uleb(finish)) return false;
          out.push_back({begin, begin + finish});
          break;
        default:
          return false;
      }
    }
    return false;  // past die_ranges' limit: libdw's loop gives up the same way
  }

  // libdw's base address of the unit's range lists (__libdw_cu_base_address):
  // the unit DIE's low_pc, else its entry_pc, else 0; computed once a unit.
  uint64_t unit_base_address() {
    if (!unit_base) {
      if (unit_die.own && (unit_die.low_pc || !unit_die.entry_pc)) {
        unit_base = unit_die.low_pc.value_or(0);
        return *unit_base;
      }
      Dwarf_Addr base = 0;
      Dwarf_Attribute mem;
      if (dwarf_lowpc(&unit_cu_die, &base) != 0 &&
          dwarf_formaddr(dwarf_attr(&unit_cu_die, DW_AT_entry_pc, &mem), &base) != 0)
        base = 0;
      unit_base = base;
    }
    return *unit_base;
  }

  bool die_ranges(Dwarf_Die* die, std::vector<AddressRange>& ranges) {
    ranges.clear();
    if (split_unit) {
      // A split unit's range lists are relative to the skeleton's base
      // address, which libdw does not know here (split_dwarf.h).
      Dwarf_Attribute mem;
      if (Dwarf_Attribute* a = dwarf_attr(die, DW_AT_ranges, &mem)) {
        uint64_t value = 0;
        if (a->form == DW_FORM_rnglistx) {
          const uint8_t* p = a->valp;
          const uint8_t* end = unit_info.data() + unit_info.size();
          if (p < unit_info.data() || p >= end || !leb128::read_uleb_fast(p, end, value)) return false;
        } else if (dwarf_formudata(a, &value) != 0) {
          return false;
        }
        std::string error;
        return read_split_ranges(split_ranges, a->form, value, ranges, error);
      }
    }
    Dwarf_Addr base, start, end;
    ptrdiff_t offset = 0;
    while ((offset = dwarf_ranges(die, offset, &base, &start, &end)) > 0) {
      ranges.push_back({start, end});
      if (ranges.size() > (1u << 20)) return false;
    }
    return offset == 0;
  }

  std::unique_ptr<FunctionContext> start_subprogram(const DwarfDieWalker::Step& step, Dwarf_Die* die) {
    auto ctx = std::make_unique<FunctionContext>();
    ctx->die = *die;
    std::vector<AddressRange>& ranges = range_scratch;
    // Names are composed after the walk, when every parent link of the unit
    // is known; here only whether there is a name decides.
    ctx->attrs = walked_attributes(step, die);
    if (!die_ranges(die, ctx->attrs, ranges) || ranges.empty()) return ctx;
    const bool has_linkage = ctx->attrs.linkage_name && *ctx->attrs.linkage_name;
    if (!has_linkage && !(ctx->attrs.name && *ctx->attrs.name)) return ctx;
    ctx->named = true;
    ctx->group = static_cast<uint32_t>(groups.size());
    groups.emplace_back();
    for (const AddressRange& r : ranges) {
      // LLVM stops at the first dead or out-of-text range (a quirk kept for
      // equal output): later ranges of the same subprogram are dropped too.
      if (r.start >= r.end || is_highest_address(r.start)) break;
      if (!valid_text_address(r.start)) break;
      ctx->ranges.push_back(r);
    }
    ctx->collects = !ctx->ranges.empty();
    ctx->root = static_cast<uint32_t>(raw_nodes.size());
    raw_nodes.push_back(RawInline{});
    return ctx;
  }

  std::string_view inline_name(RawInline& raw) {
    if (!raw.name_resolved) {
      raw.name_resolved = true;
      if (raw.origin && !raw.own_names) {
        const auto [index, inserted] =
            origin_name_index.emplace(raw.origin, static_cast<uint32_t>(origin_name_values.size()));
        if (inserted) {
          Dwarf_Die die = die_at(raw.offset);
          origin_name_values.push_back(qualified_name(&die, raw.linkage_name, raw.short_name));
        }
        raw.name = origin_name_values[index];
      } else {
        Dwarf_Die die = die_at(raw.offset);
        raw.name = qualified_name(&die, raw.linkage_name, raw.short_name);
      }
    }
    return raw.name;
  }

  void finish_subprogram(FunctionContext& ctx) {
    if (!ctx.named) return;
    ctx.name = qualified_name(&ctx.die, ctx.attrs);
    const uint32_t name = use_string(ctx.group, ctx.name);
    if (!ctx.collects) return;
    for (const AddressRange& range : ctx.ranges) {
      UnitOutput::Function f;
      f.range = range;
      f.name = name;
      f.lines_begin = static_cast<uint32_t>(out.lines.size());
      if (line_table) convert_lines(ctx, range.start, range.end);
      f.lines_count = static_cast<uint32_t>(out.lines.size() - f.lines_begin);
      if (options.inline_info && ctx.has_inline) {
        const uint32_t root = static_cast<uint32_t>(out.inline_nodes.size());
        const size_t ranges_before = out.inline_ranges.size();
        FlatInlineNode node;
        node.ranges_begin = static_cast<uint32_t>(ranges_before);
        node.ranges_count = 1;
        node.name = name + 1;
        out.inline_ranges.push_back(range);
        out.inline_nodes.push_back(node);
        const uint64_t below_root = build_inline(ctx, ctx.root, root);
        if (out.inline_nodes[root].child_count == 0) {
          out.inline_nodes.resize(root);
          out.inline_ranges.resize(ranges_before);
        } else {
          out.inline_nodes_total += 1 + below_root;
          f.nodes_begin = root;
          f.nodes_count = static_cast<uint32_t>(out.inline_nodes.size() - root);
        }
      }
      out.line_rows += f.lines_count;
      out.functions.push_back(f);
      groups[ctx.group].push_back(
          {UnitOp::Function, static_cast<uint32_t>(out.functions.size() - 1)});
    }
  }

  // A Dwarf_Die for the DIE at `offset` of the unit being walked, for libdw
  // to read its attributes. When libdw's unit DIE lies in the same bytes the
  // walker reads (always, short of a libdw change), the handle is made the
  // way libdw makes its own (address + unit), without a unit lookup.
  Dwarf_Die die_at(Dwarf_Off offset) {
    Dwarf_Die die;
    if (direct_dies) {
      std::memset(&die, 0, sizeof die);
      die.addr = const_cast<uint8_t*>(unit_info.data() + offset);
      die.cu = unit_cu;
      return die;
    }
    if (!dwarf_offdie(dwarf, offset, &die)) fail("cannot read DIE " + hex_number(offset) + ": " + dwarf_error());
    return die;
  }

  // What the walk knows of each DIE whose child list is open.
  struct OpenDie {
    Dwarf_Off offset;
    int64_t child_inline_parent;  // raw inline node of the DIEs below, -1 = none
    bool is_subprogram;
  };
  std::vector<OpenDie> open_dies;
  DwarfDieWalker walker;
  Dwarf_CU* unit_cu = nullptr;
  // The .debug_info and .debug_abbrev bytes of the unit being converted:
  // the options' sections, or a split unit's image's.
  std::span<const uint8_t> unit_info, unit_abbrev;
  const SplitSource* split_unit = nullptr;  // the split unit being converted, if any
  SplitRanges split_ranges;                 // its range-list sections
  Dwarf_Off unit_header_offset = 0, unit_die_offset = 0, unit_end_offset = 0;
  uint16_t unit_version = 0;
  Dwarf_Die unit_cu_die{};             // libdw's handle of the unit DIE
  std::optional<uint64_t> unit_base;   // unit_base_address()'s
  bool direct_dies = false;
  // own_die_attributes may read this unit: the walker reads the bytes libdw
  // reads (direct_dies) of a unit of the main file (not a split unit).
  bool own_attributes_usable = false;

  void end_subprogram() {
    if (function_stack.back() && function_stack.back()->named) pending.push_back(std::move(function_stack.back()));
    function_stack.pop_back();
  }

  // Pre-order over the unit's DIEs (LLVM's handleDie recursion): collects
  // subprograms and the inlined subroutines below them.
  void walk() {
    open_dies.clear();
    const bool skip = options.skip_children_without_code;
    const bool c_family = is_c_family(language);
    while (!failed) {
      const DwarfDieWalker::Step step = walker.next();
      if (step.kind == DwarfDieWalker::Step::End) break;
      if (step.kind == DwarfDieWalker::Step::EndOfChildren) {
        const bool was_subprogram = open_dies.back().is_subprogram;
        open_dies.pop_back();
        if (was_subprogram) end_subprogram();
        continue;
      }
      const Dwarf_Off parent_offset = open_dies.empty() ? 0 : open_dies.back().offset;
      const int64_t inline_parent = open_dies.empty() ? -1 : open_dies.back().child_inline_parent;
      if (may_be_named_through_parent(step.tag)) walk_parents.emplace_back(step.offset, parent_offset);
      if (open_dies.size() > size_t(kMaxDieDepth))
        return fail("DIE nesting deeper than " + std::to_string(kMaxDieDepth));
      int64_t child_inline_parent = -1;
      bool is_subprogram = false;
      if (step.tag == DW_TAG_subprogram) {
        child_inline_parent = enter_subprogram(step);
        if (failed) break;
        is_subprogram = true;
      } else if (step.tag == DW_TAG_inlined_subroutine) {
        if (!function_stack.empty() && function_stack.back()) {
          FunctionContext& fn = *function_stack.back();
          fn.has_inline = true;
          if (inline_parent >= 0 && fn.collects && options.inline_info) {
            Dwarf_Die die = die_at(step.offset);
            if (failed) break;
            child_inline_parent = add_raw_inline(step, &die, inline_parent);
          }
        }
      } else if (step.tag == DW_TAG_lexical_block) {
        child_inline_parent = inline_parent;
      }
      if (step.has_children && skip && children_hold_no_code(step.tag, c_family && function_stack.empty()) &&
          skip_children(step))
        continue;
      if (step.has_children)
        open_dies.push_back({step.offset, child_inline_parent, is_subprogram});
      else if (is_subprogram)
        end_subprogram();
    }
    if (!walker.ok()) fail(walker.error());
  }

  // Skips the children of the DIE when it has a DW_AT_sibling inside the
  // unit (GCC writes one, but not on a list's last DIE; clang writes none);
  // records the skipped span for skipped_subtree_links.
  bool skip_children(const DwarfDieWalker::Step& step) {
    uint64_t relative = 0;  // references are relative to the unit's header
    if (!walker.sibling(step, relative) || relative > UINT64_MAX - unit_header_offset) return false;
    const uint64_t sibling = unit_header_offset + relative;
    if (!walker.skip_children(step, sibling)) return false;
    skipped_subtrees.push_back({step.offset, sibling});
    return true;
  }

  // Reads the unit header and points the walker at the unit's DIEs; false
  // (failed) when either is unusable.
  bool start_walker(Dwarf_Die* cu, const UnitLocation& unit) {
    Dwarf_Half version = 0;
    Dwarf_Off abbrev_offset = 0;
    uint8_t addr_size = 0, offset_size = 0;
    Dwarf_Die unit_die;
    if (!dwarf_cu_die(cu->cu, &unit_die, &version, &abbrev_offset, &addr_size, &offset_size, nullptr,
                      nullptr))
      return fail_with("cannot read the unit header: " + dwarf_error());
    const std::span<const uint8_t> info = unit_info;
    if (unit.end_offset > info.size() || unit.die_offset >= unit.end_offset)
      return fail_with("unit bounds " + hex_number(unit.die_offset) + ".." +
                       hex_number(unit.end_offset) + " are outside .debug_info");
    DwarfUnitShape shape;
    shape.version = version;
    shape.address_size = addr_size;
    shape.offset_size = offset_size;
    shape.little_endian = line_sections.little_endian;
    unit_cu = cu->cu;
    unit_header_offset = unit.header_offset;
    unit_die_offset = unit.die_offset;
    unit_end_offset = unit.end_offset;
    unit_version = version;
    unit_cu_die = *cu;
    unit_base.reset();
    direct_dies = cu->addr == info.data() + unit.die_offset;
    abbrev_has_pc.clear();  // codes are the unit's abbreviation table's
    if (!walker.start(unit_abbrev, abbrev_offset,
                      info.subspan(unit.die_offset, unit.end_offset - unit.die_offset), unit.die_offset,
                      shape))
      return fail_with(walker.error());
    own_attributes_usable = direct_dies && !split_unit;
    read_unit_die();
    return true;
  }

  bool fail_with(std::string message) {
    fail(std::move(message));
    return false;
  }

  // Starts the function context of a subprogram DIE; returns the inline
  // parent of its children (its tree's root when it collects one), -1 else.
  int64_t enter_subprogram(const DwarfDieWalker::Step& step) {
    Dwarf_Die die = die_at(step.offset);
    if (failed) return -1;
    // A subprogram without address attributes of its own (a
    // declaration, an abstract instance) has no ranges: LLVM reads only
    // a DIE's own low_pc/high_pc/ranges. Most C++ subprogram DIEs are
    // such declarations, and libdw's dwarf_ranges would look at each.
    // Nothing below one is collected either, so it gets no context (null).
    if (!may_have_ranges(step)) {
      function_stack.push_back(nullptr);
      return -1;
    }
    function_stack.push_back(start_subprogram(step, &die));
    const FunctionContext& fn = *function_stack.back();
    return fn.collects ? int64_t{fn.root} : int64_t{-1};
  }

  // Whether the DIE's abbreviation has low_pc, high_pc or ranges: looked up
  // once per abbreviation of the unit (millions of subprogram DIEs share a
  // few hundred abbreviations).
  bool may_have_ranges(const DwarfDieWalker::Step& step) {
    if (step.abbrev >= abbrev_has_pc.size()) abbrev_has_pc.resize(size_t(step.abbrev) + 1, kPcUnknown);
    uint8_t& known = abbrev_has_pc[step.abbrev];
    if (known == kPcUnknown)
      known = walker.has_attribute(step, DW_AT_low_pc) || walker.has_attribute(step, DW_AT_high_pc) ||
                      walker.has_attribute(step, DW_AT_ranges)
                  ? kPcYes
                  : kPcNo;
    return known == kPcYes;
  }
  enum : uint8_t { kPcUnknown, kPcNo, kPcYes };
  std::vector<uint8_t> abbrev_has_pc;  // by abbreviation code, for the walker's unit

  // die_attributes() read from the walker's bytes, without libdw: its
  // lookups of every DIE's abbreviation in a locked hash table, and of the
  // unit's in a tree, were a tenth of converting C (libc). Covers the
  // shapes compilers write for the main file's units: references inside the
  // unit (ref1/2/4/8/udata), strings inline, in .debug_str or
  // .debug_line_str or indexed (strx*), constants of
  // data1/2/4/8/udata/implicit_const, low_pc an address or indexed (addrx*),
  // high_pc an address or a length. Anything else - another
  // form anywhere along the chain, a reference leaving the unit, bytes that
  // do not decode - returns false and libdw reads the DIE instead, so an
  // answer (or an error) outside these shapes stays libdw's.
  // `max_hops`, `unscanned` and `has_unscanned` as die_attributes'.
  // The attributes own_die_attributes reads (its switch's cases).
  static constexpr std::array<uint16_t, 12> kOwnAttributeNames = {
      DW_AT_MIPS_linkage_name, DW_AT_linkage_name, DW_AT_name,     DW_AT_abstract_origin,
      DW_AT_specification,     DW_AT_call_file,    DW_AT_call_line, DW_AT_decl_file,
      DW_AT_decl_line,         DW_AT_low_pc,       DW_AT_high_pc,  DW_AT_ranges};
  bool own_die_attributes(uint64_t offset, int max_hops, DieAttributes& out, uint64_t* unscanned = nullptr,
                          bool* has_unscanned = nullptr) {
    if (!own_attributes_usable) return false;
    out = DieAttributes{};
    uint64_t current = offset;
    bool followed = false;
    for (int hop = 0; hop < max_hops; ++hop) {
      followed = false;
      const DwarfDieWalker::Step step = walker.die_at(current);
      if (step.kind != DwarfDieWalker::Step::Die) return false;
      DieHop h;
      std::optional<uint64_t> low, high, origin, spec;
      bool supported = true, high_is_length = false;
      // As dwarf_getattrs' callback: a repeated attribute's last value counts.
      const bool read = walker.for_each_wanted_attribute(step, [&](const DwarfDieWalker::Attribute& attr) {
        auto string = [&](const char*& to) {
          supported = supported && walker.string_value(attr, unit_strings, to);
        };
        auto constant = [&](std::optional<uint64_t>& to) {  // the forms dwarf_formudata reads as they are
          uint64_t v = 0;
          switch (attr.form) {
            case DW_FORM_data1: case DW_FORM_data2: case DW_FORM_data4: case DW_FORM_data8:
            case DW_FORM_udata: case DW_FORM_implicit_const:
              supported = supported && walker.unsigned_value(attr, v);
              to = v;
              break;
            default:
              supported = false;
          }
        };
        auto reference = [&](std::optional<uint64_t>& to) {  // unit-relative: inside this unit's DIEs
          uint64_t v = 0;
          switch (attr.form) {
            case DW_FORM_ref1: case DW_FORM_ref2: case DW_FORM_ref4: case DW_FORM_ref8: case DW_FORM_ref_udata:
              if (!walker.unsigned_value(attr, v) || v > unit_end_offset - unit_header_offset ||
                  unit_header_offset + v < unit_die_offset || unit_header_offset + v >= unit_end_offset)
                supported = false;
              to = unit_header_offset + v;
              break;
            default:
              supported = false;
          }
        };
        switch (attr.name) {
          case DW_AT_MIPS_linkage_name: string(h.mips_linkage); break;
          case DW_AT_linkage_name: string(h.linkage); break;
          case DW_AT_name: string(h.name); break;
          case DW_AT_abstract_origin: reference(origin); break;
          case DW_AT_specification: reference(spec); break;
          case DW_AT_call_file: constant(h.call_file); break;
          case DW_AT_call_line: constant(h.call_line); break;
          case DW_AT_decl_file:
            constant(h.decl_file);
            h.decl_file_implicit_const = attr.form == DW_FORM_implicit_const;
            break;
          case DW_AT_decl_line: constant(h.decl_line); break;
          case DW_AT_low_pc: {
            uint64_t v = 0;
            supported = supported && walker.address_value(attr, options.debug_addr, unit_addr_base, v);
            low = v;
            break;
          }
          case DW_AT_high_pc: {
            uint64_t v = 0;
            if (is_address_form(attr.form)) {
              supported = supported && walker.address_value(attr, options.debug_addr, unit_addr_base, v);
              high_is_length = false;
            } else {
              std::optional<uint64_t> length;
              constant(length);
              v = length.value_or(0);
              high_is_length = true;
            }
            high = v;
            break;
          }
          case DW_AT_ranges:
            if (hop == 0) {
              uint64_t v = 0;
              if (walker.range_list_offset(attr, options.debug_rnglists, unit_rnglists_base, v)) out.ranges_offset = v;
            }
            break;
          default:
            break;
        }
      });
      if (!read || !supported) return false;
      h.has_names = h.mips_linkage || h.linkage || h.name;  // all read: present ones are there
      if (low && high) {
        h.pc_range = {*low, high_is_length ? *low + *high : *high};
        h.pc_range_known = true;
      }
      merge_hop(out, hop, h);
      const std::optional<uint64_t>& next = origin ? origin : spec;
      if (!next) break;
      current = *next;
      followed = true;
      if (hop == 0) out.origin = current;
    }
    if (unscanned && followed) {
      *unscanned = current;
      *has_unscanned = true;
    }
    return true;
  }

  // attributes() of the DIE `step` of the walk (`die` its libdw handle):
  // from the walker's bytes where own_die_attributes reads them.
  DieAttributes walked_attributes(const DwarfDieWalker::Step& step, Dwarf_Die* die) {
    DieAttributes out;
    uint64_t origin = 0;
    bool has_origin = false;
    if (!own_die_attributes(step.offset, 1, out, &origin, &has_origin)) return attributes(die);
    if (has_origin) {
      Dwarf_Die origin_die = die_at(origin);
      if (failed) return out;
      inherit_from_origin(out, &origin_die);
    }
    return out;
  }

  // Records an inlined subroutine below raw node `parent`; returns its index.
  int64_t add_raw_inline(const DwarfDieWalker::Step& step, Dwarf_Die* die, int64_t parent_index) {
    RawInline raw;
    raw.offset = step.offset;
    const DieAttributes attrs = walked_attributes(step, die);
    raw.linkage_name = attrs.linkage_name;
    raw.short_name = attrs.name;
    raw.origin = attrs.origin;
    raw.own_names = attrs.own_names;
    normalized_scratch.clear();
    if (die_ranges(die, attrs, range_scratch))
      for (const AddressRange& r : range_scratch) insert_range(normalized_scratch, r);
    raw.ranges_begin = static_cast<uint32_t>(raw_ranges.size());
    raw.ranges_count = static_cast<uint32_t>(normalized_scratch.size());
    raw_ranges.append(normalized_scratch);
    if (attrs.call_file) raw.call_file = static_cast<uint32_t>(std::min<uint64_t>(*attrs.call_file, UINT32_MAX));
    raw.call_line = static_cast<uint32_t>(attrs.call_line.value_or(0));
    const uint32_t index = static_cast<uint32_t>(raw_nodes.size());
    raw_nodes.push_back(raw);
    RawInline& parent = raw_nodes[static_cast<size_t>(parent_index)];
    if (parent.last_child == kNoNode)
      parent.first_child = index;
    else
      raw_nodes[parent.last_child].next_sibling = index;
    parent.last_child = index;
    return index;
  }

  UnitOutput convert(const UnitLocation& unit) {
    if (unit.split) return convert_split(unit);
    unit_info = options.debug_info;
    unit_abbrev = options.debug_abbrev;
    return convert_unit(unit, nullptr);
  }

  // A split unit: its image (split_dwarf.h) opened by libdw as a .dwo of
  // one unit, converted like any unit with the skeleton's line table.
  UnitOutput convert_split(const UnitLocation& skeleton) {
    struct Image {
      std::vector<uint8_t> bytes;
      ElfHandle elf;  // reads bytes
      Dwarf* dwarf = nullptr;
      ~Image() {
        if (dwarf) dwarf_end(dwarf);
      }
    };
    const SplitSource& split = *skeleton.split;
    auto image = std::make_shared<Image>();
    image->bytes = build_elf_image(split.unit.sections, line_sections.little_endian);
    if (Expected<ElfHandle> elf = ElfHandle::from_memory(image->bytes); elf) image->elf = std::move(*elf);
    if (image->elf) image->dwarf = dwarf_begin_elf(image->elf.get(), DWARF_C_READ, nullptr);
    unit_info = unit_abbrev = {};
    for (Elf_Scn* scn = nullptr; image->dwarf && (scn = elf_nextscn(image->elf.get(), scn));) {
      GElf_Shdr shdr;
      size_t names = 0;
      if (!gelf_getshdr(scn, &shdr) || elf_getshdrstrndx(image->elf.get(), &names) != 0) continue;
      const char* name = elf_strptr(image->elf.get(), names, shdr.sh_name);
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!name || !data || !data->d_buf) continue;
      const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(data->d_buf), data->d_size);
      if (std::strcmp(name, ".debug_info.dwo") == 0) unit_info = bytes;
      if (std::strcmp(name, ".debug_abbrev.dwo") == 0) unit_abbrev = bytes;
    }
    if (!image->dwarf || unit_info.size() != split.unit.end_offset) {
      UnitOutput failed;
      failed.skipped = true;
      failed.warnings.push_back(split.unit.source + ": split unit of the skeleton at " +
                                hex_number(skeleton.die_offset) + " unreadable: " + dwarf_error());
      return failed;
    }
    Dwarf* const main = std::exchange(dwarf, image->dwarf);
    UnitLocation unit;
    unit.header_offset = 0;
    unit.die_offset = split.unit.die_offset;
    unit.end_offset = split.unit.end_offset;
    split_unit = &split;
    split_ranges = SplitRanges{};
    split_ranges.little_endian = line_sections.little_endian;
    split_ranges.base_address = split.base_address;
    for (const auto& [name, bytes] : split.unit.sections) {
      if (name == ".debug_rnglists.dwo") split_ranges.rnglists = bytes;
      if (name == ".debug_ranges.dwo") split_ranges.ranges = bytes;
      if (name == ".debug_addr.dwo") split_ranges.addr = bytes;
    }
    UnitOutput result = convert_unit(unit, &split);
    split_unit = nullptr;
    dwarf = main;
    result.keep_alive = std::move(image);
    return result;
  }

  // Every per-unit table emptied before the next unit.
  // recycle()'s vectors, emptied, for the next unit's output (a large
  // unit's line rows stay with the Builder: Builder::adopt_line_rows).
  UnitOutput spare;
  void recycle(UnitOutput&& used) {
    auto keep = [](auto& to, auto& from) {
      from.clear();
      if (from.capacity() > to.capacity()) to.swap(from);
    };
    keep(spare.ops, used.ops);
    keep(spare.strings, used.strings);
    keep(spare.functions, used.functions);
    keep(spare.lines, used.lines);
    keep(spare.inline_nodes, used.inline_nodes);
    keep(spare.inline_ranges, used.inline_ranges);
  }

  void reset_unit_state() {
    out = UnitOutput{};
    out.ops.swap(spare.ops);
    out.strings.swap(spare.strings);
    out.functions.swap(spare.functions);
    out.lines.swap(spare.lines);
    out.inline_nodes.swap(spare.inline_nodes);
    out.inline_ranges.swap(spare.inline_ranges);
    groups.clear();
    function_stack.clear();
    pending.clear();
    line_table = nullptr;
    comp_dir.clear();
    file_cache.clear();
    local_file_by_path.clear();
    string_index.clear();
    file_stamp.clear();
    walk_parents.clear();
    skipped_subtrees.clear();
    skipped_links.clear();
    origin_name_index.clear();
    origin_name_values.clear();
    origin_attribute_index.clear();
    origin_attribute_values.clear();
    raw_nodes.clear();
    raw_ranges.clear();
    context_of.clear();
    prefix_of.clear();
    other_parents.clear();  // bounded memory: rebuilt on demand, rarely needed
    // Nothing of the previous unit's may be read from its bytes, should
    // start_walker fail before it sets them.
    own_attributes_usable = false;
    unit_die = UnitDieAttributes{};
    unit_strings = {line_sections.debug_str, line_sections.debug_line_str, options.debug_str_offsets, {}};
    unit_addr_base.reset();
    unit_rnglists_base.reset();
    failed = false;
    failure.clear();
  }

  // What read_unit_header and unit_base_address take from the unit DIE.
  struct UnitDieAttributes {
    std::optional<uint64_t> language, stmt_list, low_pc;
    const char* comp_dir = nullptr;
    bool entry_pc = false;  // it has one (then libdw computes the base)
    bool own = false;       // read by read_unit_die (else libdw reads them)
  };
  UnitDieAttributes unit_die;
  DwarfDieWalker::StringSections unit_strings;  // the unit's, for the walker's string_value
  std::optional<uint64_t> unit_addr_base;        // its DW_AT_addr_base, when read
  std::optional<uint64_t> unit_rnglists_base;    // its DW_AT_rnglists_base, when read

  // The unit DIE's attributes from the walker's bytes, once a unit, as
  // dwarf_attr and dwarf_formudata / dwarf_formstring / dwarf_lowpc give
  // them, where they are of the forms own_die_attributes reads (stmt_list: a
  // sec_offset inside .debug_line); unit_die.own false for anything else,
  // and libdw reads them. Its DW_AT_str_offsets_base and DW_AT_addr_base,
  // for the indexed forms of every DIE of the unit, are kept when they are
  // section offsets inside their sections (as libdw's dwarf_formudata
  // accepts them), else unknown, and libdw reads those forms. Likewise its
  // DW_AT_rnglists_base for DW_FORM_rnglistx ranges, but not a base of 0:
  // libdw then takes the end of the section's first header instead.
  void read_unit_die() {
    if (!own_attributes_usable) return;
    const DwarfDieWalker::Step step = walker.die_at(unit_die_offset);
    if (step.kind != DwarfDieWalker::Step::Die) return;
    bool supported = true;
    // comp_dir and low_pc may be indexed: read once the bases are known.
    std::optional<DwarfDieWalker::Attribute> comp_dir, low_pc;
    const bool read = walker.for_each_attribute(step, [&](const DwarfDieWalker::Attribute& attr) {
      uint64_t v = 0;
      switch (attr.name) {
        case DW_AT_str_offsets_base:
        case DW_AT_addr_base: {
          const bool strings = attr.name == DW_AT_str_offsets_base;
          const size_t size = strings ? options.debug_str_offsets.size() : options.debug_addr.size();
          if (attr.form != DW_FORM_sec_offset || !walker.unsigned_value(attr, v) || v >= size) break;
          (strings ? unit_strings.str_offsets_base : unit_addr_base) = v;
          break;
        }
        case DW_AT_rnglists_base:
          if (attr.form == DW_FORM_sec_offset && walker.unsigned_value(attr, v) && v > 0 &&
              v < options.debug_rnglists.size())
            unit_rnglists_base = v;
          break;
        case DW_AT_language:
          supported = supported && (attr.form == DW_FORM_data1 || attr.form == DW_FORM_data2) &&
                      walker.unsigned_value(attr, v);
          unit_die.language = v;
          break;
        case DW_AT_comp_dir:
          comp_dir = attr;
          break;
        case DW_AT_stmt_list:
          supported = supported && attr.form == DW_FORM_sec_offset && walker.unsigned_value(attr, v) &&
                      v < line_sections.debug_line.size();
          unit_die.stmt_list = v;
          break;
        case DW_AT_low_pc:
          low_pc = attr;
          break;
        case DW_AT_entry_pc:
          unit_die.entry_pc = true;
          break;
        default:
          break;
      }
    });
    if (comp_dir) supported = supported && walker.string_value(*comp_dir, unit_strings, unit_die.comp_dir);
    if (low_pc) {
      uint64_t v = 0;
      supported = supported && walker.address_value(*low_pc, options.debug_addr, unit_addr_base, v);
      unit_die.low_pc = v;
    }
    unit_die.own = read && supported;
  }

  // The unit's own facts: address size (and a split unit's range-list
  // version), language, compilation directory and line table.
  void read_unit_header(Dwarf_Die& cu, Dwarf_Off unit_die_offset, const SplitSource* split) {
    Dwarf_Die cu_again;
    uint8_t addr_size = 8, offset_size = 4;
    if (dwarf_diecu(&cu, &cu_again, &addr_size, &offset_size)) address_size = addr_size;
    if (split) {
      Dwarf_Half version = 5;
      dwarf_cu_info(cu.cu, &version, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
      split_ranges.version = version;
      split_ranges.address_size = addr_size;
      split_ranges.offset_size = offset_size;
    }
    UnitDieAttributes own = unit_die;
    if (!own.own) {
      own.language = attr_unsigned(&cu, DW_AT_language, false);
      own.comp_dir = attr_string(&cu, DW_AT_comp_dir, false);
      own.stmt_list = attr_unsigned(&cu, DW_AT_stmt_list, false);
    }
    language = own.language.value_or(0);
    if (split) {
      comp_dir = split->comp_dir;
    } else if (own.comp_dir) {
      comp_dir = own.comp_dir;
    }
    if (auto stmt_list = split ? split->stmt_list : own.stmt_list) {
      Status table = parse_line_table_into(line_sections, *stmt_list, address_size, line_storage);
      if (table) {
        line_table = &line_storage;
        file_cache.assign(line_table->file_index_limit(), -1);
        // Functions' rows are about the table's rows: reserved (address
        // space only) so the unit's row list is not copied as it grows.
        out.lines.reserve(line_table->rows.size());
      } else {
        out.warnings.push_back("unit at " + hex_number(unit_die_offset) +
                               ": line table ignored: " + table.error().message);
      }
    }
  }

  // Groups in DIE order into out.ops; a string or file interned earlier in
  // the unit needs no second op (interning is idempotent, only the first
  // counts).
  void flatten_groups() {
    std::vector<bool> string_done(out.strings.size()), file_done(out.files.size() + 1);
    for (const auto& g : groups) {
      for (const UnitOp& op : g) {
        if (op.kind == UnitOp::String) {
          if (string_done[op.index]) continue;
          string_done[op.index] = true;
        } else if (op.kind == UnitOp::File) {
          if (file_done[op.index]) continue;
          file_done[op.index] = true;
        }
        out.ops.push_back(op);
      }
    }
    groups.clear();
  }

  UnitOutput convert_unit(const UnitLocation& unit, const SplitSource* split) {
    const Dwarf_Off unit_die_offset = unit.die_offset;
    reset_unit_state();
    Dwarf_Die cu;
    if (!dwarf_offdie(dwarf, unit_die_offset, &cu)) {
      out.skipped = true;
      out.warnings.push_back("unit at " + hex_number(unit_die_offset) + ": " + dwarf_error());
      return std::move(out);
    }
    // The walker first: read_unit_header reads the unit DIE with it.
    const bool walkable = start_walker(&cu, unit);
    read_unit_header(cu, unit_die_offset, split);
    walk_unit = die_key(dwarf, &cu);
    if (walkable) walk();
    if (!failed)
      for (auto& ctx : pending) finish_subprogram(*ctx);
    pending.clear();
    if (failed) {
      UnitOutput skipped;
      skipped.skipped = true;
      skipped.warnings = std::move(out.warnings);
      skipped.warnings.push_back("unit at " + hex_number(unit_die_offset) + " skipped: malformed DWARF: " +
                                 failure);
      return skipped;
    }
    flatten_groups();
    return std::move(out);
  }
};

DwarfUnitConverter::DwarfUnitConverter(Dwarf* dwarf, const DwarfLineSections& line_sections,
                                       const UnitConverterOptions& options)
    : impl_(std::make_unique<Impl>(dwarf, line_sections, options)) {}

DwarfUnitConverter::~DwarfUnitConverter() = default;

UnitOutput DwarfUnitConverter::convert(const UnitLocation& unit) {
  return impl_->convert(unit);
}

void DwarfUnitConverter::recycle(UnitOutput&& used) { impl_->recycle(std::move(used)); }

}  // namespace gsym
