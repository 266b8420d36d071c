// gsym/elf_image.h - one ELF file opened with libelf: the facts the converter
// needs (type, byte order, build ID, first PT_LOAD, executable sections,
// function symbols, .gnu_debuglink) and decompressed section bytes.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/expected.h"
#include "gsym/model.h"

namespace gsym {

struct ElfSymbol {
  uint64_t value = 0;
  uint64_t size = 0;
  std::string_view name;  // points into the image's string table
};

struct DebugLink {
  std::string name;
  uint32_t crc = 0;
};

class ElfImage {
 public:
  // Opens and validates the ELF header (class, byte order, type EXEC/DYN).
  static Expected<ElfImage> open(const std::string& path);

  ElfImage(ElfImage&&) noexcept;
  ElfImage& operator=(ElfImage&&) noexcept;
  ~ElfImage();

  const std::string& path() const;
  int fd() const;
  Elf* elf() const;
  bool little_endian() const;

  // GNU build ID from the section named .note.gnu.build-id (as LLVM reads
  // it), else from PT_NOTE segments; empty when there is none.
  std::vector<uint8_t> build_id() const;
  // p_vaddr of the first PT_LOAD program header.
  std::optional<uint64_t> first_load_address() const;
  // Sections with SHF_EXECINSTR and a non-zero size (NOBITS too: debug files
  // keep the headers), sorted, overlapping and touching ranges merged.
  std::vector<AddressRange> executable_ranges() const;
  // True when .debug_info exists with contents (not NOBITS, not empty).
  bool has_dwarf() const;
  std::optional<DebugLink> debug_link() const;
  // Defined STT_FUNC symbols of .symtab, or of .dynsym when there is no .symtab
  // (`used_dynsym` tells which), in table order.
  std::vector<ElfSymbol> function_symbols(bool* used_dynsym = nullptr) const;
  // Contents of the named section, decompressed if SHF_COMPRESSED; empty span
  // when absent or NOBITS. Valid as long as this image lives.
  Expected<std::span<const uint8_t>> section_bytes(std::string_view name) const;

 private:
  struct Impl;
  explicit ElfImage(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The CRC-32 that .gnu_debuglink records (zlib's), over a whole file.
Expected<uint32_t> file_crc32(const std::string& path);

}  // namespace gsym
