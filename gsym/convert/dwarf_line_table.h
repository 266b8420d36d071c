// gsym/convert/dwarf_line_table.h - a DWARF 2-5 line-number program decoded the way
// LLVM's DWARFDebugLine does it, because GSYM line tables must equal what
// llvm-gsymutil derives: rows kept in program order, grouped in sequences
// (sorted by end address), rows after a tombstone DW_LNE_set_address dropped,
// and file paths built like LLVM's getFileNameByIndex(AbsoluteFilePath).
// (libdw sorts all rows of a unit by address, which merges sequences.)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/huge_pages.h"

namespace gsym {

// Decompressed sections a line program may reference.
struct DwarfLineSections {
  std::span<const uint8_t> debug_line;
  std::span<const uint8_t> debug_line_str;
  std::span<const uint8_t> debug_str;
  bool little_endian = true;
};

// 16 bytes: a large unit has hundreds of thousands of rows; whether a row
// ends its sequence is DwarfLineTable::ends_sequence.
struct DwarfLineRow {
  uint64_t address = 0;
  uint32_t file = 1;
  uint32_t line = 1;
};

struct DwarfLineSequence {
  uint64_t low_pc = 0;   // address of the first row
  uint64_t high_pc = 0;  // address of the end_sequence row
  uint32_t first_row = 0;
  uint32_t end_row = 0;  // one past the end_sequence row
};

struct DwarfLineTable {
  uint16_t version = 0;
  std::vector<std::string_view> include_directories;
  struct FileName {
    std::string_view name;
    uint64_t directory_index = 0;
  };
  std::vector<FileName> file_names;
  HugePageVector<DwarfLineRow> rows;  // reserved large at once: see huge_pages.h
  std::vector<uint64_t> end_rows;  // bit i set: rows[i] is an end_sequence row
  std::vector<DwarfLineSequence> sequences;  // valid ones, sorted by high_pc

  // LLVM's Prologue::getFileNameByIndex with AbsoluteFilePath; false when the
  // index names no entry.
  bool file_path(uint64_t index, std::string_view comp_dir, std::string& out) const;
  // Number of usable DWARF file indexes (LLVM sizes its per-unit cache
  // file_names.size() + 1).
  size_t file_index_limit() const { return file_names.size() + 1; }
  // Whether rows[row] is an end_sequence row.
  bool ends_sequence(size_t row) const {
    return row / 64 < end_rows.size() && (end_rows[row / 64] >> (row % 64)) & 1;
  }

  // LLVM's LineTable::lookupAddressRange: the rows describing [address,
  // address + size), as runs of consecutive indexes (one per sequence met,
  // in LLVM's order); false when no sequence contains `address`.
  struct RowRun {
    uint32_t first = 0, last = 0;  // inclusive
  };
  bool lookup_address_runs(uint64_t address, uint64_t size, std::vector<RowRun>& out) const;
};

// Decodes the line program at `offset` in .debug_line. `address_size` is the
// unit's (for the tombstone value).
Expected<DwarfLineTable> parse_line_table(const DwarfLineSections& sections, uint64_t offset,
                                          uint8_t address_size);
// The same into `table`, whose vectors are cleared and reused: a converter
// decoding one table per unit keeps one table's memory (rows of the largest
// unit) instead of faulting in and unmapping each unit's anew. On error the
// table's contents are unspecified.
Status parse_line_table_into(const DwarfLineSections& sections, uint64_t offset, uint8_t address_size,
                             DwarfLineTable& table);

// LLVM's sys::path::parent_path / filename for POSIX paths, which
// GsymCreator::insertFile uses to split a path into directory and basename.
std::string_view path_parent(std::string_view path);
std::string_view path_filename(std::string_view path);

}  // namespace gsym
