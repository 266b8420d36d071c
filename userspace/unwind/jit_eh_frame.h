// userspace/unwind/jit_eh_frame.h - the .eh_frame a JIT runtime wrote for
// one piece of code (a jitdump's JIT_CODE_UNWINDING_INFO: .eh_frame, then
// .eh_frame_hdr), made readable by libdw: where it must lie in memory for
// its FDEs to describe the code, checked, and a minimal ELF image that holds
// it there (dwarf_getcfi_elf reads CFI from ELF sections only).
//
// Where the runtime kept the bytes is its own business (V8: right after the
// code; CPython's -X perf_jit and perf inject: after the code rounded up to
// 8 or 16): an FDE's pc_begin is usually relative to where it lies
// (DW_EH_PE_pcrel), so the bytes are placed where the first FDE begins at
// the code's start, and every FDE must then lie inside the code.
//
// The bytes are the profiled user's: untrusted. Entries are walked with
// every length checked against the bytes; an encoding this code does not
// read, an FDE outside the code, or no FDE at all refuses the whole
// .eh_frame (the unwinder then treats the code as having no CFI).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gsym/base/expected.h"

namespace gsymprof {

struct JitEhFrame {
  std::span<const uint8_t> eh_frame;  // the unwinding info without its .eh_frame_hdr
  uint64_t address = 0;               // where it must lie (the ELF section's address)
  size_t fdes = 0;
};

// Places `unwind` (.eh_frame followed by `eh_frame_hdr_size` bytes of
// .eh_frame_hdr) for code [start, end) as loaded. Errors (Malformed,
// Unsupported): one line saying why.
gsym::Expected<JitEhFrame> place_jit_eh_frame(std::span<const uint8_t> unwind, uint64_t eh_frame_hdr_size,
                                              uint64_t start, uint64_t end);

// A little-endian x86-64 ELF image with one section, .eh_frame, holding
// `frame.eh_frame` at `frame.address`: what dwarf_getcfi_elf needs.
std::vector<uint8_t> jit_eh_frame_elf(const JitEhFrame& frame);

}  // namespace gsymprof
