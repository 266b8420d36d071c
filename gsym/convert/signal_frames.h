// gsym/convert/signal_frames.h - the signal trampolines of an ELF file:
// code whose .eh_frame FDE has a CIE with the 'S' augmentation (glibc's
// __restore_rt, the vDSO's __vdso_rt_sigreturn). A return there is the
// kernel's, not a call's, so profilers show it as a signal frame.
#pragma once

#include <vector>

#include "gsym/convert/elf_image.h"

namespace gsym {

// The [start, end) of every FDE whose CIE says 'S', sorted; empty without
// .eh_frame or when it cannot be read (untrusted bytes: every read is
// bounded by the section, and an unknown pointer encoding skips the FDE).
std::vector<AddressRange> signal_trampolines(const ElfImage& image);

}  // namespace gsym
