#include "gsym/convert/signal_frames.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

namespace gsym {
namespace {

// A DW_EH_PE-encoded pointer at `p` (within [p, end)) of the section loaded
// at `section_addr` + (p - base); nullopt for encodings this reader skips.
std::optional<uint64_t> read_encoded(const uint8_t*& p, const uint8_t* end, uint8_t encoding,
                                     const uint8_t* base, uint64_t section_addr, bool apply) {
  const uint8_t* field = p;
  auto take = [&](size_t n) -> const uint8_t* {
    if (static_cast<size_t>(end - p) < n) return nullptr;
    const uint8_t* at = p;
    p += n;
    return at;
  };
  int64_t value = 0;
  switch (encoding & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8: {
      const uint8_t* b = take(8);
      if (!b) return std::nullopt;
      std::memcpy(&value, b, 8);
      break;
    }
    case DW_EH_PE_udata4: {
      const uint8_t* b = take(4);
      if (!b) return std::nullopt;
      uint32_t v;
      std::memcpy(&v, b, 4);
      value = v;
      break;
    }
    case DW_EH_PE_sdata4: {
      const uint8_t* b = take(4);
      if (!b) return std::nullopt;
      int32_t v;
      std::memcpy(&v, b, 4);
      value = v;
      break;
    }
    default:
      return std::nullopt;  // leb128 and 2-byte forms: not used for code addresses here
  }
  if (!apply) return static_cast<uint64_t>(value);
  switch (encoding & 0x70) {
    case 0: return static_cast<uint64_t>(value);
    case DW_EH_PE_pcrel: return section_addr + static_cast<uint64_t>(field - base) + static_cast<uint64_t>(value);
    default: return std::nullopt;
  }
}

struct CieInfo {
  bool signal = false;
  uint8_t fde_encoding = DW_EH_PE_absptr;
  bool readable = true;  // the augmentation was understood
};

CieInfo read_cie(const Dwarf_CIE& cie) {
  CieInfo info;
  const std::string_view aug = cie.augmentation ? cie.augmentation : "";
  info.signal = aug.find('S') != std::string_view::npos;
  if (aug.empty() || aug[0] != 'z') return info;  // absptr FDE pointers
  const uint8_t* p = cie.augmentation_data;
  const uint8_t* end = p ? p + cie.augmentation_data_size : nullptr;
  for (char c : aug.substr(1)) {
    if (!p || p >= end) {
      info.readable = c == 'S';
      if (!info.readable) return info;
      continue;
    }
    switch (c) {
      case 'R': info.fde_encoding = *p++; break;
      case 'L': ++p; break;
      case 'P': {
        const uint8_t encoding = *p++;
        if (!read_encoded(p, end, encoding & 0x0f, p, 0, false)) info.readable = false;
        break;
      }
      case 'S':
      case 'B': break;
      default: info.readable = false; return info;
    }
  }
  return info;
}

}  // namespace

std::vector<AddressRange> signal_trampolines(const ElfImage& image) {
  std::vector<AddressRange> out;
  Elf* elf = image.elf();
  size_t shstrndx = 0;
  if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
  const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr));
  if (!ident) return out;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (!name || std::strcmp(name, ".eh_frame") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || !data->d_buf || data->d_size == 0) continue;
    const auto* base = static_cast<const uint8_t*>(data->d_buf);
    std::map<Dwarf_Off, CieInfo> cies;
    Dwarf_Off offset = 0, next = 0;
    // Each step advances (next > offset) or the walk ends: bounded by the section.
    while (offset < data->d_size) {
      Dwarf_CFI_Entry entry;
      if (dwarf_next_cfi(ident, data, /*eh_frame_p=*/true, offset, &next, &entry) != 0 || next <= offset)
        break;
      if (dwarf_cfi_cie_p(&entry)) {
        cies[offset] = read_cie(entry.cie);
      } else {
        auto cie = cies.find(entry.fde.CIE_pointer);
        if (cie != cies.end() && cie->second.signal && cie->second.readable) {
          const uint8_t* p = entry.fde.start;
          const uint8_t encoding = cie->second.fde_encoding;
          auto start = read_encoded(p, entry.fde.end, encoding, base, shdr.sh_addr, true);
          auto size = read_encoded(p, entry.fde.end, encoding & 0x0f, base, shdr.sh_addr, false);
          if (start && size && *size > 0 && *size < 4096 && *start <= UINT64_MAX - *size)
            out.push_back({*start, *start + *size});
        }
      }
      offset = next;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gsym
