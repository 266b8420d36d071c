// userspace/unwind/stack_snapshot.h - what the CFI unwinder (cfi_unwinder.h)
// needs besides the registers and stack copy (StackView, raw_sample.h): the
// modules a runtime address can lie in, and a way to find the one holding it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "userspace/base/build_id.h"
#include "userspace/process/module_identity.h"

namespace gsymprof {

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
