#include "gsym/convert/split_dwarf.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>

#include <dwarf.h>

#include "gsym/format/data_cursor.h"
#include "gsym/convert/elf_image.h"
#include "gsym/base/hex.h"

namespace gsym {

namespace {

constexpr uint8_t kUnitSkeleton = 4, kUnitSplitCompile = 5;  // DW_UT_*

// The .dwp index's section IDs -> ours: DWARF 5 (version 5) numbering, or
// GNU's version 2 (1 info, 2 types, 3 abbrev, 4 line, 5 loc, 6 str_offsets,
// 7 macinfo, 8 macro); -1 = a column we do not use.
int section_of(uint32_t version, uint32_t id) {
  if (version == 5) {
    switch (id) {
      case 1: return static_cast<int>(DwpSection::Info);
      case 3: return static_cast<int>(DwpSection::Abbrev);
      case 4: return static_cast<int>(DwpSection::Line);
      case 5: return static_cast<int>(DwpSection::Loclists);
      case 6: return static_cast<int>(DwpSection::StrOffsets);
      case 8: return static_cast<int>(DwpSection::Rnglists);
      default: return -1;
    }
  }
  switch (id) {
    case 1: return static_cast<int>(DwpSection::Info);
    case 3: return static_cast<int>(DwpSection::Abbrev);
    case 4: return static_cast<int>(DwpSection::Line);
    case 6: return static_cast<int>(DwpSection::StrOffsets);
    default: return -1;
  }
}

using detail::DataCursor;

DataCursor cursor(std::span<const uint8_t> bytes, bool little_endian) {
  return DataCursor(bytes.data(), bytes.data() + bytes.size(), 0, little_endian != (std::endian::native == std::endian::little));
}

std::string dirname_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : path.substr(0, slash);
}

}  // namespace

Expected<DwpIndex> DwpIndex::parse(std::span<const uint8_t> bytes, bool little_endian) {
  DataCursor c = cursor(bytes, little_endian);
  const uint32_t version_word = c.u32();
  const uint32_t columns = c.u32(), units = c.u32(), slots = c.u32();
  if (!c.ok()) return Error(".debug_cu_index: header truncated (" + std::to_string(bytes.size()) + " bytes)");
  // Version 5 is a 2-byte version and 2 bytes of padding; GNU's is 4 bytes.
  const uint32_t first_half = little_endian ? (version_word & 0xffff) : (version_word >> 16);
  const uint32_t version = first_half == 5 ? 5 : version_word;
  if (version != 2 && version != 5)
    return Error(ErrorCode::Unsupported, ".debug_cu_index: unsupported version " + std::to_string(version_word));
  if (slots == 0 ? units != 0 : (slots & (slots - 1)) != 0 || units > slots)
    return Error(".debug_cu_index: " + std::to_string(slots) + " slots for " + std::to_string(units) +
                 " units (not a power of two holding them)");
  if (columns == 0 && units != 0) return Error(".debug_cu_index: no columns");
  if (columns > 64) return Error(".debug_cu_index: " + std::to_string(columns) + " columns");
  // slots * 12 + columns * 4 * (1 + 2 * units) bytes follow the header.
  const uint64_t need = uint64_t{slots} * 12 + uint64_t{columns} * 4 * (1 + 2 * uint64_t{units});
  if (need > c.remaining())
    return Error(".debug_cu_index: tables need " + std::to_string(need) + " bytes, " +
                 std::to_string(c.remaining()) + " remain");
  DwpIndex index;
  index.version_ = version;
  index.units_ = units;
  index.signatures_.resize(slots);
  index.rows_.resize(slots);
  for (uint64_t& s : index.signatures_) s = c.u64();
  for (uint32_t& r : index.rows_) {
    r = c.u32();
    if (r > units) return Error(".debug_cu_index: row " + std::to_string(r) + " of " + std::to_string(units));
  }
  index.columns_.resize(columns);
  std::array<bool, static_cast<size_t>(DwpSection::Count)> seen{};
  for (int& column : index.columns_) {
    column = section_of(version, c.u32());
    if (column < 0) continue;
    if (seen[static_cast<size_t>(column)]) return Error(".debug_cu_index: a section given twice");
    seen[static_cast<size_t>(column)] = true;
  }
  if (units && !seen[static_cast<size_t>(DwpSection::Info)]) return Error(".debug_cu_index: no info column");
  index.offsets_.resize(size_t{units} * columns);
  index.sizes_.resize(size_t{units} * columns);
  for (uint32_t& o : index.offsets_) o = c.u32();
  for (uint32_t& s : index.sizes_) s = c.u32();
  if (!c.ok()) return Error(".debug_cu_index: truncated");
  return index;
}

std::optional<DwpUnit> DwpIndex::find(uint64_t signature) const {
  const uint64_t slots = signatures_.size();
  if (slots == 0) return std::nullopt;
  const uint64_t mask = slots - 1;
  uint64_t slot = signature & mask;
  const uint64_t step = ((signature >> 32) & mask) | 1;
  for (uint64_t probe = 0; probe < slots; ++probe, slot = (slot + step) & mask) {
    const uint32_t row = rows_[slot];
    if (row == 0) return std::nullopt;
    if (signatures_[slot] != signature) continue;
    DwpUnit unit;
    const size_t base = size_t{row - 1} * columns_.size();
    for (size_t col = 0; col < columns_.size(); ++col) {
      if (columns_[col] < 0) continue;
      DwpContribution& to = unit[static_cast<size_t>(columns_[col])];
      to.offset = offsets_[base + col];
      to.size = sizes_[base + col];
      to.present = true;
    }
    return unit;
  }
  return std::nullopt;
}

Expected<std::vector<DwarfUnitHeader>> read_unit_headers(std::span<const uint8_t> section, bool little_endian,
                                                         size_t max_units) {
  std::vector<DwarfUnitHeader> out;
  uint64_t offset = 0;
  while (offset < section.size() && out.size() < max_units) {
    DataCursor c = cursor(section.subspan(offset), little_endian);
    DwarfUnitHeader h;
    h.offset = offset;
    uint64_t length = c.u32();
    uint8_t offset_size = 4;
    if (length == 0xffffffff) {
      length = c.u64();
      offset_size = 8;
    } else if (length >= 0xfffffff0) {
      return Error("unit at " + hex_number(offset) + ": reserved unit length " + hex_number(length));
    }
    const uint64_t start = c.offset();
    if (!c.ok() || length > c.remaining() || length < 2)
      return Error("unit at " + hex_number(offset) + ": length " + hex_number(length) + " past the section");
    h.end = offset + start + length;
    h.version = c.u16();
    if (h.version >= 5) {
      h.unit_type = c.u8();
      c.u8();  // address size
      c.skip(offset_size);  // abbrev offset
      if (h.unit_type == kUnitSkeleton || h.unit_type == kUnitSplitCompile) h.dwo_id = c.u64();
      else if (h.unit_type == 2 || h.unit_type == 6) c.skip(8 + offset_size);  // type units
    } else {
      c.skip(offset_size);  // abbrev offset
      c.u8();               // address size
    }
    if (!c.ok() || c.offset() > start + length)
      return Error("unit at " + hex_number(offset) + ": header longer than the unit");
    h.die_offset = offset + c.offset();
    out.push_back(h);
    offset = h.end;
  }
  return out;
}

std::vector<uint8_t> build_elf_image(const std::vector<std::pair<std::string, std::span<const uint8_t>>>& sections,
                                     bool little_endian) {
  // Layout: ELF header (64), section name table, contents (8-aligned),
  // section headers (64 each: null, the sections, .shstrtab).
  std::string names(1, '\0');
  std::vector<uint32_t> name_offsets;
  for (const auto& s : sections) {
    name_offsets.push_back(static_cast<uint32_t>(names.size()));
    names += s.first;
    names += '\0';
  }
  const uint32_t shstrtab_name = static_cast<uint32_t>(names.size());
  names += ".shstrtab";
  names += '\0';
  auto align8 = [](uint64_t v) { return (v + 7) & ~uint64_t{7}; };
  uint64_t pos = align8(64 + names.size());
  std::vector<uint64_t> data_offsets;
  for (const auto& s : sections) {
    data_offsets.push_back(pos);
    pos = align8(pos + s.second.size());
  }
  const uint64_t shoff = pos;
  const uint16_t shnum = static_cast<uint16_t>(sections.size() + 2);
  std::vector<uint8_t> image(shoff + uint64_t{shnum} * 64, 0);
  auto put = [&](uint64_t off, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) image[off + (little_endian ? i : n - 1 - i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2 /* ELFCLASS64 */, static_cast<uint8_t>(little_endian ? 1 : 2),
                           1 /* EV_CURRENT */};
  std::memcpy(image.data(), ident, sizeof ident);
  put(16, 1, 2);       // e_type ET_REL
  put(20, 1, 4);       // e_version
  put(40, shoff, 8);   // e_shoff
  put(52, 64, 2);      // e_ehsize
  put(58, 64, 2);      // e_shentsize
  put(60, shnum, 2);   // e_shnum
  put(62, shnum - 1, 2);  // e_shstrndx
  std::memcpy(image.data() + 64, names.data(), names.size());
  auto header = [&](size_t index, uint32_t name, uint32_t type, uint64_t offset, uint64_t size) {
    const uint64_t h = shoff + 64 * index;
    put(h, name, 4);
    put(h + 4, type, 4);
    put(h + 24, offset, 8);
    put(h + 32, size, 8);
    put(h + 48, 1, 8);  // sh_addralign
  };
  for (size_t i = 0; i < sections.size(); ++i) {
    if (!sections[i].second.empty())
      std::memcpy(image.data() + data_offsets[i], sections[i].second.data(), sections[i].second.size());
    header(i + 1, name_offsets[i], 1 /* SHT_PROGBITS */, data_offsets[i], sections[i].second.size());
  }
  header(shnum - 1, shstrtab_name, 3 /* SHT_STRTAB */, 64, names.size());
  return image;
}

namespace {

// A list longer than this is taken for a malformed one.
constexpr size_t kMaxRanges = size_t{1} << 20;

uint64_t read_address(const SplitRanges& unit, DataCursor& c) {
  return unit.address_size == 8 ? c.u64() : c.u32();
}

// Entry `index` of the unit's .debug_addr contribution.
bool indexed_address(const SplitRanges& unit, uint64_t index, uint64_t& address) {
  const unsigned width = unit.address_size;
  if (index >= unit.addr.size() / width) return false;
  DataCursor c = cursor(unit.addr.subspan(index * width, width), unit.little_endian);
  address = read_address(unit, c);
  return c.ok();
}

// DWARF 4: (begin, end) pairs in .debug_ranges at `offset`, a base-address
// escape, ended by (0, 0).
bool read_ranges_v4(const SplitRanges& unit, uint64_t offset, std::vector<AddressRange>& out, std::string& error) {
  if (offset >= unit.ranges.size()) {
    error = "range list offset " + hex_number(offset) + " is past .debug_ranges";
    return false;
  }
  DataCursor c = cursor(unit.ranges.subspan(offset), unit.little_endian);
  const uint64_t escape = unit.address_size == 8 ? UINT64_MAX : UINT32_MAX;
  uint64_t base = unit.base_address;
  while (out.size() < kMaxRanges) {
    const uint64_t begin = read_address(unit, c), end = read_address(unit, c);
    if (!c.ok()) break;
    if (begin == 0 && end == 0) return true;
    if (begin == escape) {
      base = end;
      continue;
    }
    out.push_back({base + begin, base + end});
  }
  error = "range list at " + hex_number(offset) + " runs past .debug_ranges";
  return false;
}

// DW_FORM_rnglistx: the offset of list `index`, from the offset table after
// the .debug_rnglists.dwo header (offsets count from the header's end).
bool rnglist_offset(const SplitRanges& unit, uint64_t index, uint64_t& offset, std::string& error) {
  DataCursor h = cursor(unit.rnglists, unit.little_endian);
  const bool dwarf64 = h.u32() == 0xffffffff;
  if (dwarf64) h.u64();
  const size_t entry = dwarf64 ? 8 : 4, header = dwarf64 ? 20 : 12;
  h.u16();  // version
  h.u8();   // address size
  h.u8();   // segment selector size
  const uint32_t count = h.u32();
  if (!h.ok() || index >= count || (index + 1) * entry > unit.rnglists.size() - header) {
    error = "range list index " + std::to_string(index) + " is not in .debug_rnglists.dwo";
    return false;
  }
  DataCursor e = cursor(unit.rnglists.subspan(header + index * entry, entry), unit.little_endian);
  offset = header + (dwarf64 ? e.u64() : e.u32());
  return true;
}

// DWARF 5: the DW_RLE_* entries of .debug_rnglists.dwo at `offset`.
bool read_rnglist_v5(const SplitRanges& unit, uint64_t offset, std::vector<AddressRange>& out, std::string& error) {
  if (offset >= unit.rnglists.size()) {
    error = "range list offset " + hex_number(offset) + " is past .debug_rnglists.dwo";
    return false;
  }
  DataCursor c = cursor(unit.rnglists.subspan(offset), unit.little_endian);
  uint64_t base = unit.base_address;
  while (out.size() < kMaxRanges) {
    const uint8_t kind = c.u8();
    if (!c.ok()) break;
    uint64_t a = 0, b = 0;
    switch (kind) {
      case DW_RLE_end_of_list:
        return true;
      case DW_RLE_base_addressx:
        if (!indexed_address(unit, c.uleb(), base)) break;
        continue;
      case DW_RLE_startx_endx:
        a = c.uleb();
        b = c.uleb();
        if (!indexed_address(unit, a, a) || !indexed_address(unit, b, b)) break;
        out.push_back({a, b});
        continue;
      case DW_RLE_startx_length:
        a = c.uleb();
        b = c.uleb();
        if (!indexed_address(unit, a, a)) break;
        out.push_back({a, a + b});
        continue;
      case DW_RLE_offset_pair:
        a = c.uleb();
        b = c.uleb();
        out.push_back({base + a, base + b});
        continue;
      case DW_RLE_base_address:
        base = read_address(unit, c);
        continue;
      case DW_RLE_start_end:
        a = read_address(unit, c);
        b = read_address(unit, c);
        out.push_back({a, b});
        continue;
      case DW_RLE_start_length:
        a = read_address(unit, c);
        b = c.uleb();
        out.push_back({a, a + b});
        continue;
      default:
        error = "unknown range list entry " + std::to_string(kind);
        return false;
    }
    error = "range list entry with an address index past .debug_addr";
    return false;
  }
  error = "range list at " + hex_number(offset) + " runs past .debug_rnglists.dwo";
  return false;
}

}  // namespace

bool read_split_ranges(const SplitRanges& unit, uint64_t form, uint64_t value, std::vector<AddressRange>& out,
                       std::string& error) {
  out.clear();
  if (unit.address_size != 4 && unit.address_size != 8) {
    error = "address size " + std::to_string(unit.address_size);
    return false;
  }
  if (unit.version < 5) return read_ranges_v4(unit, value, out, error);
  uint64_t offset = value;
  if (form == DW_FORM_rnglistx && !rnglist_offset(unit, value, offset, error)) return false;
  return read_rnglist_v5(unit, offset, out, error);
}

struct SplitDwarfFiles::Impl {
  Options options;
  std::string package_path;
  std::optional<ElfImage> package;
  std::optional<DwpIndex> index;
  bool package_tried = false;
  std::map<std::string, ElfImage> dwo_files;  // by path, kept open for the views
  uint64_t dwo_read = 0;
  bool writable_only_by_us = true;

  // The skeleton's slice of .debug_addr (and of .debug_ranges, version 4),
  // which the image gives the unit as its own.
  Status add_skeleton_sections(const SkeletonUnit& skeleton, SplitUnit& unit) {
    if (skeleton.addr_base) {
      if (*skeleton.addr_base > options.debug_addr.size())
        return Error("DW_AT_addr_base " + hex_number(*skeleton.addr_base) + " is past .debug_addr");
      unit.sections.emplace_back(".debug_addr.dwo", options.debug_addr.subspan(*skeleton.addr_base));
    }
    if (skeleton.version < 5 && skeleton.ranges_base) {
      if (*skeleton.ranges_base > options.debug_ranges.size())
        return Error("DW_AT_GNU_ranges_base " + hex_number(*skeleton.ranges_base) + " is past .debug_ranges");
      unit.sections.emplace_back(".debug_ranges.dwo", options.debug_ranges.subspan(*skeleton.ranges_base));
    }
    return Status::success();
  }

  Status open_package() {
    if (package_tried) return Status::success();
    package_tried = true;
    const bool explicit_path = !options.dwp_path.empty();
    const std::string path = explicit_path ? options.dwp_path : options.binary_path + ".dwp";
    if (!explicit_path && access(path.c_str(), F_OK) != 0) return Status::success();
    Expected<ElfImage> image = ElfImage::open(path, {}, "", true);
    if (!image) return Error(path + ": " + image.error().message);
    if (Status s = image->check_section_sizes(); !s) return Error(path + ": " + s.error().message);
    Expected<std::span<const uint8_t>> bytes = image->section_bytes(".debug_cu_index");
    if (!bytes) return Error(path + ": " + bytes.error().message);
    if (bytes->empty()) return Error(path + ": no .debug_cu_index (not a .dwp package)");
    Expected<DwpIndex> parsed = DwpIndex::parse(*bytes, image->little_endian());
    if (!parsed) return Error(path + ": " + parsed.error().message);
    package_path = path;
    writable_only_by_us = writable_only_by_us && image->writable_only_by_us();
    index = std::move(*parsed);
    package = std::move(*image);
    return Status::success();
  }

  // The unit's sections from the package, if it holds the unit.
  Expected<std::optional<SplitUnit>> from_package(const SkeletonUnit& skeleton) {
    if (!index) return std::optional<SplitUnit>();
    std::optional<DwpUnit> contributions = index->find(skeleton.dwo_id);
    if (!contributions) return std::optional<SplitUnit>();
    SplitUnit unit;
    unit.source = package_path;
    struct Wanted {
      DwpSection kind;
      const char* name;
    };
    static constexpr Wanted kWanted[] = {{DwpSection::Info, ".debug_info.dwo"},
                                         {DwpSection::Abbrev, ".debug_abbrev.dwo"},
                                         {DwpSection::StrOffsets, ".debug_str_offsets.dwo"},
                                         {DwpSection::Rnglists, ".debug_rnglists.dwo"}};
    for (const Wanted& w : kWanted) {
      const DwpContribution& c = (*contributions)[static_cast<size_t>(w.kind)];
      if (!c.present) continue;
      Expected<std::span<const uint8_t>> bytes = package->section_bytes(w.name);
      if (!bytes) return Error(package_path + ": " + bytes.error().message);
      if (c.offset > bytes->size() || c.size > bytes->size() - c.offset)
        return Error(package_path + ": unit " + hex_number(skeleton.dwo_id) + "'s " + w.name + " contribution " +
                     hex_number(c.offset) + "+" + hex_number(c.size) + " is past the section");
      unit.sections.emplace_back(w.name, bytes->subspan(c.offset, c.size));
    }
    Expected<std::span<const uint8_t>> str = package->section_bytes(".debug_str.dwo");
    if (!str) return Error(package_path + ": " + str.error().message);
    unit.sections.emplace_back(".debug_str.dwo", *str);
    if (Status s = locate_unit(skeleton, unit); !s) return Error(package_path + ": " + s.error().message);
    if (Status s = add_skeleton_sections(skeleton, unit); !s) return s.error();
    return std::optional<SplitUnit>(std::move(unit));
  }

  // Finds the split unit in the image's .debug_info.dwo (sections[0]) and
  // narrows that section to it.
  Status locate_unit(const SkeletonUnit& skeleton, SplitUnit& unit) {
    std::span<const uint8_t>& info = unit.sections[0].second;
    Expected<std::vector<DwarfUnitHeader>> headers = read_unit_headers(info, options.little_endian);
    if (!headers) return Error(".debug_info.dwo: " + headers.error().message);
    const DwarfUnitHeader* found = nullptr;
    size_t compile_units = 0;
    for (const DwarfUnitHeader& h : *headers) {
      if (h.version >= 5) {
        if (h.unit_type == kUnitSplitCompile && h.dwo_id == skeleton.dwo_id) found = &h;
      } else if (++compile_units == 1) {
        found = &h;  // version 4: a .dwo's one compile unit (its ID is a DIE attribute)
      } else {
        found = nullptr;
      }
      if (found && h.version >= 5) break;
    }
    if (!found) return Error("no split unit with DWO ID " + hex_number(skeleton.dwo_id));
    info = info.subspan(found->offset, found->end - found->offset);
    unit.die_offset = found->die_offset - found->offset;
    unit.end_offset = found->end - found->offset;
    return Status::success();
  }

  std::vector<std::string> dwo_candidates(const SkeletonUnit& skeleton) const {
    std::vector<std::string> out;
    auto add = [&](std::string p) {
      if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(std::move(p));
    };
    const std::string& name = skeleton.dwo_name;
    if (name.empty()) return out;
    if (name[0] == '/') add(name);
    else if (!skeleton.comp_dir.empty()) add(skeleton.comp_dir + "/" + name);
    const std::string beside = dirname_of(options.binary_path) + "/";
    if (name[0] != '/') add(beside + name);
    add(beside + name.substr(name.rfind('/') + 1));
    return out;
  }

  Expected<SplitUnit> from_dwo(const SkeletonUnit& skeleton) {
    std::vector<std::string> rejected;
    for (const std::string& path : dwo_candidates(skeleton)) {
      auto it = dwo_files.find(path);
      if (it == dwo_files.end()) {
        if (access(path.c_str(), F_OK) != 0) continue;
        Expected<ElfImage> image = ElfImage::open(path, {}, "", true);
        if (!image) {
          rejected.push_back(path + ": " + image.error().message);
          continue;
        }
        if (Status s = image->check_section_sizes(); !s) {
          rejected.push_back(path + ": " + s.error().message);
          continue;
        }
        ++dwo_read;
        writable_only_by_us = writable_only_by_us && image->writable_only_by_us();
        it = dwo_files.emplace(path, std::move(*image)).first;
      }
      const ElfImage& image = it->second;
      SplitUnit unit;
      unit.source = path;
      bool usable = true;
      for (const char* name : {".debug_info.dwo", ".debug_abbrev.dwo", ".debug_str_offsets.dwo", ".debug_str.dwo",
                               ".debug_rnglists.dwo"}) {
        Expected<std::span<const uint8_t>> bytes = image.section_bytes(name);
        if (!bytes) {
          rejected.push_back(path + ": " + bytes.error().message);
          usable = false;
          break;
        }
        if (!bytes->empty()) unit.sections.emplace_back(name, *bytes);
      }
      if (!usable) continue;
      if (unit.sections.empty() || unit.sections[0].first != ".debug_info.dwo") {
        rejected.push_back(path + ": no .debug_info.dwo");
        continue;
      }
      if (Status s = locate_unit(skeleton, unit); !s) {
        rejected.push_back(path + ": " + s.error().message);
        continue;
      }
      if (Status s = add_skeleton_sections(skeleton, unit); !s) return s.error();
      return unit;
    }
    std::string message = "split DWARF file " + (skeleton.dwo_name.empty() ? "(unnamed)" : skeleton.dwo_name) +
                           " (DWO ID " + hex_number(skeleton.dwo_id) + ") not found";
    if (!skeleton.comp_dir.empty() && !skeleton.dwo_name.empty() && skeleton.dwo_name[0] != '/')
      message += " in " + skeleton.comp_dir + " or beside the binary";
    if (!package_path.empty()) message += " nor in " + package_path;
    for (const std::string& r : rejected) message += "; " + r;
    return Error(message);
  }
};

SplitDwarfFiles::SplitDwarfFiles(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
SplitDwarfFiles::~SplitDwarfFiles() = default;

Status SplitDwarfFiles::open_package() { return impl_->open_package(); }
const std::string& SplitDwarfFiles::package_path() const { return impl_->package_path; }
uint64_t SplitDwarfFiles::dwo_files_read() const { return impl_->dwo_read; }
bool SplitDwarfFiles::writable_only_by_us() const { return impl_->writable_only_by_us; }

Expected<SplitUnit> SplitDwarfFiles::find(const SkeletonUnit& skeleton) {
  Expected<std::optional<SplitUnit>> packaged = impl_->from_package(skeleton);
  if (!packaged) return packaged.error();
  if (*packaged) return std::move(**packaged);
  return impl_->from_dwo(skeleton);
}

}  // namespace gsym
