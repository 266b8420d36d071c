// gsym/convert/split_dwarf.h - split DWARF (-gsplit-dwarf): the compile units a
// binary's skeleton units stand for, read from their .dwo files or from a
// .dwp package, and handed to libdw as a small in-memory .dwo of one unit.
//
// Why our own reading: libdw 0.188 opens a skeleton's .dwo itself, with a
// blocking open() of a path the input names (a FIFO there hangs it) and
// decompression without our size checks, and it cannot read .dwp packages.
// Here the files are opened like every other input (by descriptor, regular
// files only, checked sizes), and a unit's contributions (its slices of
// .debug_info.dwo, .debug_abbrev.dwo, .debug_str_offsets.dwo, ...; in a
// .dwp found through .debug_cu_index) are copied into an ELF image in which
// each slice starts its section, with the skeleton's .debug_addr slice from
// its DW_AT_addr_base: every offset the unit holds is then right for libdw
// without linking it to the skeleton (which libdw does only for files it
// opened itself).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/format/model.h"

namespace gsym {

class ElfImage;

// The contributions of one unit in a .dwp (DWARF 5 section numbering).
enum class DwpSection : uint8_t { Info, Abbrev, Line, Loclists, StrOffsets, Rnglists, Count };

struct DwpContribution {
  uint64_t offset = 0, size = 0;
  bool present = false;
};
using DwpUnit = std::array<DwpContribution, static_cast<size_t>(DwpSection::Count)>;

// A .debug_cu_index: DWARF 5 section 7.3.5 (version 5) or the GNU DWARF 4
// extension (version 2): a hash table of unit signatures (DWO IDs) to rows
// of per-section offsets and sizes. Untrusted input: every count is checked
// against the section before anything is read or reserved, the table size
// must be a power of two and probing stops after one pass over it.
class DwpIndex {
 public:
  static Expected<DwpIndex> parse(std::span<const uint8_t> bytes, bool little_endian);
  // The unit with this signature, nullopt when the index has none. Columns
  // of other sections (types, macro) are ignored.
  std::optional<DwpUnit> find(uint64_t signature) const;
  uint32_t version() const { return version_; }
  uint32_t unit_count() const { return units_; }

 private:
  uint32_t version_ = 0, units_ = 0;
  std::vector<uint64_t> signatures_;  // per slot
  std::vector<uint32_t> rows_;        // per slot: 1-based row, 0 = empty
  std::vector<int> columns_;          // per column: a DwpSection, or -1
  std::vector<uint32_t> offsets_, sizes_;  // units_ rows of columns_.size()
};

// A unit header in a .debug_info(.dwo) section.
struct DwarfUnitHeader {
  uint64_t offset = 0;      // of the header
  uint64_t end = 0;         // of the unit (next header)
  uint64_t die_offset = 0;  // of its first DIE
  uint16_t version = 0;
  uint8_t unit_type = 0;    // DW_UT_* (version 5); 0 before
  std::optional<uint64_t> dwo_id;  // version 5 skeleton and split units
};

// The unit headers of `section` in order (at most `max_units`); a header
// that does not fit ends the list with an error.
Expected<std::vector<DwarfUnitHeader>> read_unit_headers(std::span<const uint8_t> section, bool little_endian,
                                                         size_t max_units = 1u << 20);

// A minimal little- or big-endian ELFCLASS64 ET_REL image holding these
// sections (name, contents) in order, for elf_memory.
std::vector<uint8_t> build_elf_image(const std::vector<std::pair<std::string, std::span<const uint8_t>>>& sections,
                                     bool little_endian);

// What a split unit's DW_AT_ranges needs: its contributions and the
// skeleton's base address (a split unit's range lists are relative to the
// skeleton's DW_AT_low_pc, which libdw cannot know for a unit it did not
// link to its skeleton; LLVM uses the skeleton's too).
struct SplitRanges {
  uint16_t version = 5;
  uint8_t address_size = 8;
  uint8_t offset_size = 4;
  bool little_endian = true;
  uint64_t base_address = 0;
  std::span<const uint8_t> rnglists;  // version 5: the unit's .debug_rnglists.dwo contribution
  std::span<const uint8_t> ranges;    // version 4: .debug_ranges from DW_AT_GNU_ranges_base
  std::span<const uint8_t> addr;      // .debug_addr from DW_AT_addr_base
};

// The ranges of a DW_AT_ranges value (`form` DW_FORM_rnglistx: `value` is
// the index; else an offset) in the order listed, empty ones included, as
// libdw's dwarf_ranges gives them (at most 2^20); false with `error` on
// malformed or out-of-bounds input.
bool read_split_ranges(const SplitRanges& unit, uint64_t form, uint64_t value, std::vector<AddressRange>& out,
                       std::string& error);

// What a skeleton unit says about its split unit (read by the converter).
struct SkeletonUnit {
  uint16_t version = 5;
  uint64_t dwo_id = 0;
  std::string dwo_name;   // DW_AT_dwo_name / DW_AT_GNU_dwo_name
  std::string comp_dir;   // DW_AT_comp_dir ("" = none)
  std::optional<uint64_t> addr_base;    // DW_AT_addr_base / DW_AT_GNU_addr_base
  std::optional<uint64_t> ranges_base;  // DW_AT_GNU_ranges_base (version 4)
  uint64_t low_pc = 0;                  // the base address of its range lists
};

// A split unit located: the sections of its one-unit image, as views into
// files SplitDwarfFiles keeps open. die_offset/end_offset are in the image's
// .debug_info.dwo, where the unit header is at 0.
struct SplitUnit {
  std::vector<std::pair<std::string, std::span<const uint8_t>>> sections;
  uint64_t die_offset = 0, end_offset = 0;
  std::string source;  // the .dwo or .dwp it came from
};

// Finds the split units of one binary. `.dwp`: the explicit one, else
// BINARY.dwp beside it (as LLVM and gdb look); a unit missing from it, or
// any unit when there is none, is looked for as a .dwo: DW_AT_dwo_name when
// absolute, DW_AT_comp_dir/DW_AT_dwo_name, then the name (and its last
// component) beside the binary. Each candidate must be a regular ELF file
// holding a split unit with the skeleton's DWO ID (version 4: its only
// compile unit).
class SplitDwarfFiles {
 public:
  struct Options {
    std::string binary_path;  // for BINARY.dwp and "beside the binary"
    std::string dwp_path;     // explicit package ("" = BINARY.dwp if present)
    bool little_endian = true;
    // The binary's (or its debug file's) sections the skeletons index.
    std::span<const uint8_t> debug_addr, debug_ranges;
  };
  explicit SplitDwarfFiles(Options options);
  ~SplitDwarfFiles();
  SplitDwarfFiles(const SplitDwarfFiles&) = delete;
  SplitDwarfFiles& operator=(const SplitDwarfFiles&) = delete;

  // Opens the package (explicit: its errors are the caller's to report).
  Status open_package();
  const std::string& package_path() const;

  // The split unit of `skeleton`, or an error naming the file wanted (the
  // converter warns with it and counts the unit as skipped).
  Expected<SplitUnit> find(const SkeletonUnit& skeleton);

  uint64_t dwo_files_read() const;
  // False when a package or .dwo read could have been written by someone
  // other than root or us (gsym::writable_only_by_us).
  bool writable_only_by_us() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gsym
