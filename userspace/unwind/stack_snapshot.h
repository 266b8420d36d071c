// userspace/unwind/stack_snapshot.h - what the CFI unwinder (cfi_unwinder.h)
// needs besides the registers and stack copy (StackView, raw_sample.h): the
// modules a runtime address can lie in, and a way to find the one holding it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "userspace/base/build_id.h"
#include "userspace/process/module_identity.h"

namespace gsymprof {

// JIT code whose runtime wrote its CFI (a jitdump's unwinding info): the
// code's range as loaded and the bytes (jit_eh_frame.h places them).
struct JitUnwindCode {
  uint64_t start = 0, end = 0;  // as loaded; UnwindModule::load_bias: how far it moved since
  std::vector<uint8_t> unwind;  // .eh_frame followed by .eh_frame_hdr
  uint64_t eh_frame_hdr_size = 0;
  // Unique for the life of the unwinder that loads it (the key of its CFI):
  // code loaded again at the same address is another piece of code.
  uint64_t serial = 0;
  bool operator==(const JitUnwindCode&) const = default;
};

// Where the unwinder reads a module's CFI, and how to turn runtime addresses
// into the ELF's own (unslid) addresses.
struct UnwindModule {
  std::string elf_path;    // readable path of the ELF (e.g. /proc/PID/map_files/...)
  BuildId build_id;        // the file must carry it; empty = unknown, not checked
  uint64_t load_bias = 0;  // runtime_addr - unslid_addr
  // The file the module was identified from (unknown: not checked). The CFI
  // of a file others could have written is used for that file only, never
  // shared by build ID, and elf_path must open that very file.
  FileStamp file;
  // JIT code: no file (elf_path and build_id empty); its CFI is the
  // runtime's .eh_frame, read from memory.
  std::optional<JitUnwindCode> jit;
  bool operator==(const UnwindModule&) const = default;
};

// Finds the module whose executable mapping holds `runtime_addr`; nullptr when
// none does. The pointer must stay valid for the duration of one unwind.
using ModuleFinder = std::function<const UnwindModule*(uint64_t runtime_addr)>;

// Reads the process's code at `runtime_addr`: up to kEpilogueCodeBytes
// bytes (fewer where the mapping ends), empty when unreadable. The span must
// stay valid for the duration of one unwind step.
using CodeReader = std::function<std::span<const uint8_t>(uint64_t runtime_addr)>;

}  // namespace gsymprof
