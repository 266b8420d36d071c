// gsym/convert/elf_image.h - one ELF file opened with libelf: the facts the converter
// needs (type, byte order, build ID, first PT_LOAD, executable sections,
// function symbols, .gnu_debuglink) and decompressed section bytes, with the
// sizes compressed sections claim bounded before anything is decompressed.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/huge_pages.h"
#include "gsym/format/model.h"
#include "gsym/convert/plt_table.h"

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

// Bounds on what decompressing a file's sections may allocate: root reads
// ELF files any user controls, and a compressed section's header states the
// size libelf allocates and fills (SHF_COMPRESSED: Elf*_Chdr.ch_size;
// .zdebug_*: "ZLIB" + 8-byte big-endian size).
//
// Per section: 256 x its compressed size, but at least 16 MiB. zlib cannot
// exceed ~1032:1 (and libelf refuses more), so only ratios between 256:1 and
// 1032:1 are refused, and those are runs of one byte, not debug info: real
// sections compress 3-10:1, the highest of 2160 compressed sections in a
// Debian 12 /usr/lib/debug (libc6-dbg and others) is 83:1 (a .debug_abbrev),
// so 256 leaves 3x headroom. The 16 MiB floor keeps small, well-compressed sections free of
// any ratio argument and costs little.
// Whole file: 256 x the file size (every section's allowance together, less
// the floors of many tiny sections), at least 16 MiB, never more than 4 GiB
// (the largest debug files of big C++ programs stay below it).
inline constexpr uint64_t kMaxCompressionRatio = 256;
inline constexpr uint64_t kMinDecompressedBound = uint64_t(16) << 20;
inline constexpr uint64_t kMaxDecompressedTotal = uint64_t(4) << 30;
// Largest ELF file read into memory when it cannot safely be mapped.
inline constexpr uint64_t kMaxInMemoryElf = uint64_t(2) << 30;

struct SectionSizeLimits {
  uint64_t max_ratio = kMaxCompressionRatio;
  uint64_t min_bound = kMinDecompressedBound;
  uint64_t max_total = kMaxDecompressedTotal;
};

// The most `compressed` bytes may decompress to: max_ratio times them, at
// least min_bound. Every bounded decompression here uses it (ELF sections,
// MiniDebugInfo, perf.data's compressed records).
uint64_t decompressed_bound(uint64_t compressed, const SectionSizeLimits& limits = {});

// Reads the decompressed size every compressed section claims, decompressing
// nothing, and fails (one line naming the section and the sizes) when one
// exceeds its bound, when they exceed the file's together, or when a
// compressed section extends past `file_size`. Run it on an Elf before
// anything may decompress its sections: elf_compress / elf_compress_gnu,
// libdw (dwarf_begin_elf decompresses every .debug_* section), elf_strptr on
// a compressed string table. Sections libelf cannot decompress (no readable
// header) claim nothing.
Status check_section_sizes(Elf* elf, uint64_t file_size, const SectionSizeLimits& limits = {});

// Decompressed section contents that libelf did not allocate itself (zstd:
// libelf 0.188 inflates only zlib): they must live as long as the Elf.
struct DecompressedSections {
  std::vector<HugePageBytes> buffers;  // written once, by the decompressor
};

// Readies an ELF's DWARF for a conversion: check_section_sizes, then
// decompresses in place every .debug_* / .zdebug* section that libdw's
// dwarf_begin_elf would decompress itself, each claim checked again and each
// output required to be exactly the claimed size, so libdw finds nothing
// left to inflate. zlib (SHF_COMPRESSED or .zdebug) by libdeflate, zstd
// (ELFCOMPRESS_ZSTD, -gz=zstd) by libzstd, into `keep`. The debug sections
// a conversion never reads (location lists, .debug_aranges, macros, name
// indexes, .debug_frame) are set aside instead: NOBITS in memory, so neither
// we nor libdw inflate them, and section_bytes gives them empty. Needed
// where several Dwarf handles share one Elf: every dwarf_begin_elf retries
// elf_compress_gnu on .zdebug* sections, and one whose output starts with
// "ZLIB" again (refused here) would be inflated again, freeing what the
// earlier handles read.
Status prepare_debug_sections(Elf* elf, uint64_t file_size, DecompressedSections& keep,
                              const SectionSizeLimits& limits = {});

// Longest GNU build ID accepted: ld writes 20 bytes (sha1), other tools 8, 16
// or 32; a longer note is not a build ID anyone computed.
inline constexpr size_t kMaxBuildIdBytes = 64;

// The GNU build ID of an ELF file (NT_GNU_BUILD_ID, owner "GNU", 1 to
// kMaxBuildIdBytes bytes); empty when it has none. The one reader for every
// caller (converter, module identity, CFI unwinder), so they never disagree
// on a file whose notes disagree. Precedence: the section named
// .note.gnu.build-id first (where LLVM's GSYM converter reads it, so our
// headers match its files; names are read only from an uncompressed name
// table), then PT_NOTE segments in program-header order (files without
// section headers). Nothing is decompressed.
std::vector<uint8_t> read_gnu_build_id(Elf* elf);

// The Go build ID of an ELF file written by the Go linker: the descriptor
// of the note owned by "Go" of type 4 (an ASCII string such as
// "actionID/contentID", 1 to kMaxGoBuildIdBytes bytes), from the section
// .note.go.buildid first, then PT_NOTE segments, as read_gnu_build_id; empty
// when it has none.
inline constexpr uint32_t kGoBuildIdNoteType = 4;
// Go writes 83 bytes; the bound keeps a file name of its hex (a GSYM cache
// entry) under NAME_MAX.
inline constexpr size_t kMaxGoBuildIdBytes = 112;
std::vector<uint8_t> read_go_build_id(Elf* elf);

class ElfImage {
 public:
  // Opens and validates the ELF header (class, byte order, type EXEC/DYN) and
  // runs check_section_sizes. A file it refuses still opens (its symbol
  // tables stay usable) unless the section name table itself is refused;
  // check_section_sizes() then holds the error and nothing of the file is
  // decompressed.
  // The file is opened by descriptor, never blocking, regular files only; a
  // file that others could truncate is read into memory (at most
  // kMaxInMemoryElf bytes) instead of mapped.
  // `known_as` ("" = `path`) is what path() returns: the name for messages
  // and for finding files beside it when `path` is /proc/self/fd/N.
  // `relocatable` also accepts ET_REL: split DWARF's .dwo and .dwp files,
  // read for their debug sections only.
  static Expected<ElfImage> open(const std::string& path, const SectionSizeLimits& limits = {},
                                 const std::string& known_as = "", bool relocatable = false);

  ElfImage(ElfImage&&) noexcept;
  ElfImage& operator=(ElfImage&&) noexcept;
  ~ElfImage();

  const std::string& path() const;
  // gsym::writable_only_by_us() of the opened file: only root or we could
  // have written it (so what is derived from it may be shared).
  bool writable_only_by_us() const;
  Elf* elf() const;
  bool little_endian() const;
  // check_section_sizes on the file as it is now; once refused (at open),
  // always that error. Run it before every dwarf_begin_elf on elf(): libdw
  // runs elf_compress_gnu on every .zdebug_* section at each dwarf_begin_elf,
  // so one already decompressed whose contents start with "ZLIB" claims anew.
  // While it fails, section_bytes fails for compressed sections and
  // compressed string tables read as absent.
  Status check_section_sizes() const;
  // The bytes decompressing its compressed sections would add to the
  // file's size (their claims, checked at open, less their compressed
  // sizes); 0 when none, or when check_section_sizes refused them.
  uint64_t decompression_growth() const;

  // read_gnu_build_id of this file.
  std::vector<uint8_t> build_id() const;
  // p_vaddr of the first PT_LOAD program header.
  std::optional<uint64_t> first_load_address() const;
  // A program's entry point (e_entry) when the file is a program: ET_EXEC,
  // or ET_DYN with a PT_INTERP (a PIE; a shared library has none). nullopt
  // for libraries and an entry of 0.
  std::optional<uint64_t> program_entry() const;
  // Up to `max` bytes of the section contents at virtual address `addr`
  // (empty when no section with contents holds it).
  std::vector<uint8_t> code_at(uint64_t addr, size_t max) const;
  // Sections with SHF_EXECINSTR and a non-zero size (NOBITS too: debug files
  // keep the headers), sorted, overlapping and touching ranges merged.
  std::vector<AddressRange> executable_ranges() const;
  // True when .debug_info exists with contents (not NOBITS, not empty).
  bool has_dwarf() const;
  std::optional<DebugLink> debug_link() const;
  // Defined STT_FUNC symbols of .symtab, or of .dynsym when there is no
  // .symtab (`used_dynsym` tells which) followed by those of the .symtab in
  // .gnu_debugdata (MiniDebugInfo, as Fedora ships: an xz-compressed ELF
  // with the local function symbols; `used_minidebuginfo`), in table order.
  std::vector<ElfSymbol> function_symbols(bool* used_dynsym = nullptr,
                                          bool* used_minidebuginfo = nullptr) const;
  // Local STT_NOTYPE symbols of .symtab (none read from .dynsym, which holds
  // no locals) strictly inside an SHF_EXECINSTR section, with a name not
  // starting with '.' or '$': labels hand-written assembly puts on code
  // without a .type, such as ld.so's `_start` and `_dl_start_user`. Table
  // order; `_etext`-style end markers (at a section's end) are left out.
  std::vector<ElfSymbol> code_label_symbols() const;
  // The PLT stubs of an x86-64 file (other machines: none), named from its
  // relocations (plt_table.h): .plt, .plt.sec and .plt.got with contents
  // (a debug file's NOBITS copies give nothing), .rela.plt (JUMP_SLOT,
  // IRELATIVE) and the GLOB_DAT relocations of the other RELA sections,
  // symbol names from the tables they link. IRELATIVE slots are named by
  // the smallest name among .dynsym's function and ifunc symbols at the
  // resolver address.
  std::vector<PltEntry> plt_entries() const;
  // Why .gnu_debugdata could not be used ("" = absent or fine), after
  // function_symbols looked at it.
  const std::string& mini_debuginfo_error() const;
  // gsym::prepare_debug_sections on this file (fails once refused at
  // open): run before giving elf() to libdw.
  Status prepare_debug_sections() const;
  // Contents of the named section, decompressed if SHF_COMPRESSED (or
  // .zdebug_* for a .debug_* name); empty span when absent or NOBITS. Output
  // shorter or longer than the header claimed is an error. Valid as long as
  // this image lives.
  Expected<std::span<const uint8_t>> section_bytes(std::string_view name) const;

 private:
  struct Impl;
  explicit ElfImage(std::unique_ptr<Impl> impl);
  Elf* mini_debuginfo() const;  // the decompressed .gnu_debugdata ELF, or nullptr
  std::unique_ptr<Impl> impl_;
};

// The CRC-32 that .gnu_debuglink records (zlib's), over a whole file.
Expected<uint32_t> file_crc32(const std::string& path);

}  // namespace gsym
