// libFuzzer target: the split DWARF readers of gsym/convert/split_dwarf.h, all fed
// untrusted bytes from .dwp and .dwo files. The first byte picks the reader
// and byte order:
//   0/1  .debug_cu_index (DwpIndex::parse; little/big endian), then lookups
//        of signatures taken from the input: every contribution found is
//        one of the index's own rows;
//   2/3  .debug_info(.dwo) unit headers (read_unit_headers): units in
//        order, inside the section, DIEs inside their unit;
//   4/5  range lists (read_split_ranges): the next byte picks version 4 or
//        5, form, address size; the rest splits into lists and addresses;
//   6/7  a .debug_sup (parse_debug_sup, debug_file_locator.h): the link to
//        a dwz -5 supplementary file.
// No input may crash, hang, read out of bounds or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <dwarf.h>

#include "gsym/convert/debug_file_locator.h"
#include "gsym/convert/split_dwarf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 8;
  const bool little = (mode & 1) == 0;
  const std::span<const uint8_t> bytes(data + 1, size - 1);
  if (mode <= 1) {
    gsym::Expected<gsym::DwpIndex> index = gsym::DwpIndex::parse(bytes, little);
    if (!index) return 0;
    if (index->version() != 2 && index->version() != 5) std::abort();
    for (size_t at = 0; at + 8 <= bytes.size() && at < 4096; at += 4) {
      uint64_t signature;
      std::memcpy(&signature, bytes.data() + at, 8);
      std::optional<gsym::DwpUnit> unit = index->find(signature);
      if (unit && !(*unit)[static_cast<size_t>(gsym::DwpSection::Info)].present) std::abort();
    }
    return 0;
  }
  if (mode <= 3) {
    gsym::Expected<std::vector<gsym::DwarfUnitHeader>> headers = gsym::read_unit_headers(bytes, little, 4096);
    if (!headers) return 0;
    uint64_t previous_end = 0;
    for (const gsym::DwarfUnitHeader& h : *headers) {
      if (h.offset != previous_end || h.end > bytes.size() || h.die_offset > h.end || h.die_offset <= h.offset)
        std::abort();
      previous_end = h.end;
    }
    return 0;
  }
  if (mode >= 6) {
    std::optional<gsym::SupplementaryLink> link = gsym::parse_debug_sup(bytes, little);
    if (link && (link->checksum.size() > bytes.size() || link->name.size() > bytes.size())) std::abort();
    return 0;
  }
  if (bytes.size() < 2) return 0;
  gsym::SplitRanges unit;
  const uint8_t shape = bytes[0];
  unit.version = (shape & 1) ? 4 : 5;
  unit.address_size = (shape & 2) ? 4 : 8;
  unit.little_endian = little;
  unit.base_address = shape >> 4;
  const uint64_t form = (shape & 4) ? DW_FORM_rnglistx : DW_FORM_sec_offset;
  const uint64_t value = bytes[1];
  const std::span<const uint8_t> rest = bytes.subspan(2);
  const size_t half = rest.size() / 2;
  unit.rnglists = unit.ranges = rest.subspan(0, half);
  unit.addr = rest.subspan(half);
  std::vector<gsym::AddressRange> out;
  std::string error;
  const bool ok = gsym::read_split_ranges(unit, form, value, out, error);
  if (out.size() > (size_t{1} << 20)) std::abort();
  if (!ok && error.empty()) std::abort();
  return 0;
}
