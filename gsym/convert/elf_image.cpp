#include "gsym/convert/elf_image.h"

#include "gsym/base/file_io.h"
#include "gsym/convert/elf_handle.h"

#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libdeflate.h>
#include <zlib.h>
#include <zstd.h>
#include <lzma.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace gsym {

namespace {

std::string libelf_error() {
  const char* msg = elf_errmsg(-1);
  return msg ? msg : "unknown libelf error";
}

Elf_Scn* find_section(Elf* elf, size_t shstrndx, std::string_view name, GElf_Shdr* shdr) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    if (!gelf_getshdr(scn, shdr)) continue;
    const char* n = elf_strptr(elf, shstrndx, shdr->sh_name);
    if (n && name == n) return scn;
  }
  return nullptr;
}

// Scans ELF notes in `data` for the first note of `owner` (NUL-terminated,
// up to `extra_nuls` more NULs of padding in its name size) and `type` whose
// descriptor is 1 to `max_bytes` bytes.
std::vector<uint8_t> note_from_notes(Elf_Data* data, std::string_view owner, size_t extra_nuls,
                                     uint32_t type, size_t max_bytes) {
  if (!data || !data->d_buf) return {};
  size_t offset = 0;
  GElf_Nhdr nhdr;
  size_t name_off = 0, desc_off = 0;
  while (offset < data->d_size) {
    size_t next = gelf_getnote(data, offset, &nhdr, &name_off, &desc_off);
    if (next == 0 || next <= offset) break;
    const char* base = static_cast<const char*>(data->d_buf);
    const bool owner_matches =
        nhdr.n_namesz > owner.size() && nhdr.n_namesz <= owner.size() + 1 + extra_nuls &&
        name_off + nhdr.n_namesz <= data->d_size &&
        std::memcmp(base + name_off, owner.data(), owner.size()) == 0 &&
        std::all_of(base + name_off + owner.size(), base + name_off + nhdr.n_namesz,
                    [](char c) { return c == 0; });
    if (nhdr.n_type == type && owner_matches && nhdr.n_descsz > 0 && nhdr.n_descsz <= max_bytes &&
        desc_off + nhdr.n_descsz <= data->d_size) {
      const uint8_t* d = reinterpret_cast<const uint8_t*>(base + desc_off);
      return std::vector<uint8_t>(d, d + nhdr.n_descsz);
    }
    offset = next;
  }
  return {};
}

std::vector<uint8_t> build_id_from_notes(Elf_Data* data) {
  return note_from_notes(data, "GNU", 0, NT_GNU_BUILD_ID, kMaxBuildIdBytes);
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

bool is_zdebug_name(const char* name) { return name && std::strncmp(name, ".zdebug", 7) == 0; }

// The decompressed size `scn` claims, read as libelf reads it before
// allocating that much: Elf*_Chdr.ch_size of a SHF_COMPRESSED section
// (gelf_getchdr reads the header, not the payload), else the "ZLIB" header's
// size when `zdebug` (libdw runs elf_compress_gnu on every .zdebug* section).
// nullopt when libelf would decompress nothing.
std::optional<uint64_t> claimed_size(Elf_Scn* scn, const GElf_Shdr& shdr, bool zdebug) {
  // libelf decompresses neither allocated sections nor these types.
  if (shdr.sh_type == SHT_NOBITS || shdr.sh_type == SHT_NULL || (shdr.sh_flags & SHF_ALLOC))
    return std::nullopt;
  if (shdr.sh_flags & SHF_COMPRESSED) {
    GElf_Chdr chdr;
    if (!gelf_getchdr(scn, &chdr)) return std::nullopt;  // elf_compress fails on it too
    return chdr.ch_size;
  }
  if (!zdebug) return std::nullopt;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf || data->d_size < 12 || std::memcmp(data->d_buf, "ZLIB", 4) != 0)
    return std::nullopt;
  const uint8_t* p = static_cast<const uint8_t*>(data->d_buf) + 4;
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size = size << 8 | p[i];
  return size;
}

std::string section_label(Elf* elf, size_t shstrndx, bool have_names, Elf_Scn* scn,
                          const GElf_Shdr& shdr) {
  const char* name = have_names ? elf_strptr(elf, shstrndx, shdr.sh_name) : nullptr;
  return name && *name ? std::string(name) : "[" + std::to_string(elf_ndxscn(scn)) + "]";
}

Status check_claim(const std::string& label, const GElf_Shdr& shdr, uint64_t claimed,
                   uint64_t file_size, const SectionSizeLimits& limits) {
  if (shdr.sh_offset > file_size || file_size - shdr.sh_offset < shdr.sh_size)
    return Error("compressed section " + label + " extends past the end of the file");
  const uint64_t bound = decompressed_bound(shdr.sh_size, limits);
  if (claimed > bound)
    return Error("compressed section " + label + " claims " + std::to_string(claimed) +
                 " bytes decompressed from " + std::to_string(shdr.sh_size) + ", over its limit of " +
                 std::to_string(bound) + " (" + std::to_string(limits.max_ratio) + "x its size, at least " +
                 std::to_string(limits.min_bound) + ")");
  return Status::success();
}

// check_section_sizes; `names_refused` tells that the section name table
// itself was refused (then no section name may be read: elf_strptr would
// decompress it). `growth` (when given) receives what decompressing every
// claim would add to the file's bytes.
Status check_sizes(Elf* elf, uint64_t file_size, const SectionSizeLimits& limits, bool* names_refused,
                   uint64_t* growth = nullptr) {
  *names_refused = false;
  if (growth) *growth = 0;
  size_t shstrndx = 0;
  bool have_names = elf_getshdrstrndx(elf, &shstrndx) == 0;
  // The name table first, by index: reading any name decompresses it.
  if (Elf_Scn* names = have_names ? elf_getscn(elf, shstrndx) : nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(names, &shdr)) {
      if (std::optional<uint64_t> claimed = claimed_size(names, shdr, false)) {
        Status s = check_claim("[" + std::to_string(shstrndx) + "] (the section name table)", shdr,
                               *claimed, file_size, limits);
        if (!s) {
          *names_refused = true;
          return s;
        }
      }
    }
  } else {
    have_names = false;
  }
  uint64_t total = 0;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    const char* name = have_names ? elf_strptr(elf, shstrndx, shdr.sh_name) : nullptr;
    std::optional<uint64_t> claimed = claimed_size(scn, shdr, is_zdebug_name(name));
    if (!claimed) continue;
    Status s = check_claim(section_label(elf, shstrndx, have_names, scn, shdr), shdr, *claimed,
                           file_size, limits);
    if (!s) return s;
    total = total > UINT64_MAX - *claimed ? UINT64_MAX : total + *claimed;
    if (growth && *claimed > shdr.sh_size) *growth += *claimed - shdr.sh_size;  // bounded by the checks
  }
  const uint64_t total_bound =
      std::min(limits.max_total, std::max(limits.min_bound, saturating_mul(limits.max_ratio, file_size)));
  if (total > total_bound)
    return Error("compressed sections claim " + std::to_string(total) +
                 " bytes decompressed in total, more than the limit of " + std::to_string(total_bound) +
                 " for a " + std::to_string(file_size) + "-byte file");
  return Status::success();
}

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

// Inflates a zlib stream of exactly `out.size()` bytes with libdeflate,
// which inflates a whole buffer 2-3 times as fast as zlib's streaming
// inflate that libelf's elf_compress uses: inflating was 40% of converting
// libc's debug file. Short or long output is an error.
Status inflate_zlib(std::span<const uint8_t> in, std::span<uint8_t> out, const std::string& what) {
  struct FreeDecompressor {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  std::unique_ptr<libdeflate_decompressor, FreeDecompressor> d(libdeflate_alloc_decompressor());
  if (!d) return Error(what + "out of memory");
  switch (libdeflate_zlib_decompress(d.get(), in.data(), in.size(), out.data(), out.size(), nullptr)) {
    case LIBDEFLATE_SUCCESS: return Status::success();
    case LIBDEFLATE_SHORT_OUTPUT: return Error(what + "zlib: fewer bytes than its header claims");
    case LIBDEFLATE_INSUFFICIENT_SPACE: return Error(what + "zlib: more bytes than its header claims");
    default: return Error(what + "zlib: invalid compressed data");
  }
}

// Puts the SHF_COMPRESSED `scn` (zlib or zstd; its claim already checked)
// in place decompressed, as elf_compress does: the data then points into a
// buffer `keep` owns, and the header loses SHF_COMPRESSED, so libdw reads
// the section as it is.
Status decompress_chdr_section(Elf* elf, Elf_Scn* scn, GElf_Shdr shdr, const GElf_Chdr& chdr,
                               const std::string& what, DecompressedSections& keep) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf) return Error(what + libelf_error());
  const size_t header = gelf_fsize(elf, ELF_T_CHDR, 1, EV_CURRENT);
  if (header == 0 || data->d_size < header) return Error(what + "truncated compression header");
  HugePageBytes buffer = allocate_huge_page_bytes(std::max<uint64_t>(chdr.ch_size, 1));
  const std::span<const uint8_t> in(static_cast<const uint8_t*>(data->d_buf) + header, data->d_size - header);
  if (chdr.ch_type == ELFCOMPRESS_ZSTD) {
    const size_t size = ZSTD_decompress(buffer.get(), chdr.ch_size, in.data(), in.size());
    if (ZSTD_isError(size)) return Error(what + "zstd: " + ZSTD_getErrorName(size));
    if (size != chdr.ch_size)
      return Error(what + "decompressed to " + std::to_string(size) + " bytes, its header claims " +
                   std::to_string(chdr.ch_size));
  } else if (Status s = inflate_zlib(in, std::span<uint8_t>(buffer.get(), chdr.ch_size), what); !s) {
    return s;
  }
  data->d_buf = buffer.get();
  data->d_size = chdr.ch_size;
  data->d_off = 0;
  data->d_type = ELF_T_BYTE;
  data->d_align = std::max<uint64_t>(chdr.ch_addralign, 1);
  shdr.sh_flags &= ~static_cast<uint64_t>(SHF_COMPRESSED);
  shdr.sh_size = chdr.ch_size;
  shdr.sh_addralign = chdr.ch_addralign;
  if (!gelf_update_shdr(scn, &shdr)) return Error(what + libelf_error());
  keep.buffers.push_back(std::move(buffer));
  return Status::success();
}

// Decompresses `scn` in place (SHF_COMPRESSED, else GNU when `gnu`) after
// checking its claim as it is now; the output must be exactly the claimed
// size.
Status decompress_section(Elf* elf, Elf_Scn* scn, const std::string& name, bool gnu, uint64_t file_size,
                          const SectionSizeLimits& limits, DecompressedSections& keep) {
  const std::string what = "cannot decompress section " + name + ": ";
  GElf_Shdr shdr;
  if (!gelf_getshdr(scn, &shdr)) return Error(what + libelf_error());
  const bool chdr = shdr.sh_flags & SHF_COMPRESSED;
  std::optional<uint64_t> claimed = claimed_size(scn, shdr, gnu);
  if (!claimed) return Error(what + "no readable compression header");
  Status s = check_claim(name, shdr, *claimed, file_size, limits);
  if (!s) return Error(what + s.error().message);
  GElf_Chdr header;
  if (chdr && gelf_getchdr(scn, &header) && (header.ch_type == ELFCOMPRESS_ZSTD || header.ch_type == ELFCOMPRESS_ZLIB))
    return decompress_chdr_section(elf, scn, shdr, header, what, keep);
  if (chdr ? elf_compress(scn, 0, 0) < 0 : elf_compress_gnu(scn, 0, 0) < 0) return Error(what + libelf_error());
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data) return Error("cannot read section " + name + ": " + libelf_error());
  // libelf checks this too; short output must never pass as the section.
  if (data->d_size != *claimed)
    return Error("section " + name + " decompressed to " + std::to_string(data->d_size) +
                 " bytes, its header claims " + std::to_string(*claimed));
  return Status::success();
}

}  // namespace

uint64_t decompressed_bound(uint64_t compressed, const SectionSizeLimits& limits) {
  return std::max(limits.min_bound, saturating_mul(limits.max_ratio, compressed));
}

Status check_section_sizes(Elf* elf, uint64_t file_size, const SectionSizeLimits& limits) {
  if (!elf || elf_kind(elf) != ELF_K_ELF) return Status::success();  // no sections to decompress
  bool names_refused = false;
  return check_sizes(elf, file_size, limits, &names_refused);
}

namespace {

// Debug sections a conversion never reads, by us or through libdw: variable
// locations, the address and name indexes, macros and .debug_frame. Set
// aside so that neither we nor dwarf_begin_elf inflate them (libc's location
// lists alone are a sixth of its compressed DWARF).
bool conversion_never_reads(std::string_view name) {
  if (name.starts_with(".zdebug_"))
    name.remove_prefix(8);
  else if (name.starts_with(".debug_"))
    name.remove_prefix(7);
  else
    return false;
  static constexpr std::string_view kUnread[] = {"loc",      "loclists",     "aranges",      "macinfo",
                                                 "macro",    "pubnames",     "pubtypes",     "gnu_pubnames",
                                                 "names",    "gnu_pubtypes", "frame"};
  return std::find(std::begin(kUnread), std::end(kUnread), name) != std::end(kUnread);
}

}  // namespace

Status prepare_debug_sections(Elf* elf, uint64_t file_size, DecompressedSections& keep,
                              const SectionSizeLimits& limits) {
  if (Status s = check_section_sizes(elf, file_size, limits); !s) return s;
  size_t shstrndx = 0;
  if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0) return Status::success();
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    const char* n = elf_strptr(elf, shstrndx, shdr.sh_name);
    const bool zdebug = is_zdebug_name(n);
    if (!zdebug && !(n && std::strncmp(n, ".debug_", 7) == 0)) continue;
    const std::string name(n);
    if (conversion_never_reads(name)) {
      // libdw skips NOBITS debug sections; the header is changed in memory only.
      shdr.sh_type = SHT_NOBITS;
      if (!gelf_update_shdr(scn, &shdr)) return Error("cannot set aside section " + name + ": " + libelf_error());
      continue;
    }
    const bool chdr = claimed_size(scn, shdr, false).has_value();
    const bool gnu = zdebug && !chdr && claimed_size(scn, shdr, true).has_value();
    if (chdr || gnu) {
      if (Status s = decompress_section(elf, scn, name, gnu, file_size, limits, keep); !s) return s;
    }
    // libdw retries elf_compress_gnu on .zdebug* sections at every
    // dwarf_begin_elf: output that looks GNU-compressed would be inflated by
    // the next one, beyond any bound here, freeing what earlier handles read.
    if (zdebug && gelf_getshdr(scn, &shdr) && claimed_size(scn, shdr, true))
      return Error("section " + name + " decompresses to compressed data again");
  }
  return Status::success();
}

struct ElfImage::Impl {
  std::string path;
  FileDescriptor fd;
  ElfHandle elf;  // reads `fd`: ended before it is closed
  size_t shstrndx = 0;
  bool little = true;
  uint64_t file_size = 0;
  SectionSizeLimits limits;
  Status sizes;  // check_section_sizes at open
  uint64_t decompression_growth = 0;  // decompression_growth()
  // .zdebug_* sections section_bytes decompressed: their contents may start
  // with "ZLIB" too, and must not be inflated twice.
  mutable std::vector<size_t> gnu_decompressed;
  bool writable_only_by_us = false;
  mutable DecompressedSections decompressed;
  // .gnu_debugdata (MiniDebugInfo), decompressed on first use.
  bool mini_tried = false;
  std::vector<uint8_t> mini_bytes;
  ElfHandle mini;  // reads mini_bytes
  std::string mini_error;
};

ElfImage::ElfImage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ElfImage::ElfImage(ElfImage&&) noexcept = default;
ElfImage& ElfImage::operator=(ElfImage&&) noexcept = default;
ElfImage::~ElfImage() = default;

Expected<ElfImage> ElfImage::open(const std::string& path, const SectionSizeLimits& limits,
                                  const std::string& known_as, bool relocatable) {
  auto impl = std::make_unique<Impl>();
  impl->path = known_as.empty() ? path : known_as;
  // Non-blocking and by descriptor: a FIFO or device at `path` is refused.
  Expected<OpenFile> file = open_regular_file_at(AT_FDCWD, path, Symlinks::Follow, "");
  if (!file) return file.error();
  const struct stat& st = file->status;
  impl->writable_only_by_us = gsym::writable_only_by_us(st);
  impl->fd = std::move(file->fd);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // Converting reads most of the file: one others could write is read whole.
  Expected<ElfHandle> elf = ElfHandle::open(impl->fd.get(), st, UntrustedRead::Whole);
  if (!elf) return elf.error();
  impl->elf = std::move(*elf);
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(impl->elf.get(), &ehdr)) return Error(ErrorCode::Malformed, "truncated or malformed ELF header");
  if (ehdr.e_ident[EI_CLASS] != ELFCLASS32 && ehdr.e_ident[EI_CLASS] != ELFCLASS64)
    return Error(ErrorCode::Unsupported, "unsupported ELF class");
  if (ehdr.e_ident[EI_DATA] != ELFDATA2LSB && ehdr.e_ident[EI_DATA] != ELFDATA2MSB)
    return Error(ErrorCode::Unsupported, "unsupported ELF byte order");
  impl->little = ehdr.e_ident[EI_DATA] == ELFDATA2LSB;
  if (ehdr.e_type == ET_REL && !relocatable)
    return Error(ErrorCode::Unsupported, "relocatable object files are not supported");
  if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN && !(relocatable && ehdr.e_type == ET_REL))
    return Error("not an executable or shared library (ELF type " + std::to_string(ehdr.e_type) +
                 ")");
  // Header tables must lie inside the file; libelf quietly reports a
  // truncated table as empty.
  const bool is64 = ehdr.e_ident[EI_CLASS] == ELFCLASS64;
  const uint64_t shentsize = is64 ? 64 : 40, phentsize = is64 ? 56 : 32;
  if (ehdr.e_shoff != 0) {
    const uint64_t count = std::max<uint64_t>(ehdr.e_shnum, 1);
    if (ehdr.e_shoff > file_size || (file_size - ehdr.e_shoff) / shentsize < count)
      return Error("truncated ELF: section headers past the end of the file");
  }
  if (ehdr.e_phoff != 0 && ehdr.e_phnum > 0) {
    if (ehdr.e_phoff > file_size || (file_size - ehdr.e_phoff) / phentsize < ehdr.e_phnum)
      return Error("truncated ELF: program headers past the end of the file");
  }
  size_t shnum = 0;
  if (elf_getshdrnum(impl->elf.get(), &shnum) != 0) return Error("malformed section headers: " + libelf_error());
  if (shnum > 0) {
    if (ehdr.e_shoff > file_size || (file_size - ehdr.e_shoff) / shentsize < shnum)
      return Error("truncated ELF: section headers past the end of the file");
    if (elf_getshdrstrndx(impl->elf.get(), &impl->shstrndx) != 0)
      return Error("malformed section name table: " + libelf_error());
  }
  size_t phnum = 0;
  if (elf_getphdrnum(impl->elf.get(), &phnum) != 0) return Error("malformed program headers: " + libelf_error());
  if (shnum == 0 && phnum == 0) return Error("ELF file has neither sections nor segments");
  // Every section with contents must lie inside the file: a truncated copy
  // otherwise yields silently missing symbols or DWARF.
  for (Elf_Scn* scn = elf_nextscn(impl->elf.get(), nullptr); scn; scn = elf_nextscn(impl->elf.get(), scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) return Error("malformed section header: " + libelf_error());
    if (shdr.sh_type == SHT_NOBITS || shdr.sh_type == SHT_NULL) continue;
    if (shdr.sh_offset > file_size || file_size - shdr.sh_offset < shdr.sh_size)
      return Error("truncated ELF: section " + std::to_string(elf_ndxscn(scn)) +
                   " extends past the end of the file");
  }
  // Before any section name is read: elf_strptr decompresses a compressed
  // name table.
  impl->file_size = file_size;
  impl->limits = limits;
  bool names_refused = false;
  impl->sizes = check_sizes(impl->elf.get(), file_size, limits, &names_refused, &impl->decompression_growth);
  if (names_refused) return impl->sizes.error();
  if (!impl->sizes) impl->decompression_growth = 0;  // nothing will be decompressed
  return ElfImage(std::move(impl));
}

const std::string& ElfImage::path() const { return impl_->path; }
bool ElfImage::writable_only_by_us() const { return impl_->writable_only_by_us; }
Elf* ElfImage::elf() const { return impl_->elf.get(); }
bool ElfImage::little_endian() const { return impl_->little; }
uint64_t ElfImage::decompression_growth() const { return impl_->decompression_growth; }

Status ElfImage::prepare_debug_sections() const {
  if (!impl_->sizes) return impl_->sizes;
  return gsym::prepare_debug_sections(impl_->elf.get(), impl_->file_size, impl_->decompressed, impl_->limits);
}

Status ElfImage::check_section_sizes() const {
  if (!impl_->sizes) return impl_->sizes;
  bool names_refused = false;
  return check_sizes(impl_->elf.get(), impl_->file_size, impl_->limits, &names_refused);
}

namespace {

// The first note found by `from_notes`: in the section named `section`
// first, then in PT_NOTE segments in program-header order.
template <typename FromNotes>
std::vector<uint8_t> read_note(Elf* elf, std::string_view section, FromNotes from_notes) {
  size_t shstrndx = 0;
  GElf_Shdr shdr;
  // Section names only from a plain name table: elf_strptr would inflate a
  // compressed one, unchecked (see check_section_sizes).
  Elf_Scn* names = elf_getshdrstrndx(elf, &shstrndx) == 0 ? elf_getscn(elf, shstrndx) : nullptr;
  if (names && gelf_getshdr(names, &shdr) && (shdr.sh_flags & SHF_COMPRESSED) == 0)
    if (Elf_Scn* scn = find_section(elf, shstrndx, section, &shdr); scn && shdr.sh_type == SHT_NOTE)
      if (std::vector<uint8_t> id = from_notes(elf_getdata(scn, nullptr)); !id.empty()) return id;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return {};
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr) || phdr.p_type != PT_NOTE) continue;
    const Elf_Type type = phdr.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
    if (std::vector<uint8_t> id = from_notes(
            elf_getdata_rawchunk(elf, static_cast<int64_t>(phdr.p_offset), phdr.p_filesz, type));
        !id.empty())
      return id;
  }
  return {};
}

}  // namespace

std::vector<uint8_t> read_gnu_build_id(Elf* elf) {
  return read_note(elf, ".note.gnu.build-id", build_id_from_notes);
}

std::vector<uint8_t> read_go_build_id(Elf* elf) {
  return read_note(elf, ".note.go.buildid", [](Elf_Data* data) {
    // The Go linker names its notes "Go\0\0" (name size 4).
    return note_from_notes(data, "Go", 1, kGoBuildIdNoteType, kMaxGoBuildIdBytes);
  });
}

std::vector<uint8_t> ElfImage::build_id() const { return read_gnu_build_id(impl_->elf.get()); }

std::optional<uint64_t> ElfImage::first_load_address() const {
  size_t phnum = 0;
  if (elf_getphdrnum(impl_->elf.get(), &phnum) != 0) return std::nullopt;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(impl_->elf.get(), static_cast<int>(i), &phdr) && phdr.p_type == PT_LOAD)
      return phdr.p_vaddr;
  }
  return std::nullopt;
}

std::optional<uint64_t> ElfImage::program_entry() const {
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(impl_->elf.get(), &ehdr) || ehdr.e_entry == 0) return std::nullopt;
  bool program = ehdr.e_type == ET_EXEC;
  size_t phnum = 0;
  if (!program && elf_getphdrnum(impl_->elf.get(), &phnum) == 0)
    for (size_t i = 0; i < phnum && !program; ++i) {
      GElf_Phdr phdr;
      program = gelf_getphdr(impl_->elf.get(), static_cast<int>(i), &phdr) && phdr.p_type == PT_INTERP;
    }
  if (!program) return std::nullopt;
  return ehdr.e_entry;
}

std::vector<uint8_t> ElfImage::code_at(uint64_t addr, size_t max) const {
  for (Elf_Scn* scn = elf_nextscn(impl_->elf.get(), nullptr); scn; scn = elf_nextscn(impl_->elf.get(), scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS) continue;
    if (addr < shdr.sh_addr || addr - shdr.sh_addr >= shdr.sh_size) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || !data->d_buf || data->d_size != shdr.sh_size) return {};
    const size_t at = static_cast<size_t>(addr - shdr.sh_addr);
    const size_t n = std::min(max, static_cast<size_t>(data->d_size) - at);
    const auto* bytes = static_cast<const uint8_t*>(data->d_buf) + at;
    return std::vector<uint8_t>(bytes, bytes + n);
  }
  return {};
}

std::vector<AddressRange> ElfImage::executable_ranges() const {
  std::vector<AddressRange> ranges;
  for (Elf_Scn* scn = elf_nextscn(impl_->elf.get(), nullptr); scn; scn = elf_nextscn(impl_->elf.get(), scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    if (!(shdr.sh_flags & SHF_EXECINSTR) || shdr.sh_size == 0) continue;
    if (shdr.sh_addr > UINT64_MAX - shdr.sh_size) continue;
    ranges.push_back({shdr.sh_addr, shdr.sh_addr + shdr.sh_size});
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<AddressRange> merged;
  for (const AddressRange& r : ranges) {
    if (!merged.empty() && r.start <= merged.back().end)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  return merged;
}

bool ElfImage::has_dwarf() const {
  GElf_Shdr shdr;
  Elf_Scn* scn = find_section(impl_->elf.get(), impl_->shstrndx, ".debug_info", &shdr);
  if (!scn) scn = find_section(impl_->elf.get(), impl_->shstrndx, ".zdebug_info", &shdr);
  return scn && shdr.sh_type != SHT_NOBITS && shdr.sh_size > 0;
}

std::optional<DebugLink> ElfImage::debug_link() const {
  GElf_Shdr shdr;
  Elf_Scn* scn = find_section(impl_->elf.get(), impl_->shstrndx, ".gnu_debuglink", &shdr);
  if (!scn || shdr.sh_type == SHT_NOBITS) return std::nullopt;
  Elf_Data* data = elf_rawdata(scn, nullptr);
  if (!data || !data->d_buf) return std::nullopt;
  const char* bytes = static_cast<const char*>(data->d_buf);
  const size_t size = data->d_size;
  const size_t name_len = strnlen(bytes, size);
  if (name_len == 0 || name_len == size) return std::nullopt;
  const size_t crc_off = (name_len + 1 + 3) & ~size_t(3);
  if (crc_off + 4 > size) return std::nullopt;
  const uint8_t* c = reinterpret_cast<const uint8_t*>(bytes + crc_off);
  DebugLink link;
  link.name.assign(bytes, name_len);
  link.crc = impl_->little ? uint32_t(c[0]) | uint32_t(c[1]) << 8 | uint32_t(c[2]) << 16 |
                                 uint32_t(c[3]) << 24
                           : uint32_t(c[3]) | uint32_t(c[2]) << 8 | uint32_t(c[1]) << 16 |
                                 uint32_t(c[0]) << 24;
  return link;
}

namespace {

// The symbol table of `elf` of `type` (SHT_SYMTAB or SHT_DYNSYM), if any.
Elf_Scn* find_symbol_table(Elf* elf, uint32_t type, GElf_Shdr* shdr) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn))
    if (gelf_getshdr(scn, shdr) && shdr->sh_type == type) return scn;
  return nullptr;
}

// Appends the defined STT_FUNC symbols of `table`. `names_checked`: the
// file's compressed sections passed check_section_sizes, else a compressed
// string table is not read (elf_strptr would inflate it, unbounded).
void append_function_symbols(Elf* elf, Elf_Scn* table, const GElf_Shdr& table_shdr, bool names_checked,
                             std::vector<ElfSymbol>& out) {
  if (!names_checked) {
    GElf_Shdr strtab;
    Elf_Scn* names = elf_getscn(elf, table_shdr.sh_link);
    if (!names || !gelf_getshdr(names, &strtab) || (strtab.sh_flags & SHF_COMPRESSED)) return;
  }
  Elf_Data* data = elf_getdata(table, nullptr);
  if (!data || table_shdr.sh_entsize == 0) return;
  const size_t count = data->d_size / gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  for (size_t i = 1; i < count; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
    // An undefined symbol's st_value may be its PLT slot; LLVM reads it as 0.
    if (sym.st_shndx == SHN_UNDEF) continue;
    const char* name = elf_strptr(elf, table_shdr.sh_link, sym.st_name);
    if (!name) continue;
    out.push_back({sym.st_value, sym.st_size, name});
  }
}

// xz data, decompressed whole, at most `limit` bytes.
Expected<std::vector<uint8_t>> xz_decompress(std::span<const uint8_t> input, uint64_t limit) {
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, uint64_t{256} << 20, 0) != LZMA_OK) return Error("xz: cannot start the decoder");
  std::vector<uint8_t> out;
  stream.next_in = input.data();
  stream.avail_in = input.size();
  lzma_ret status = LZMA_OK;
  while (status == LZMA_OK) {
    if (out.size() >= limit) {
      lzma_end(&stream);
      return Error("xz: decompresses to more than " + std::to_string(limit) + " bytes");
    }
    const size_t before = out.size();
    out.resize(std::min<uint64_t>(limit, std::max<size_t>(before * 2, 1 << 16)));
    stream.next_out = out.data() + before;
    stream.avail_out = out.size() - before;
    status = lzma_code(&stream, LZMA_FINISH);
    out.resize(out.size() - stream.avail_out);
  }
  lzma_end(&stream);
  if (status != LZMA_STREAM_END) return Error("xz: corrupt data (lzma error " + std::to_string(status) + ")");
  return out;
}

}  // namespace

std::vector<ElfSymbol> ElfImage::function_symbols(bool* used_dynsym, bool* used_minidebuginfo) const {
  GElf_Shdr shdr{};
  std::vector<ElfSymbol> out;
  if (used_minidebuginfo) *used_minidebuginfo = false;
  if (Elf_Scn* symtab = find_symbol_table(impl_->elf.get(), SHT_SYMTAB, &shdr)) {
    if (used_dynsym) *used_dynsym = false;
    append_function_symbols(impl_->elf.get(), symtab, shdr, impl_->sizes.ok(), out);
    return out;
  }
  Elf_Scn* dynsym = find_symbol_table(impl_->elf.get(), SHT_DYNSYM, &shdr);
  if (used_dynsym) *used_dynsym = dynsym != nullptr;
  if (dynsym) append_function_symbols(impl_->elf.get(), dynsym, shdr, impl_->sizes.ok(), out);
  // MiniDebugInfo: the local symbols .dynsym lacks, in an xz ELF.
  if (Elf* mini = mini_debuginfo()) {
    if (Elf_Scn* symtab = find_symbol_table(mini, SHT_SYMTAB, &shdr)) {
      const size_t before = out.size();
      append_function_symbols(mini, symtab, shdr, true, out);
      if (used_minidebuginfo) *used_minidebuginfo = out.size() > before;
    }
  }
  return out;
}

Elf* ElfImage::mini_debuginfo() const {
  Impl& impl = *impl_;
  if (impl.mini_tried) return impl.mini.get();
  impl.mini_tried = true;
  GElf_Shdr shdr;
  Elf_Scn* scn = impl.sizes.ok() ? find_section(impl.elf.get(), impl.shstrndx, ".gnu_debugdata", &shdr) : nullptr;
  if (!scn || shdr.sh_type == SHT_NOBITS || (shdr.sh_flags & SHF_COMPRESSED)) return nullptr;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf) return nullptr;
  const uint64_t limit = std::min<uint64_t>(kMaxInMemoryElf, decompressed_bound(data->d_size, impl.limits));
  Expected<std::vector<uint8_t>> bytes =
      xz_decompress(std::span(static_cast<const uint8_t*>(data->d_buf), data->d_size), limit);
  if (!bytes) {
    impl.mini_error = ".gnu_debugdata: " + bytes.error().message;
    return nullptr;
  }
  impl.mini_bytes = std::move(*bytes);
  Expected<ElfHandle> mini = ElfHandle::from_memory(impl.mini_bytes);
  if (!mini) {
    impl.mini_error = ".gnu_debugdata: " + mini.error().message;
    return nullptr;
  }
  bool names_refused = false;
  if (Status sizes = check_sizes(mini->get(), impl.mini_bytes.size(), impl.limits, &names_refused); !sizes) {
    impl.mini_error = ".gnu_debugdata: " + sizes.error().message;
    return nullptr;
  }
  impl.mini = std::move(*mini);
  return impl.mini.get();
}

std::vector<ElfSymbol> ElfImage::code_label_symbols() const {
  std::vector<ElfSymbol> out;
  GElf_Shdr table_shdr{};
  Elf_Scn* table = find_symbol_table(impl_->elf.get(), SHT_SYMTAB, &table_shdr);
  if (!table || table_shdr.sh_entsize == 0) return out;
  if (!impl_->sizes.ok()) {
    GElf_Shdr strtab;
    Elf_Scn* names = elf_getscn(impl_->elf.get(), table_shdr.sh_link);
    if (!names || !gelf_getshdr(names, &strtab) || (strtab.sh_flags & SHF_COMPRESSED)) return out;
  }
  Elf_Data* data = elf_getdata(table, nullptr);
  if (!data) return out;
  const size_t count = data->d_size / gelf_fsize(impl_->elf.get(), ELF_T_SYM, 1, EV_CURRENT);
  for (size_t i = 1; i < count; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
    if (GELF_ST_TYPE(sym.st_info) != STT_NOTYPE || GELF_ST_BIND(sym.st_info) != STB_LOCAL) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE) continue;
    GElf_Shdr section;
    Elf_Scn* scn = elf_getscn(impl_->elf.get(), sym.st_shndx);
    if (!scn || !gelf_getshdr(scn, &section) || !(section.sh_flags & SHF_EXECINSTR)) continue;
    if (sym.st_value < section.sh_addr || sym.st_value - section.sh_addr >= section.sh_size) continue;
    const char* name = elf_strptr(impl_->elf.get(), table_shdr.sh_link, sym.st_name);
    if (!name || !*name || name[0] == '.' || name[0] == '$') continue;
    out.push_back({sym.st_value, 0, name});
  }
  return out;
}

namespace {

// The relocations of one RELA section with their symbols' names.
struct RelaReader {
  Elf* elf;
  bool names_checked;

  template <typename Visit>
  void each(Elf_Scn* scn, const GElf_Shdr& shdr, Visit visit) const {
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || shdr.sh_entsize == 0) return;
    GElf_Shdr symtab_shdr;
    Elf_Scn* symtab = elf_getscn(elf, shdr.sh_link);
    Elf_Data* syms = symtab && gelf_getshdr(symtab, &symtab_shdr) ? elf_getdata(symtab, nullptr) : nullptr;
    bool names_ok = syms != nullptr;
    if (names_ok && !names_checked) {
      GElf_Shdr strtab;
      Elf_Scn* names = elf_getscn(elf, symtab_shdr.sh_link);
      names_ok = names && gelf_getshdr(names, &strtab) && !(strtab.sh_flags & SHF_COMPRESSED);
    }
    const size_t count = data->d_size / gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);
    for (size_t i = 0; i < count; ++i) {
      GElf_Rela rela;
      if (!gelf_getrela(data, static_cast<int>(i), &rela)) break;
      const char* name = nullptr;
      GElf_Sym sym;
      if (names_ok && GELF_R_SYM(rela.r_info) != 0 &&
          gelf_getsym(syms, static_cast<int>(GELF_R_SYM(rela.r_info)), &sym))
        name = elf_strptr(elf, symtab_shdr.sh_link, sym.st_name);
      visit(rela, name ? std::string_view(name) : std::string_view());
    }
  }
};

}  // namespace

std::vector<PltEntry> ElfImage::plt_entries() const {
  Elf* elf = impl_->elf.get();
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr) || ehdr.e_machine != EM_X86_64 || ehdr.e_ident[EI_CLASS] != ELFCLASS64)
    return {};
  std::vector<PltSection> sections;
  std::vector<PltRelocation> jump_slots, glob_dat;
  const RelaReader relas{elf, impl_->sizes.ok()};
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || (shdr.sh_flags & SHF_COMPRESSED)) continue;
    const char* n = elf_strptr(elf, impl_->shstrndx, shdr.sh_name);
    if (!n) continue;
    const std::string_view name(n);
    if (shdr.sh_type == SHT_PROGBITS && (shdr.sh_flags & SHF_EXECINSTR) &&
        (name == ".plt" || name == ".plt.sec" || name == ".plt.got")) {
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data || !data->d_buf) continue;
      const std::string_view stable = name == ".plt" ? ".plt" : name == ".plt.sec" ? ".plt.sec" : ".plt.got";
      // GNU ld leaves .plt.got's sh_entsize at 8 even with 16-byte IBT stubs;
      // those start with endbr64, whose stubs are 16 bytes in every layout.
      uint64_t entry = shdr.sh_entsize ? shdr.sh_entsize : 16;
      const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
      if (entry == 8 && data->d_size >= 4 && bytes[0] == 0xf3 && bytes[1] == 0x0f && bytes[2] == 0x1e &&
          bytes[3] == 0xfa)
        entry = 16;
      sections.push_back({stable, shdr.sh_addr, entry, std::span(bytes, data->d_size)});
    } else if (shdr.sh_type == SHT_RELA) {
      const bool plt_relocs = name == ".rela.plt";
      relas.each(scn, shdr, [&](const GElf_Rela& rela, std::string_view sym) {
        const uint32_t type = GELF_R_TYPE(rela.r_info);
        if (plt_relocs) {
          // Every entry keeps its index: lazy IBT stubs push it.
          jump_slots.push_back({rela.r_offset, type == R_X86_64_JUMP_SLOT ? std::string(sym) : "",
                                static_cast<uint64_t>(rela.r_addend), type == R_X86_64_IRELATIVE});
        } else if (type == R_X86_64_GLOB_DAT && !sym.empty()) {
          glob_dat.push_back({rela.r_offset, std::string(sym), 0, false});
        }
      });
    }
  }
  if (sections.empty()) return {};
  // IRELATIVE slots: a function or ifunc symbol of .dynsym at the resolver.
  std::multimap<uint64_t, std::string> resolvers;
  bool any_irelative = false;
  for (const PltRelocation& r : jump_slots) any_irelative |= r.irelative;
  GElf_Shdr dynsym_shdr;
  if (Elf_Scn* dynsym = any_irelative ? find_symbol_table(elf, SHT_DYNSYM, &dynsym_shdr) : nullptr) {
    if (Elf_Data* data = elf_getdata(dynsym, nullptr); data && dynsym_shdr.sh_entsize) {
      const size_t count = data->d_size / gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
      for (size_t i = 1; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
        const int type = GELF_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF) continue;
        if (const char* name = elf_strptr(elf, dynsym_shdr.sh_link, sym.st_name); name && *name)
          resolvers.emplace(sym.st_value, name);
      }
    }
  }
  return decode_plt(sections, jump_slots, glob_dat, [&](uint64_t addr) {
    auto [first, last] = resolvers.equal_range(addr);
    std::string best;
    for (auto it = first; it != last; ++it)
      if (best.empty() || it->second < best) best = it->second;
    return best;
  });
}

const std::string& ElfImage::mini_debuginfo_error() const { return impl_->mini_error; }

Expected<std::span<const uint8_t>> ElfImage::section_bytes(std::string_view name) const {
  GElf_Shdr shdr;
  Elf_Scn* scn = find_section(impl_->elf.get(), impl_->shstrndx, name, &shdr);
  bool gnu_compressed = false;
  if (!scn && name.starts_with(".debug_")) {
    std::string zname = ".zdebug_" + std::string(name.substr(7));
    scn = find_section(impl_->elf.get(), impl_->shstrndx, zname, &shdr);
    // Without a "ZLIB" header the section is used as it is, as libdw does.
    std::vector<size_t>& done = impl_->gnu_decompressed;
    gnu_compressed = scn && claimed_size(scn, shdr, true) &&
                     std::find(done.begin(), done.end(), elf_ndxscn(scn)) == done.end();
  }
  if (!scn || shdr.sh_type == SHT_NOBITS) return std::span<const uint8_t>();
  if ((shdr.sh_flags & SHF_COMPRESSED) || gnu_compressed) {
    const std::string n(name);
    if (!impl_->sizes) return Error("cannot decompress section " + n + ": " + impl_->sizes.error().message);
    const bool gnu = !(shdr.sh_flags & SHF_COMPRESSED);
    if (Status s = decompress_section(impl_->elf.get(), scn, n, gnu, impl_->file_size, impl_->limits, impl_->decompressed); !s)
      return s.error();
    if (gnu) impl_->gnu_decompressed.push_back(elf_ndxscn(scn));
  }
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data) return Error("cannot read section " + std::string(name) + ": " + libelf_error());
  if (!data->d_buf) return std::span<const uint8_t>();
  return std::span<const uint8_t>(static_cast<const uint8_t*>(data->d_buf), data->d_size);
}

Expected<uint32_t> file_crc32(const std::string& path) {
  Expected<OpenFile> file = open_regular_file_at(AT_FDCWD, path, Symlinks::Follow, "");
  if (!file) return file.error();
  const int fd = file->fd.release();
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buffer(1 << 16);
  for (;;) {
    ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return Error::from_errno(err, std::string("read failed: ") + std::strerror(err));
    }
    if (n == 0) break;
    crc = crc32(crc, buffer.data(), static_cast<uInt>(n));
  }
  close(fd);
  return static_cast<uint32_t>(crc);
}

}  // namespace gsym
