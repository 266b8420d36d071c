// gsym/reader/reader_layout.h - where the tables of an opened GSYM file are, and
// unchecked accessors for them. Reader::parse_layout checks every offset
// once at open, so lookups and the acceleration index read without bounds
// checks.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "gsym/format/data_cursor.h"
#include "gsym/format/decode_context.h"
#include "gsym/reader/reader.h"

namespace gsym::detail {

struct Layout {
  std::span<const uint8_t> data;
  Header header;
  bool swap = false;
  // Version 2's widths: u64 address-info offsets (from info_base), 8-byte
  // string offsets in records and file entries.
  bool wide = false;
  uint64_t addr_table = 0;  // offset of the address-offsets table
  uint64_t info_table = 0;  // offset of the address-info offsets
  uint64_t info_base = 0;   // what info offsets count from (v2: FunctionInfo section)
  uint64_t info_end = 0;    // records' Size and Name lie before it (v2: the section's end)
  uint64_t file_table = 0;  // offset of the first file entry (after the count)
  uint32_t num_files = 0;
  uint64_t uuid_offset = 0, uuid_size = 0;  // build_id()'s bytes

  uint32_t u32_at(uint64_t off) const {
    uint32_t v;
    std::memcpy(&v, data.data() + off, 4);
    return swap ? __builtin_bswap32(v) : v;
  }
  uint64_t u64_at(uint64_t off) const {
    uint64_t v;
    std::memcpy(&v, data.data() + off, 8);
    return swap ? __builtin_bswap64(v) : v;
  }
  uint64_t addr_offset(size_t i) const {
    const uint8_t* p = data.data() + addr_table + i * header.addr_off_size;
    switch (header.addr_off_size) {
      case 1:
        return *p;
      case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return swap ? __builtin_bswap16(v) : v;
      }
      case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return swap ? __builtin_bswap32(v) : v;
      }
      default: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return swap ? __builtin_bswap64(v) : v;
      }
    }
  }
  uint64_t function_start(size_t i) const { return header.base_address + addr_offset(i); }
  // Absolute offset of function i's record.
  uint64_t info_offset(size_t i) const {
    if (!wide) return u32_at(info_table + 4 * i);
    return info_base + u64_at(info_table + 8 * i);
  }
  uint32_t function_size(size_t i) const { return u32_at(info_offset(i)); }

  std::string_view strtab() const {
    return {reinterpret_cast<const char*>(data.data()) + header.strtab_offset, header.strtab_size};
  }
  std::string_view string(uint64_t off) const { return string_at(strtab(), off); }
  // File entry string offsets, or false when the index is out of range.
  bool file_offsets(uint32_t index, uint64_t& dir, uint64_t& base) const {
    if (index >= num_files) return false;
    if (wide) {
      dir = u64_at(file_table + 16ull * index);
      base = u64_at(file_table + 16ull * index + 8);
    } else {
      dir = u32_at(file_table + 8ull * index);
      base = u32_at(file_table + 8ull * index + 4);
    }
    return true;
  }
  uint64_t file_entry_offset(uint32_t index) const {
    return file_table + (wide ? 16ull : 8ull) * index;
  }
  // Bytes of a string-table offset: 4, or 8 in version 2.
  unsigned string_offset_size() const { return wide ? 8 : 4; }

  DataCursor cursor_at(uint64_t off) const {
    return DataCursor(data.data() + off, data.data() + data.size(), off, swap, wide);
  }
};

}  // namespace gsym::detail
