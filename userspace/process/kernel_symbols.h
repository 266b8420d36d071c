// userspace/process/kernel_symbols.h - the running kernel's symbols and
// identity: /proc/kallsyms (function symbols of the image and its modules)
// and the GNU build ID in /sys/kernel/notes. Used at record time, so a
// capture carries the names of the kernel it was recorded on (Capture::kernel)
// and `symbolize` never reads them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

  // The kernel image's text alone: its function symbols from _stext to
  // _etext. Modules, BPF programs and trampolines are left out: they come
  // and go within a boot, the image's text does not. nullopt when a bound
  // is missing (or the addresses are hidden).
  std::optional<KernelSymbolTable> image_text() const;
  // Whether find(address) answers as the whole table would: always, but
  // for an image_text() table only inside [_stext, _etext).
  bool covers(uint64_t address) const;
  bool is_image_text() const { return covered_.has_value(); }

  // A binary copy for a private cache, tied to one boot (its boot_id), and
  // back. deserialize checks every offset and the order: a damaged or
  // foreign file is an error, never a wrong name.
  std::string serialize(std::string_view boot_id) const;
  static gsym::Expected<KernelSymbolTable> deserialize(std::string_view bytes, std::string_view boot_id);

 private:
  struct Entry {
    uint64_t address = 0;
    uint32_t name = 0, name_size = 0;      // in names_
    uint32_t module = 0, module_size = 0;  // in names_ (0 size: the image)
  };
  std::vector<Entry> symbols_;  // sorted by address
  std::string names_;
  bool addresses_hidden_ = false;
  std::optional<std::pair<uint64_t, uint64_t>> covered_;  // image_text(): [_stext, _etext)
};

// Where the running kernel's image text symbols are kept between runs of
// one boot (cli/kernel_symbol_cache.h: in the GSYM cache): a run whose
// kernel frames all lie in the image then does not read /proc/kallsyms,
// which the kernel formats anew for every reader (40-50 ms, a quarter of a
// short profile's fixed cost).
class KernelSymbolStore {
 public:
  virtual ~KernelSymbolStore() = default;
  // What was saved for this kernel and boot, or nullopt.
  virtual std::optional<KernelSymbolTable> load(const BuildId& kernel, std::string_view boot_id) = 0;
  virtual void save(const BuildId& kernel, std::string_view boot_id, const KernelSymbolTable& image_text) = 0;
};

// From now on attach_running_kernel_symbols looks in `store` first and
// saves there what it read (set once, at start-up; nullptr: none).
void keep_running_kernel_symbols_in(std::unique_ptr<KernelSymbolStore> store);

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

// Loads the running kernel's symbols and build ID (once per process; the
// image's text from the store when it covers every kernel frame) and
// attaches what the capture's kernel frames need (nothing when it has
// none); problems become capture.kernel.error ("kernel.kptr_restrict hides
// kernel addresses", ...).
void attach_running_kernel_symbols(Capture& capture);

}  // namespace gsymprof
