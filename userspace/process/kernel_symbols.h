// userspace/process/kernel_symbols.h - the running kernel's symbols and
// identity: /proc/kallsyms (function symbols of the image and its modules)
// and the GNU build ID in /sys/kernel/notes. Used at record time, so a
// capture carries the names of the kernel it was recorded on (Capture::kernel)
// and `symbolize` never reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/base/build_id.h"
#include "userspace/capture/capture.h"

namespace gsymprof {

class KernelSymbolTable {
 public:
  // Parses kallsyms text ("ADDRESS TYPE NAME [MODULE]" lines). Only function
  // symbols (types t, T, w, W) are kept, as perf does. Lines that do not
  // parse are an error naming the line: the file is the kernel's, so damage
  // means it is not kallsyms.
  static gsym::Expected<KernelSymbolTable> parse(std::string_view text);
  // Reads and parses /proc/kallsyms (or `path`).
  static gsym::Expected<KernelSymbolTable> load(const std::string& path = "/proc/kallsyms");

  // The symbol holding `address`: [start, next symbol's start), or nullopt.
  std::optional<KernelSymbol> find(uint64_t address) const;
  size_t size() const { return symbols_.size(); }
  // Every address reads 0: kernel.kptr_restrict hides them from us.
  bool addresses_hidden() const { return addresses_hidden_; }

 private:
  struct Entry {
    uint64_t address = 0;
    uint32_t name = 0, name_size = 0;      // in names_
    uint32_t module = 0, module_size = 0;  // in names_ (0 size: the image)
  };
  std::vector<Entry> symbols_;  // sorted by address
  std::string names_;
  bool addresses_hidden_ = false;
};

// The GNU build ID in the ELF notes at `notes_path` (/sys/kernel/notes: the
// running kernel's), empty when there is none.
gsym::Expected<BuildId> read_kernel_build_id(const std::string& notes_path = "/sys/kernel/notes");

// The GNU build ID among raw ELF notes (Elf64_Nhdr records, 4-byte aligned).
BuildId build_id_from_notes(std::string_view notes);

// Fills capture.kernel for its kernel frames: the symbols they fall in from
// `table` (nullptr: none could be read, `error` says why), and `build_id`.
void attach_kernel_symbols(Capture& capture, const KernelSymbolTable* table,
                           const BuildId& build_id, const std::string& error);

// The running kernel's build ID (empty: unreadable), read once per process.
const BuildId& running_kernel_build_id();

// Loads the running kernel's symbols and build ID (once per process) and attaches what the
// capture's kernel frames need (nothing when it has none); problems become
// capture.kernel.error ("kernel.kptr_restrict hides kernel addresses", ...).
void attach_running_kernel_symbols(Capture& capture);

}  // namespace gsymprof
