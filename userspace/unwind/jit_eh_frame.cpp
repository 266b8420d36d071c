#include "userspace/unwind/jit_eh_frame.h"

#include <dwarf.h>
#include <elf.h>

#include <cstring>
#include <string>

#include "gsym/format/leb128.h"

namespace gsymprof {
namespace {

using gsym::Error;
using gsym::ErrorCode;

constexpr uint32_t kDwarf64Length = 0xffffffff;

// Bounded reads of one entry's bytes, front to back; any read past the end
// clears `ok` and yields zeros.
struct Reader {
  explicit Reader(std::span<const uint8_t> from, size_t offset = 0) : bytes(from), at(offset) {}
  std::span<const uint8_t> bytes;
  size_t at = 0;
  bool ok = true;

  bool has(size_t n) const { return ok && bytes.size() - at >= n; }
  uint64_t fixed(size_t n) {  // little-endian, n <= 8
    if (!has(n)) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{bytes[at + i]} << (8 * i);
    at += n;
    return v;
  }
  uint64_t uleb() {
    const uint8_t* p = bytes.data() + at;
    uint64_t v = 0;
    if (!ok || gsym::leb128::decode_uleb<gsym::kMaxLebBytes>(p, bytes.data() + bytes.size(), v) !=
                   gsym::leb128::Result::Ok) {
      ok = false;
      return 0;
    }
    at = static_cast<size_t>(p - bytes.data());
    return v;
  }
  int64_t sleb() {
    const uint8_t* p = bytes.data() + at;
    int64_t v = 0;
    if (!ok || gsym::leb128::decode_sleb<gsym::kMaxLebBytes>(p, bytes.data() + bytes.size(), v) !=
                   gsym::leb128::Result::Ok) {
      ok = false;
      return 0;
    }
    at = static_cast<size_t>(p - bytes.data());
    return v;
  }
  // A value in DW_EH_PE format `encoding & 0x0f`, sign-extended for the
  // signed forms (what libdw computes with).
  uint64_t encoded(uint8_t encoding) {
    switch (encoding & 0x0f) {
      case DW_EH_PE_absptr: return fixed(8);
      case DW_EH_PE_uleb128: return uleb();
      case DW_EH_PE_udata2: return fixed(2);
      case DW_EH_PE_udata4: return fixed(4);
      case DW_EH_PE_udata8: return fixed(8);
      case DW_EH_PE_sleb128: return static_cast<uint64_t>(sleb());
      case DW_EH_PE_sdata2: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(fixed(2))));
      case DW_EH_PE_sdata4: return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(fixed(4))));
      case DW_EH_PE_sdata8: return fixed(8);
      default: ok = false; return 0;
    }
  }
};

// Whether Reader::encoded reads DW_EH_PE format `format` (its size is known).
bool known_format(uint8_t format) {
  switch (format) {
    case DW_EH_PE_absptr: case DW_EH_PE_uleb128: case DW_EH_PE_udata2: case DW_EH_PE_udata4:
    case DW_EH_PE_udata8: case DW_EH_PE_sleb128: case DW_EH_PE_sdata2: case DW_EH_PE_sdata4:
    case DW_EH_PE_sdata8:
      return true;
    default:
      return false;
  }
}

// Pointer encodings an FDE's pc_begin may use here: absolute or relative to
// where it lies; not relative to sections this image lacks (text, data,
// function), not indirect, not aligned.
bool readable_pc_encoding(uint8_t encoding) {
  const uint8_t application = encoding & 0x70;
  return !(encoding & DW_EH_PE_indirect) && (application == DW_EH_PE_absptr || application == DW_EH_PE_pcrel) &&
         known_format(encoding & 0x0f);
}

// The FDE pointer encoding of the CIE whose body (after its id) is `body`:
// its 'R' augmentation, else absolute 8-byte pointers.
gsym::Expected<uint8_t> fde_encoding_of_cie(std::span<const uint8_t> body, size_t cie_offset) {
  Reader r(body);
  const uint64_t version = r.fixed(1);
  if (r.ok && version != 1 && version != 3 && version != 4)
    return Error(ErrorCode::Unsupported, "CIE version " + std::to_string(version), cie_offset);
  const void* nul = r.ok ? std::memchr(body.data() + r.at, 0, body.size() - r.at) : nullptr;
  if (!nul) return Error("CIE without an augmentation string", cie_offset);
  const std::string augmentation(reinterpret_cast<const char*>(body.data() + r.at),
                                 static_cast<const uint8_t*>(nul) - (body.data() + r.at));
  r.at += augmentation.size() + 1;
  if (version == 4 && (r.fixed(1) != 8 || r.fixed(1) != 0))
    return Error(ErrorCode::Unsupported, "CIE for another address or segment size", cie_offset);
  r.uleb();  // code alignment
  r.sleb();  // data alignment
  if (version == 1) {
    r.fixed(1);  // return address register
  } else {
    r.uleb();
  }
  uint8_t encoding = DW_EH_PE_absptr;
  if (!augmentation.empty()) {
    // Without 'z' the augmentation's data has no known size.
    if (augmentation[0] != 'z')
      return Error(ErrorCode::Unsupported, "CIE augmentation \"" + augmentation + "\"", cie_offset);
    const uint64_t size = r.uleb();
    if (!r.has(size)) return Error("CIE augmentation data past its end", cie_offset);
    Reader data(body.subspan(r.at, static_cast<size_t>(size)));
    for (char c : std::string_view(augmentation).substr(1)) {
      if (c == 'R') {
        encoding = static_cast<uint8_t>(data.fixed(1));
      } else if (c == 'P') {
        // Skipped, but its size must be known for an 'R' after it to be read as libdw reads it.
        const uint8_t personality = static_cast<uint8_t>(data.fixed(1));
        if (personality == DW_EH_PE_omit) continue;
        if ((personality & 0x70) == DW_EH_PE_aligned || !known_format(personality & 0x0f))
          return Error(ErrorCode::Unsupported, "CIE personality encoding", cie_offset);
        data.encoded(personality);
      } else if (c == 'L') {
        data.fixed(1);
      } else if (c != 'S' && c != 'B') {
        return Error(ErrorCode::Unsupported, "CIE augmentation \"" + augmentation + "\"", cie_offset);
      }
    }
    if (!data.ok) return Error("CIE augmentation data cut short", cie_offset);
  }
  if (!r.ok) return Error("CIE cut short", cie_offset);
  if (!readable_pc_encoding(encoding))
    return Error(ErrorCode::Unsupported, "FDE pointer encoding " + std::to_string(encoding), cie_offset);
  return encoding;
}

struct Fde {
  size_t pc_begin_offset = 0;  // of the pc_begin field, in the .eh_frame
  bool pc_relative = false;
  uint64_t pc_begin = 0;       // as written (pcrel: from pc_begin_offset)
  uint64_t pc_range = 0;
};

}  // namespace

gsym::Expected<JitEhFrame> place_jit_eh_frame(std::span<const uint8_t> unwind, uint64_t eh_frame_hdr_size,
                                              uint64_t start, uint64_t end) {
  if (start >= end) return Error("empty code range");
  if (eh_frame_hdr_size > unwind.size()) return Error(".eh_frame_hdr larger than the unwinding info");
  std::span<const uint8_t> bytes = unwind.first(unwind.size() - static_cast<size_t>(eh_frame_hdr_size));
  std::vector<Fde> fdes;
  size_t at = 0;
  while (at < bytes.size()) {
    Reader header(bytes, at);
    const uint64_t length = header.fixed(4);
    if (!header.ok) return Error("bytes after the last entry", at);
    if (length == 0) break;  // the terminator: what follows is not read
    if (length == kDwarf64Length) return Error(ErrorCode::Unsupported, "64-bit DWARF entry", at);
    if (length < 4 || length > bytes.size() - at - 4) return Error("entry length past the end", at);
    const size_t entry_end = at + 4 + static_cast<size_t>(length);
    const uint32_t id = static_cast<uint32_t>(header.fixed(4));
    if (id != 0) {
      // An FDE: `id` is how far back its CIE is from the id itself.
      const size_t id_offset = at + 4;
      if (id > id_offset) return Error("FDE whose CIE lies before the .eh_frame", at);
      const size_t cie_offset = id_offset - id;
      Reader cie_header(bytes, cie_offset);
      const uint64_t cie_length = cie_header.fixed(4);
      if (!cie_header.ok || cie_length < 4 || cie_length > bytes.size() - cie_offset - 4 ||
          cie_header.fixed(4) != 0)
        return Error("FDE without a CIE where it points", at);
      gsym::Expected<uint8_t> encoding = fde_encoding_of_cie(
          bytes.subspan(cie_offset + 8, static_cast<size_t>(cie_length) - 4), cie_offset);
      if (!encoding) return encoding.error();
      Reader body(bytes.first(entry_end), at + 8);
      Fde fde;
      fde.pc_begin_offset = body.at;
      fde.pc_relative = (*encoding & 0x70) == DW_EH_PE_pcrel;
      fde.pc_begin = body.encoded(*encoding);
      fde.pc_range = body.encoded(*encoding & 0x0f);
      if (!body.ok) return Error("FDE cut short", at);
      fdes.push_back(fde);
    }
    at = entry_end;
  }
  if (fdes.empty()) return Error(ErrorCode::Unsupported, "no FDE");
  JitEhFrame out;
  out.eh_frame = bytes.first(at);
  out.fdes = fdes.size();
  // The first FDE relative to where it lies places the bytes: its code is
  // the code's start. (Absolute FDEs are where they say, wherever the bytes lie.)
  for (const Fde& fde : fdes) {
    if (!fde.pc_relative) continue;
    out.address = start - fde.pc_begin_offset - fde.pc_begin;  // mod 2^64, as libdw computes
    break;
  }
  for (const Fde& fde : fdes) {
    const uint64_t pc = fde.pc_relative ? out.address + fde.pc_begin_offset + fde.pc_begin : fde.pc_begin;
    if (pc < start || pc >= end || fde.pc_range == 0 || fde.pc_range > end - pc)
      return Error("an FDE outside the code", fde.pc_begin_offset);
  }
  return out;
}

std::vector<uint8_t> jit_eh_frame_elf(const JitEhFrame& frame) {
  // ELF header, section names, .eh_frame, section headers (null, .eh_frame,
  // .shstrtab); no program headers, nothing else.
  static constexpr char kNames[] = "\0.eh_frame\0.shstrtab";
  constexpr size_t kEhFrameName = 1, kShstrtabName = 11;
  const size_t names_at = sizeof(Elf64_Ehdr);
  const size_t eh_frame_at = names_at + sizeof(kNames);
  const size_t headers_at = (eh_frame_at + frame.eh_frame.size() + 7) & ~size_t{7};
  std::vector<uint8_t> image(headers_at + 3 * sizeof(Elf64_Shdr), 0);

  Elf64_Ehdr ehdr{};
  std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = ELFCLASS64;
  ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
  ehdr.e_ident[EI_VERSION] = EV_CURRENT;
  ehdr.e_type = ET_DYN;
  ehdr.e_machine = EM_X86_64;
  ehdr.e_version = EV_CURRENT;
  ehdr.e_shoff = headers_at;
  ehdr.e_ehsize = sizeof(Elf64_Ehdr);
  ehdr.e_shentsize = sizeof(Elf64_Shdr);
  ehdr.e_shnum = 3;
  ehdr.e_shstrndx = 2;
  std::memcpy(image.data(), &ehdr, sizeof ehdr);
  std::memcpy(image.data() + names_at, kNames, sizeof(kNames));
  if (!frame.eh_frame.empty()) std::memcpy(image.data() + eh_frame_at, frame.eh_frame.data(), frame.eh_frame.size());

  Elf64_Shdr sections[3]{};
  sections[1].sh_name = kEhFrameName;
  sections[1].sh_type = SHT_PROGBITS;
  sections[1].sh_flags = SHF_ALLOC;
  sections[1].sh_addr = frame.address;
  sections[1].sh_offset = eh_frame_at;
  sections[1].sh_size = frame.eh_frame.size();
  sections[1].sh_addralign = 1;
  sections[2].sh_name = kShstrtabName;
  sections[2].sh_type = SHT_STRTAB;
  sections[2].sh_offset = names_at;
  sections[2].sh_size = sizeof(kNames);
  sections[2].sh_addralign = 1;
  std::memcpy(image.data() + headers_at, sections, sizeof sections);
  return image;
}

}  // namespace gsymprof
