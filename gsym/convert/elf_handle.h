// gsym/convert/elf_handle.h - the one way to open an ELF file with libelf:
// libelf initialised once for the whole program, and a file that someone
// else could truncate never mapped (its mapping would fault, SIGBUS).
#pragma once

#include <libelf.h>
#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <vector>

#include "gsym/base/expected.h"

namespace gsym {

// libelf's version handshake (elf_version), done once for the program;
// false when this libelf refuses the version it was built for.
bool libelf_ready();

// How a file that someone else could have written is read (one only root or
// the effective user can write, gsym::writable_only_by_us, is mapped).
enum class UntrustedRead : uint8_t {
  OnDemand,  // libelf reads the parts asked for (ELF_C_READ): a few headers and notes
  Whole,     // into memory at open, at most kMaxInMemoryElf bytes: for readers of most of it
};

// An Elf* and what it reads from; elf_end on destruction. Move-only.
class ElfHandle {
 public:
  ElfHandle() = default;
  ElfHandle(ElfHandle&& other) noexcept;
  ElfHandle& operator=(ElfHandle&& other) noexcept;
  ElfHandle(const ElfHandle&) = delete;
  ElfHandle& operator=(const ElfHandle&) = delete;
  ~ElfHandle();

  // The ELF file open at `fd` (fstat'ed as `status`); `fd` stays the
  // caller's and must stay open while the handle lives. Errors: "cannot
  // read ELF: ..." (libelf), Malformed "not an ELF file", and Whole's read
  // errors (too large, I/O).
  static Expected<ElfHandle> open(int fd, const struct stat& status, UntrustedRead untrusted);
  // ELF bytes in memory, which must outlive the handle (libelf never writes
  // through them); the same errors.
  static Expected<ElfHandle> from_memory(std::span<const uint8_t> bytes);

  Elf* get() const { return elf_; }
  explicit operator bool() const { return elf_ != nullptr; }

 private:
  static Expected<ElfHandle> checked(ElfHandle handle);

  Elf* elf_ = nullptr;
  std::vector<uint8_t> bytes_;  // the file, when read whole instead of mapped
};

}  // namespace gsym
