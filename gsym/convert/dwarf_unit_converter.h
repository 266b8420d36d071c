// gsym/convert/dwarf_unit_converter.h - one DWARF compile unit -> GSYM functions,
// following llvm-gsymutil's DwarfTransformer (LLVM 22) rule for rule: which
// subprograms and ranges, names (linkage name, else qualified short name),
// per-range line tables and inline trees.
//
// Units are converted in parallel, so the result is not fed to the Builder
// directly: it is a list of operations (intern a string, intern a file, add a
// function) in exactly the order LLVM's single-threaded converter performs
// them, replayed later in unit order. That keeps the string and file tables
// - and so the output bytes - independent of the thread count.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/convert/dwarf_line_table.h"
#include "gsym/format/model.h"
#include "gsym/convert/split_dwarf.h"

namespace gsym {

struct UnitOp {
  enum Kind : uint8_t { String, File, Function };
  Kind kind;
  uint32_t index;  // into UnitOutput::strings, ::files (local index) or ::functions
};

struct UnitOutput {
  std::vector<UnitOp> ops;
  // Views into the DWARF sections (valid while the Dwarf handle lives) or
  // into owned_strings (names composed here; a deque so views stay valid).
  std::vector<std::string_view> strings;
  std::deque<std::string> owned_strings;
  // Local file table: local index i refers to files[i - 1]; 0 is the empty
  // entry. Functions' line rows and inline call files use local indexes.
  std::vector<FileEntry> files;
  // Functions in flat form (see FlatFunction), over the unit's pools, with
  // local indexes: names index `strings`; inline node names are string index
  // + 1 (0 = no name); line rows' files and call files are local files.
  struct Function {
    AddressRange range;
    uint32_t name = 0;
    uint32_t lines_begin = 0, lines_count = 0;
    uint32_t nodes_begin = 0, nodes_count = 0;  // 0 = no inline tree
  };
  std::vector<Function> functions;
  HugePageVector<LineEntry> lines;
  std::vector<FlatInlineNode> inline_nodes;
  std::vector<AddressRange> inline_ranges;
  uint64_t line_rows = 0;
  uint64_t inline_nodes_total = 0;  // nodes in the functions' trees
  std::vector<std::string> warnings;
  bool skipped = false;  // malformed unit: nothing of it is used
  // What `strings` may point into besides the main sections: a split
  // unit's image and its libdw handles, kept until the unit is replayed.
  std::shared_ptr<void> keep_alive;
};

struct UnitConverterOptions {
  std::vector<AddressRange> text_ranges;  // sorted, merged
  bool inline_info = true;
  // Skip the children of DIEs that hold no code, by their DW_AT_sibling
  // (GCC writes one, clang does not): call sites' (their parameters, a
  // quarter of an optimized C unit's DIEs) and, in C and C++ units, those
  // of struct, class, union and enum DIEs outside functions (half a C++
  // unit's DIEs). Their parent links, which qualified names need, are read
  // on first need.
  bool skip_children_without_code = true;
  // The sections the DIE tree is walked over (see dwarf_die_walker.h); the
  // same decompressed bytes libdw reads.
  std::span<const uint8_t> debug_info;
  std::span<const uint8_t> debug_abbrev;
  // The range-list sections libdw reads DW_AT_ranges from (empty when
  // absent), read directly for the common lists (see dwarf_unit_converter.cpp).
  std::span<const uint8_t> debug_ranges;
  std::span<const uint8_t> debug_rnglists;
  // DWARF 5's string offsets and address table (empty when absent), for the
  // indexed forms the converter reads itself.
  std::span<const uint8_t> debug_str_offsets;
  std::span<const uint8_t> debug_addr;
};

// A skeleton unit's split unit (split_dwarf.h), with what the skeleton
// itself tells: as LLVM, the line table and compilation directory are the
// skeleton's, everything else the split unit's.
struct SplitSource {
  SplitUnit unit;
  std::optional<uint64_t> stmt_list;
  std::string comp_dir;
  uint64_t base_address = 0;  // the skeleton's DW_AT_low_pc: base of the unit's range lists
};

// Where a compile unit is in .debug_info.
struct UnitLocation {
  Dwarf_Off header_offset = 0;  // its unit header (unit references are relative to it)
  Dwarf_Off die_offset = 0;  // its unit DIE
  uint64_t end_offset = 0;   // where the next unit's header starts
  bool skeleton = false;     // a split DWARF skeleton (DW_UT_skeleton, or GNU's DWARF 4 one)
  // Set when the skeleton's split unit was found: that unit is converted
  // instead (in its own libdw handle over a one-unit image).
  const SplitSource* split = nullptr;
};

class DwarfUnitConverter {
 public:
  // `dwarf` must be used by this converter's thread only (libdw handles are
  // not thread-safe).
  DwarfUnitConverter(Dwarf* dwarf, const DwarfLineSections& line_sections,
                     const UnitConverterOptions& options);
  ~DwarfUnitConverter();

  // Converts one compile unit.
  UnitOutput convert(const UnitLocation& unit);
  // Hands a converted unit's output back once it is replayed: the next
  // units reuse its vectors' memory (rows, inline nodes, ...) instead of
  // faulting in new pages for each unit. Optional.
  void recycle(UnitOutput&& used);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gsym
