// gsym/convert/plt_table.h - which symbol each x86-64 PLT stub calls, from the
// stubs' bytes and the dynamic relocations, as objdump's synthetic
// `sym@plt` symbols do. Pure: ElfImage::plt_entries() gathers the inputs.
//
// Layouts (GNU ld and lld, x86-64; every entry 16 bytes unless the section's
// sh_entsize says 8, as .plt.got without IBT):
//   .plt      entry 0 is PLT0 (push GOT+8; jmp *GOT+16), the lazy resolver;
//             then one entry per R_X86_64_JUMP_SLOT: `jmp *slot(%rip); push N;
//             jmp PLT0`, or with IBT (-z ibtplt, -fcf-protection objects)
//             `endbr64; push N; bnd jmp PLT0`, N the index in .rela.plt;
//   .plt.sec  (IBT) the stubs calls go to: `endbr64; bnd jmp *slot(%rip)`;
//   .plt.got  functions whose address is also taken: `[endbr64;] [bnd] jmp
//             *slot(%rip)` on an R_X86_64_GLOB_DAT slot.
// An entry is named by the relocation of the GOT slot its indirect jmp
// reads; an entry without one (IBT lazy stubs) by the relocation its
// `push N` names. R_X86_64_IRELATIVE slots (ifuncs called inside their own
// library) carry no symbol: they take the name of a function symbol at the
// resolver address (the addend) when the caller knows one, else
// `*ABS*+0xADDEND`, as objdump prints them. Entries naming nothing are
// left out; PLT0 is named `.plt` (objdump's label for it).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gsym {

struct PltSection {
  std::string_view name;           // ".plt", ".plt.sec" or ".plt.got"
  uint64_t address = 0;            // sh_addr
  uint64_t entry_size = 16;        // 8 or 16; anything else: section skipped
  std::span<const uint8_t> bytes;  // the section's contents
};

struct PltRelocation {
  uint64_t got_slot = 0;  // r_offset
  std::string name;       // symbol name; "" for IRELATIVE (named by `addend`)
  uint64_t addend = 0;    // IRELATIVE: the resolver address
  bool irelative = false;
};

struct PltEntry {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string name;  // "strlen@plt", ".plt" for PLT0
  bool operator==(const PltEntry&) const = default;
};

// `jump_slots`: .rela.plt in table order (push N indexes it); `glob_dat`:
// GLOB_DAT relocations of .rela.dyn. `name_at(addr)`: a function symbol at
// an address ("" = none; may be empty), for IRELATIVE slots. Sorted by
// address; bytes outside the sections are never read.
std::vector<PltEntry> decode_plt(std::span<const PltSection> sections,
                                 std::span<const PltRelocation> jump_slots,
                                 std::span<const PltRelocation> glob_dat,
                                 const std::function<std::string(uint64_t addr)>& name_at = {});

}  // namespace gsym
