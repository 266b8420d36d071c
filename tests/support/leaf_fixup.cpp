#include "tests/support/leaf_fixup.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cstdlib>
#include <optional>

#include "tests/support/snapshot_support.h"

namespace gsymprof {
namespace {

constexpr uint64_t kRbp = 6, kRsp = 7;  // DWARF register numbers on x86-64

// The register of a CFA rule "register + offset" at `unslid_addr` in the ELF
// at `path`'s .eh_frame; nullopt for any other rule, or no row.
std::optional<uint64_t> cfa_base_register(const std::string& path, uint64_t unslid_addr) {
  snapshot_support::ElfFile elf(path);
  Dwarf_CFI* cfi = elf.ok() ? dwarf_getcfi_elf(elf.elf) : nullptr;
  if (!cfi) return std::nullopt;
  std::optional<uint64_t> reg;
  Dwarf_Frame* frame = nullptr;
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  if (dwarf_cfi_addrframe(cfi, unslid_addr, &frame) == 0 && dwarf_frame_cfa(frame, &ops, &nops) == 0 &&
      nops == 1 && ops[0].atom == DW_OP_bregx)
    reg = ops[0].number;
  std::free(frame);
  dwarf_cfi_end(cfi);
  return reg;
}

}  // namespace

LeafFixup leaf_fixup(CfiUnwinder& unwinder, const StackView& stack, const ModuleFinder& find_module) {
  LeafFixup fixup;
  const UnwindModule* module = find_module ? find_module(stack.regs.ip) : nullptr;
  if (!module) return fixup;
  std::optional<uint64_t> base = cfa_base_register(module->elf_path, stack.regs.ip - module->load_bias);
  if (base == kRbp) {
    fixup.kind = LeafFixup::Kind::FramePointerFrame;
    return fixup;
  }
  if (base != kRsp) return fixup;
  UnwindResult unwound = unwinder.unwind(stack, find_module);
  if (unwound.ips.size() < 2) return fixup;  // the slot is outside the copy, or holds 0
  fixup.kind = LeafFixup::Kind::ReturnAddressOnStack;
  fixup.caller_ip = unwound.ips[1];
  return fixup;
}

}  // namespace gsymprof
