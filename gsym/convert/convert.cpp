// ELF/DWARF -> GSYM: picks the DWARF source (the ELF or its debug file),
// converts compile units in parallel (one libdw handle per thread), replays
// their results into the Builder in unit order, then adds symbol-table
// functions, as llvm-gsymutil --convert does.
#include "gsym/convert/convert.h"
#include "gsym/convert/signal_frames.h"

#include "gsym/base/file_io.h"
#include "gsym/base/hex.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "gsym/builder/builder.h"
#include "gsym/convert/debug_file_locator.h"
#include "gsym/convert/dwarf_unit_converter.h"
#include "gsym/convert/elf_handle.h"
#include "gsym/convert/elf_image.h"
#include "gsym/convert/split_dwarf.h"

namespace gsym {

namespace {

std::string dwarf_error() {
  const char* msg = dwarf_errmsg(-1);
  return msg ? msg : "unknown libdw error";
}

struct DwarfHandle {
  Dwarf* dwarf = nullptr;
  DwarfHandle() = default;
  DwarfHandle(const DwarfHandle&) = delete;
  DwarfHandle& operator=(const DwarfHandle&) = delete;
  ~DwarfHandle() {
    if (dwarf) dwarf_end(dwarf);
  }
};

// The compile units in .debug_info, in section order: unit DIE offsets from
// libdw's unit list (which tells type units apart), unit ends from the unit
// headers.
Expected<std::vector<UnitLocation>> list_units(Dwarf* dwarf, uint64_t* bad_units) {
  struct Extent {
    Dwarf_Off die_offset, header_offset, end_offset;
  };
  std::vector<Extent> extents;
  for (Dwarf_Off off = 0, next = 0;; off = next) {
    size_t header_size = 0;
    if (dwarf_next_unit(dwarf, off, &next, &header_size, nullptr, nullptr, nullptr, nullptr, nullptr,
                        nullptr) != 0)
      break;
    extents.push_back({off + header_size, off, next});
  }
  std::vector<UnitLocation> units;
  Dwarf_CU* cu = nullptr;
  Dwarf_CU* next = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cudie;
  for (;;) {
    // No subdie: for a skeleton unit libdw would open its .dwo file (a path
    // the input names) with dwarf_begin, decompressing it unchecked.
    int rc = dwarf_get_units(dwarf, cu, &next, &version, &unit_type, &cudie, nullptr);
    if (rc == 1) break;
    if (rc < 0) {
      // A unit header we cannot read ends the list: later units cannot be
      // located without it.
      ++*bad_units;
      break;
    }
    cu = next;
    if (unit_type == DW_UT_type || unit_type == DW_UT_split_type) continue;
    const Dwarf_Off die_offset = dwarf_dieoffset(&cudie);
    auto it = std::partition_point(extents.begin(), extents.end(),
                                   [&](const Extent& e) { return e.die_offset < die_offset; });
    if (it == extents.end() || it->die_offset != die_offset) {
      ++*bad_units;
      break;
    }
    UnitLocation unit;
    unit.header_offset = it->header_offset;
    unit.die_offset = die_offset;
    unit.end_offset = it->end_offset;
    unit.skeleton = unit_type == DW_UT_skeleton;
    units.push_back(unit);
  }
  return units;
}

// The dwz alt file (.gnu_debugaltlink) that libdw would otherwise open by
// itself, with dwarf_begin, on the first DW_FORM_GNU_*_alt it reads,
// decompressing that file's sections unchecked. It is found here (see
// candidates()), checked (a regular file, the build ID the link names,
// section sizes), and installed in every handle with dwarf_setalt; when none
// is found (or it is no DWARF), an empty stand-in is installed instead, so
// libdw never looks (nor races a file appearing later) and alt references
// stay unresolved: their DIEs give no names, and a warning names the file.
// The bytes of an uncompressed section (empty when absent or compressed:
// .debug_sup is a few bytes nobody compresses).
std::span<const uint8_t> section_contents(Elf* elf, const char* wanted) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return {};
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS || (shdr.sh_flags & SHF_COMPRESSED)) continue;
    const char* name = elf_strptr(elf, names, shdr.sh_name);
    if (!name || std::strcmp(name, wanted) != 0) continue;
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (!data || !data->d_buf) return {};
    return {static_cast<const uint8_t*>(data->d_buf), data->d_size};
  }
  return {};
}

bool little_endian(Elf* elf) {
  const char* ident = elf_getident(elf, nullptr);
  return ident && ident[EI_DATA] == ELFDATA2LSB;
}

class AltFile {
 public:
  // `debug_sup`: the DWARF file's .debug_sup, the link of dwz -5's
  // DW_FORM_ref_sup*/strp_sup, used when there is no .gnu_debugaltlink.
  AltFile(const ConvertOptions& options, std::optional<SupplementaryLink> debug_sup)
      : options_(options), debug_sup_(std::move(debug_sup)) {}
  AltFile(const AltFile&) = delete;
  AltFile& operator=(const AltFile&) = delete;
  ~AltFile() {
    for (Dwarf* d : handles_) dwarf_end(d);
  }

  // Installs the alt file of `dwarf` (read from `dwarf_path`), opening it on
  // the first call. Errors: the alt file is refused by check_section_sizes.
  Status install(Dwarf* dwarf, const std::string& dwarf_path) {
    if (!opened_) {
      opened_ = true;
      const char* name = nullptr;
      const void* id = nullptr;
      ssize_t id_len = dwelf_dwarf_gnu_debugaltlink(dwarf, &name, &id);
      if (id_len <= 0 && debug_sup_ && !debug_sup_->is_supplementary) {
        name = debug_sup_->name.c_str();
        id = debug_sup_->checksum.data();
        id_len = static_cast<ssize_t>(debug_sup_->checksum.size());
        linked_ = true;
      }
      if (id_len <= 0 && !linked_) return Status::success();  // no link: libdw looks for nothing
      linked_ = true;
      const std::span<const uint8_t> want(static_cast<const uint8_t*>(id), static_cast<size_t>(std::max<ssize_t>(id_len, 0)));
      std::vector<std::string> rejected;
      for (const std::string& candidate : candidates(name ? name : "", want, dwarf_path)) {
        Status s = open_candidate(candidate, want, rejected);
        if (!s) return s;
        if (elf_) break;
      }
      if (!elf_ && options_.warning) {
        std::string message = dwarf_path + ": dwz alt file " + (name && *name ? std::string(name) : "(no name)") +
                               " (build ID " + to_hex(want) + ") not found";
        for (const std::string& r : rejected) message += "; " + r;
        options_.warning(message + "; names and qualifiers of DIEs in it are missing");
      }
    }
    if (!linked_) return Status::success();
    Dwarf* alt = nullptr;
    if (elf_) {
      // Again before each handle: dwarf_begin_elf reruns elf_compress_gnu.
      Status s = check_section_sizes(elf_.get(), file_size_);
      if (!s) return Error("alt file " + path_ + ": " + s.error().message);
      alt = dwarf_begin_elf(elf_.get(), DWARF_C_READ, nullptr);
    }
    if (!alt) alt = stand_in();
    if (!alt) return Error("cannot set up the alt file: " + std::string(dwarf_errmsg(-1)));
    handles_.push_back(alt);
    dwarf_setalt(dwarf, alt);
    return Status::success();
  }

  // False when the alt file used could have been written by someone else.
  bool writable_only_by_us() const { return !elf_ || writable_only_by_us_; }
  const std::string& path() const { return path_; }

 private:
  // Where the alt file may be, in order (the first with the linked build ID
  // wins): the link's path (absolute, or relative to the debug file's
  // directory, as gdb and libdw read it); DIR/.build-id/xx/rest.debug and
  // DIR/.dwz/<the link's last components> under each debug directory (a
  // Debian -dbgsym package's /usr/lib/debug/.dwz/<triplet>/<pkg>.debug with
  // another root); the link's file name beside the debug file.
  std::vector<std::string> candidates(const std::string& name, std::span<const uint8_t> id,
                                      const std::string& dwarf_path) const {
    std::vector<std::string> out;
    auto add = [&](std::string p) {
      if (!p.empty() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(std::move(p));
    };
    std::string dir;
    if (char* real = realpath(dwarf_path.c_str(), nullptr)) {
      dir = real;
      std::free(real);
      dir.resize(dir.rfind('/') + 1);
    }
    if (!name.empty()) add(name[0] == '/' ? name : dir.empty() ? "" : dir + name);
    const std::string base = name.substr(name.rfind('/') + 1);
    const size_t dwz = name.find("/.dwz/");
    for (const std::string& root : options_.debug_directories) {
      if (root.empty()) continue;
      if (id.size() >= 2 && id.size() <= kMaxBuildIdBytes) add(build_id_debug_path(root, id));
      if (dwz != std::string::npos) add(root + name.substr(dwz));
      else if (!base.empty()) add(root + "/.dwz/" + base);
    }
    if (!dir.empty() && !base.empty()) add(dir + base);
    return out;
  }

  void close_candidate() {
    elf_ = ElfHandle();
    fd_ = FileDescriptor();
    path_.clear();
    decompressed_ = DecompressedSections{};
  }

  // Opens `path` as the alt file if it is a regular ELF file with build ID
  // `want`; else leaves elf_ null (a line in `rejected` when it exists).
  Status open_candidate(const std::string& path, std::span<const uint8_t> want, std::vector<std::string>& rejected) {
    // Never blocking, regular files only: a FIFO in its place is no alt file.
    Expected<OpenFile> file = open_regular_file(path);
    if (!file) {
      if (access(path.c_str(), F_OK) == 0) rejected.push_back(path + ": " + file.error().message);
      return Status::success();
    }
    const struct stat& st = file->status;
    Expected<ElfHandle> elf = ElfHandle::open(file->fd.get(), st, UntrustedRead::Whole);
    if (!elf) {
      rejected.push_back(path + ": " + elf.error().message);
      return Status::success();
    }
    fd_ = std::move(file->fd);
    elf_ = std::move(*elf);
    path_ = path;
    file_size_ = static_cast<uint64_t>(st.st_size);
    writable_only_by_us_ = gsym::writable_only_by_us(st);
    // The linked build ID, or for dwz -5 the checksum in the supplementary
    // file's own .debug_sup (it has no build ID note); a link without a
    // checksum names the file only.
    std::vector<uint8_t> have = read_gnu_build_id(elf_.get());
    if (debug_sup_ && !debug_sup_->is_supplementary && !std::equal(have.begin(), have.end(), want.begin(), want.end())) {
      if (Status s = check_section_sizes(elf_.get(), file_size_); !s) return Error("alt file " + path + ": " + s.error().message);
      if (std::optional<SupplementaryLink> own = parse_debug_sup(section_contents(elf_.get(), ".debug_sup"),
                                                                 elf_kind(elf_.get()) == ELF_K_ELF && little_endian(elf_.get()));
          own && own->is_supplementary)
        have = own->checksum;
    }
    if (!want.empty() && !std::equal(have.begin(), have.end(), want.begin(), want.end())) {
      rejected.push_back(path + ": build ID " + (have.empty() ? std::string("none") : to_hex(have)) +
                         " is not the linked one");
      close_candidate();
      return Status::success();
    }
    // Several handles share this Elf, as they share the input's.
    Status s = prepare_debug_sections(elf_.get(), file_size_, decompressed_);
    if (!s) return Error("alt file " + path_ + ": " + s.error().message);
    return Status::success();
  }

  // An ELF with one 1-byte .debug_line: the least libdw accepts as DWARF.
  Dwarf* stand_in() {
    if (memory_.empty()) {
      memory_.assign(0x140, 0);
      auto put = [&](size_t off, uint64_t v, int n) {
        for (int i = 0; i < n; ++i) memory_[off + i] = static_cast<uint8_t>(v >> (8 * i));
      };
      const char ident[] = {0x7f, 'E', 'L', 'F', ELFCLASS64, ELFDATA2LSB, EV_CURRENT};
      std::memcpy(memory_.data(), ident, sizeof ident);
      put(16, ET_REL, 2);
      put(20, EV_CURRENT, 4);
      put(40, 0x80, 8);  // e_shoff
      put(52, 64, 2);    // e_ehsize
      put(58, 64, 2);    // e_shentsize
      put(60, 3, 2);     // e_shnum
      put(62, 2, 2);     // e_shstrndx
      const char names[] = "\0.debug_line\0.shstrtab";
      std::memcpy(memory_.data() + 0x48, names, sizeof names);
      auto section = [&](int index, uint32_t name, uint32_t type, uint64_t offset, uint64_t size) {
        const size_t h = 0x80 + 64 * static_cast<size_t>(index);
        put(h, name, 4);
        put(h + 4, type, 4);
        put(h + 24, offset, 8);
        put(h + 32, size, 8);
        put(h + 48, 1, 8);  // sh_addralign
      };
      section(1, 1, SHT_PROGBITS, 0x40, 1);
      section(2, 13, SHT_STRTAB, 0x48, sizeof names);
      Expected<ElfHandle> elf = ElfHandle::from_memory(memory_);
      if (!elf) return nullptr;
      stand_in_elf_ = std::move(*elf);
    }
    return stand_in_elf_ ? dwarf_begin_elf(stand_in_elf_.get(), DWARF_C_READ, nullptr) : nullptr;
  }

  const ConvertOptions& options_;
  std::optional<SupplementaryLink> debug_sup_;
  bool opened_ = false, linked_ = false;
  std::string path_;
  FileDescriptor fd_;
  uint64_t file_size_ = 0;
  bool writable_only_by_us_ = true;
  ElfHandle elf_;  // reads fd_: ended before it is closed
  DecompressedSections decompressed_;  // zstd sections of elf_, as long as it lives
  std::vector<uint8_t> memory_;  // the stand-in's bytes (elf_memory keeps them)
  ElfHandle stand_in_elf_;
  std::vector<Dwarf*> handles_;  // ended (in the destructor) before the Elf handles they read
};

// What a skeleton unit's DIE says of its split unit.
SkeletonUnit read_skeleton(Dwarf* dwarf, const UnitLocation& unit) {
  SkeletonUnit skeleton;
  Dwarf_Die die;
  if (!dwarf_offdie(dwarf, unit.die_offset, &die)) return skeleton;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  uint64_t id = 0;
  // No subdie: asking for it makes libdw open the .dwo itself.
  if (dwarf_cu_info(die.cu, &version, &unit_type, nullptr, nullptr, &id, nullptr, nullptr) == 0) {
    skeleton.version = version;
    skeleton.dwo_id = id;
  }
  auto string_of = [&](unsigned name) -> std::string {
    Dwarf_Attribute mem;
    Dwarf_Attribute* a = dwarf_attr(&die, name, &mem);
    const char* s = a ? dwarf_formstring(a) : nullptr;
    return s ? s : "";
  };
  auto unsigned_of = [&](unsigned name) -> std::optional<uint64_t> {
    Dwarf_Attribute mem;
    Dwarf_Word v;
    Dwarf_Attribute* a = dwarf_attr(&die, name, &mem);
    if (!a || dwarf_formudata(a, &v) != 0) return std::nullopt;
    return v;
  };
  skeleton.dwo_name = string_of(DW_AT_dwo_name);
  if (skeleton.dwo_name.empty()) skeleton.dwo_name = string_of(DW_AT_GNU_dwo_name);
  skeleton.comp_dir = string_of(DW_AT_comp_dir);
  skeleton.addr_base = unsigned_of(DW_AT_addr_base);
  if (!skeleton.addr_base) skeleton.addr_base = unsigned_of(DW_AT_GNU_addr_base);
  skeleton.ranges_base = unsigned_of(DW_AT_GNU_ranges_base);
  Dwarf_Addr low_pc = 0;
  if (dwarf_lowpc(&die, &low_pc) == 0) skeleton.low_pc = low_pc;
  return skeleton;
}

class Replayer {
 public:
  // `sized` (may be null) collects the range of every function added.
  Replayer(Builder& builder, const ConvertOptions& options, ConvertStats& stats,
           std::vector<AddressRange>* sized)
      : builder_(builder), options_(options), stats_(stats), sized_(sized) {}

  void replay(UnitOutput& unit) {
    for (const std::string& w : unit.warnings)
      if (options_.warning) options_.warning(w);
    if (unit.skipped) {
      ++stats_.skipped_units;
      return;
    }
    // A large unit's rows are handed to the builder, which references each
    // function's instead of copying them (file indexes are remapped in
    // place first): copying them faulted in as many pages again. A small
    // unit's are copied, so the converter's one recycled buffer serves
    // every such unit instead of a heap block each.
    constexpr size_t kAdoptedRowsMin = 64 * 1024 / sizeof(LineEntry);
    if (unit.lines.size() >= kAdoptedRowsMin)
      lines_ = builder_.adopt_line_rows(std::move(unit.lines));
    else
      lines_ = unit.lines;
    file_remap_.assign(unit.files.size() + 1, UINT32_MAX);
    file_remap_[0] = 0;
    string_offsets_.assign(unit.strings.size(), UINT32_MAX);
    for (const UnitOp& op : unit.ops) {
      switch (op.kind) {
        case UnitOp::String:
          string_offsets_[op.index] = builder_.add_string(unit.strings[op.index]);
          break;
        case UnitOp::File:
          file_remap_[op.index] = builder_.add_file(unit.files[op.index - 1]);
          break;
        case UnitOp::Function:
          add(unit, unit.functions[op.index]);
          break;
      }
    }
    stats_.line_rows += unit.line_rows;
    stats_.inline_nodes += unit.inline_nodes_total;
  }

 private:
  uint32_t global_file(const UnitOutput& unit, uint32_t local) {
    if (local >= file_remap_.size()) return 0;
    if (file_remap_[local] == UINT32_MAX) file_remap_[local] = builder_.add_file(unit.files[local - 1]);
    return file_remap_[local];
  }

  uint32_t string_offset(const UnitOutput& unit, uint32_t local) {
    if (local >= string_offsets_.size()) return 0;
    if (string_offsets_[local] == UINT32_MAX) string_offsets_[local] = builder_.add_string(unit.strings[local]);
    return string_offsets_[local];
  }

  // Local string and file indexes -> the builder's, in place (each unit
  // function is replayed once).
  void add(UnitOutput& unit, const UnitOutput::Function& f) {
    std::span<LineEntry> lines = lines_.subspan(f.lines_begin, f.lines_count);
    for (LineEntry& row : lines) row.file = global_file(unit, row.file);
    std::span<FlatInlineNode> nodes(unit.inline_nodes.data() + f.nodes_begin, f.nodes_count);
    for (FlatInlineNode& node : nodes) {
      node.name = node.name ? string_offset(unit, node.name - 1) : 0;
      node.call_file = global_file(unit, node.call_file);
    }
    FlatFunction flat;
    flat.range = f.range;
    flat.name = string_offset(unit, f.name);
    flat.lines = lines;
    flat.inline_nodes = nodes;
    flat.inline_ranges = unit.inline_ranges;
    Status s = builder_.add_flat_function(flat);
    if (!s) {
      if (options_.warning)
        options_.warning("function " + std::string(unit.strings[f.name]) + " dropped: " + s.error().message);
      return;
    }
    ++stats_.dwarf_functions;
    if (sized_ && f.range.size()) sized_->push_back(f.range);
  }

  Builder& builder_;
  const ConvertOptions& options_;
  ConvertStats& stats_;
  std::vector<AddressRange>* sized_;
  std::vector<uint32_t> file_remap_;
  std::vector<uint32_t> string_offsets_;
  std::span<LineEntry> lines_;  // the unit's rows, now the builder's
};

// The sections our own readers take (line tables, the DIE tree walk),
// decompressed first: dwarf_begin_elf would decompress every debug section
// itself, unchecked; done here with the size checks, libdw finds nothing to
// inflate.
Status read_own_sections(const ElfImage& dwarf_image, DwarfLineSections& sections,
                         UnitConverterOptions& tree_options) {
  const std::string& path = dwarf_image.path();
  if (Status s = dwarf_image.prepare_debug_sections(); !s) return Error(path + ": " + s.error().message);
  sections.little_endian = dwarf_image.little_endian();
  for (auto [name, target] : {std::pair{".debug_line", &sections.debug_line},
                              std::pair{".debug_line_str", &sections.debug_line_str},
                              std::pair{".debug_str", &sections.debug_str},
                              std::pair{".debug_info", &tree_options.debug_info},
                              std::pair{".debug_abbrev", &tree_options.debug_abbrev},
                              std::pair{".debug_ranges", &tree_options.debug_ranges},
                              std::pair{".debug_rnglists", &tree_options.debug_rnglists},
                              std::pair{".debug_str_offsets", &tree_options.debug_str_offsets},
                              std::pair{".debug_addr", &tree_options.debug_addr}}) {
    Expected<std::span<const uint8_t>> bytes = dwarf_image.section_bytes(name);
    if (!bytes) return Error(path + ": " + bytes.error().message);
    *target = *bytes;
  }
  return Status::success();
}

// The split DWARF files of a binary with skeleton units, opened: the .dwp
// (asked for, or found beside the binary) and the .dwo files' search.
// `fatal`: a .dwp asked for that cannot be read.
Expected<std::unique_ptr<SplitDwarfFiles>> open_split_files(const ElfImage& dwarf_image, const std::string& binary_path,
                                                            const ConvertOptions& options, bool& fatal) {
  const std::string& path = dwarf_image.path();
  SplitDwarfFiles::Options split_options;
  split_options.binary_path = binary_path;
  split_options.dwp_path = options.dwp_file;
  split_options.little_endian = dwarf_image.little_endian();
  Expected<std::span<const uint8_t>> addr = dwarf_image.section_bytes(".debug_addr");
  Expected<std::span<const uint8_t>> ranges = dwarf_image.section_bytes(".debug_ranges");
  if (!addr) return Error(path + ": " + addr.error().message);
  if (!ranges) return Error(path + ": " + ranges.error().message);
  split_options.debug_addr = *addr;
  split_options.debug_ranges = *ranges;
  auto split_files = std::make_unique<SplitDwarfFiles>(split_options);
  if (Status s = split_files->open_package(); !s) {
    // Asked for: an error. Found beside the binary: the .dwo files may
    // still be there.
    if (!options.dwp_file.empty()) {
      fatal = true;
      return s.error();
    }
    if (options.warning) options.warning(s.error().message + "; looking for .dwo files instead");
  }
  return split_files;
}

// Split DWARF: each skeleton's unit from the .dwp or its .dwo, attached to
// `units` (the sources kept in `split_sources`); a unit not found keeps its
// functions from the symbol table only.
Status attach_split_units(const ElfImage& dwarf_image, const std::string& binary_path, const ConvertOptions& options,
                          Dwarf* dwarf, std::vector<UnitLocation>& units,
                          std::unique_ptr<SplitDwarfFiles>& split_files,
                          std::vector<std::unique_ptr<SplitSource>>& split_sources, ConvertStats& stats, bool& fatal) {
  const std::string& path = dwarf_image.path();
  for (UnitLocation& unit : units) {
    if (!unit.skeleton) continue;
    if (!split_files) {
      Expected<std::unique_ptr<SplitDwarfFiles>> opened = open_split_files(dwarf_image, binary_path, options, fatal);
      if (!opened) return opened.error();
      split_files = std::move(*opened);
      stats.dwp_file_used = split_files->package_path();
    }
    const SkeletonUnit skeleton = read_skeleton(dwarf, unit);
    Expected<SplitUnit> found = split_files->find(skeleton);
    if (!found) {
      ++stats.split_units_missing;
      if (options.warning)
        options.warning(path + ": " + found.error().message + "; that unit's functions come from the symbol table only");
      continue;
    }
    auto source = std::make_unique<SplitSource>();
    source->unit = std::move(*found);
    source->comp_dir = skeleton.comp_dir;
    source->base_address = skeleton.low_pc;
    Dwarf_Die die;
    Dwarf_Attribute mem;
    Dwarf_Word stmt_list;
    if (dwarf_offdie(dwarf, unit.die_offset, &die) && dwarf_attr(&die, DW_AT_stmt_list, &mem) &&
        dwarf_formudata(&mem, &stmt_list) == 0)
      source->stmt_list = stmt_list;
    unit.split = source.get();
    split_sources.push_back(std::move(source));
    ++stats.split_units;
  }
  if (split_files) {
    stats.dwo_files_read = split_files->dwo_files_read();
    if (!split_files->writable_only_by_us()) stats.inputs_writable_only_by_us = false;
  }
  return Status::success();
}

// Converts `units` on `handles.size()` threads, one Dwarf handle each
// (libdw handles are not thread-safe; all read the one Elf, whose sections
// were decompressed once, in place, and are only read from here on).
// Workers take units in order from a shared counter; this thread replays
// finished units strictly in unit order, so the result never depends on
// which worker finished first.
void convert_units_in_parallel(const std::vector<UnitLocation>& units,
                               const std::vector<std::unique_ptr<DwarfHandle>>& handles,
                               const DwarfLineSections& sections, const UnitConverterOptions& tree_options,
                               Replayer& replayer, const std::function<void(size_t)>& report) {
  std::vector<std::optional<UnitOutput>> results(units.size());
  std::mutex mutex;
  std::condition_variable ready;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto worker = [&](Dwarf* dwarf) {
    DwarfUnitConverter converter(dwarf, sections, tree_options);
    for (;;) {
      if (stop) return;
      const size_t i = next.fetch_add(1);
      if (i >= units.size()) return;
      UnitOutput out = converter.convert(units[i]);
      std::lock_guard<std::mutex> lock(mutex);
      results[i] = std::move(out);
      ready.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (const std::unique_ptr<DwarfHandle>& handle : handles) pool.emplace_back(worker, handle->dwarf);
  for (size_t i = 0; i < units.size(); ++i) {
    std::optional<UnitOutput> out;
    {
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return results[i].has_value() || stop.load(); });
      if (!results[i]) break;
      out = std::move(results[i]);
      results[i].reset();
    }
    replayer.replay(*out);
    report(i + 1);
  }
  stop = true;
  for (std::thread& t : pool) t.join();
}

// Every error returns before the first unit is replayed, so a failure leaves
// the builder without DWARF functions and convert_elf can fall back to the
// symbol table.
Status convert_dwarf(const ElfImage& dwarf_image, const std::string& binary_path,
                     const UnitConverterOptions& unit_options, const ConvertOptions& options, Builder& builder,
                     ConvertStats& stats, std::vector<AddressRange>* sized, bool& fatal) {
  const std::string& path = dwarf_image.path();
  DwarfLineSections sections;
  UnitConverterOptions tree_options = unit_options;
  if (Status s = read_own_sections(dwarf_image, sections, tree_options); !s) return s;

  // Destroyed after every handle that uses it.
  Expected<std::span<const uint8_t>> debug_sup = dwarf_image.section_bytes(".debug_sup");
  if (!debug_sup) return Error(path + ": " + debug_sup.error().message);
  AltFile alt(options, parse_debug_sup(*debug_sup, dwarf_image.little_endian()));
  auto begin_dwarf = [&](Dwarf** out) -> Status {
    // Nothing should be left to claim; checked anyway, as before any libdw use.
    if (Status s = dwarf_image.check_section_sizes(); !s) return Error(path + ": " + s.error().message);
    *out = dwarf_begin_elf(dwarf_image.elf(), DWARF_C_READ, nullptr);
    if (!*out) return Error(path + ": cannot read DWARF: " + dwarf_error());
    if (Status s = alt.install(*out, path); !s) return Error(path + ": " + s.error().message);
    return Status::success();
  };
  DwarfHandle main_handle;
  if (Status s = begin_dwarf(&main_handle.dwarf); !s) return s;
  uint64_t bad_units = 0;
  Expected<std::vector<UnitLocation>> listed = list_units(main_handle.dwarf, &bad_units);
  if (!listed) return Error(path + ": " + listed.error().message);
  std::vector<UnitLocation>& units = *listed;

  std::unique_ptr<SplitDwarfFiles> split_files;
  std::vector<std::unique_ptr<SplitSource>> split_sources;
  if (Status s = attach_split_units(dwarf_image, binary_path, options, main_handle.dwarf, units, split_files,
                                    split_sources, stats, fatal);
      !s)
    return s;
  if (bad_units) {
    if (units.empty()) return Error(path + ": corrupt DWARF: cannot read the first unit header: " + dwarf_error());
    stats.skipped_units += bad_units;
    if (options.warning)
      options.warning(path + ": corrupt unit header after " + std::to_string(units.size()) +
                      " units; the rest of .debug_info is skipped");
  }
  stats.compile_units = units.size();

  Replayer replayer(builder, options, stats, sized);
  unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, units.size()));
  const std::function<void(size_t)> report = [&](size_t done) {
    if (options.progress && (done % 64 == 0 || done == units.size()))
      options.progress(done, units.size());
  };

  if (!alt.writable_only_by_us()) stats.inputs_writable_only_by_us = false;
  stats.alt_file_used = alt.path();
  if (threads <= 1) {
    DwarfUnitConverter converter(main_handle.dwarf, sections, tree_options);
    for (size_t i = 0; i < units.size(); ++i) {
      UnitOutput out = converter.convert(units[i]);
      replayer.replay(out);
      converter.recycle(std::move(out));
      report(i + 1);
    }
    return Status::success();
  }

  std::vector<std::unique_ptr<DwarfHandle>> handles;
  for (unsigned t = 0; t < threads; ++t) {
    auto h = std::make_unique<DwarfHandle>();
    if (t == 0) {
      h->dwarf = std::exchange(main_handle.dwarf, nullptr);
    } else if (Status s = begin_dwarf(&h->dwarf); !s) {
      return s;
    }
    handles.push_back(std::move(h));
  }
  convert_units_in_parallel(units, handles, sections, tree_options, replayer, report);
  return Status::success();
}

// ConvertOptions::plt_names and code_labels: records only where no sized
// function starts or covers, so lookups elsewhere stay LLVM's.
void add_profiler_names(const ElfImage& image, const ElfImage* debug_image, const ConvertOptions& options,
                        const std::vector<AddressRange>& text, std::vector<AddressRange>& sized,
                        Builder& builder, ConvertStats& stats) {
  std::sort(sized.begin(), sized.end());
  std::vector<AddressRange> covered;  // the union of `sized`
  for (const AddressRange& r : sized) {
    if (!covered.empty() && r.start <= covered.back().end)
      covered.back().end = std::max(covered.back().end, r.end);
    else
      covered.push_back(r);
  }
  auto holds = [](const std::vector<AddressRange>& ranges, uint64_t addr) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                               [](uint64_t a, const AddressRange& r) { return a < r.start; });
    return it != ranges.begin() && std::prev(it)->contains(addr);
  };
  auto free_code = [&](uint64_t addr) { return holds(text, addr) && !holds(covered, addr); };
  if (options.plt_names) {
    for (const PltEntry& entry : image.plt_entries()) {
      if (!free_code(entry.address) || entry.address > UINT64_MAX - entry.size) continue;
      FlatFunction f;
      f.range = {entry.address, entry.address + entry.size};
      f.name = builder.add_string(entry.name);
      if (builder.add_flat_function(f)) ++stats.plt_functions;
    }
  }
  if (options.entry_name) {
    // A stripped program's entry code: the root of its main thread's stack.
    // Toolchains name it _start (crt1.o); a program whose symbols cover it
    // keeps its own name.
    // Its extent: through the first hlt (0xf4), with which crt1's _start
    // ends after calling __libc_start_main; none found within 64 bytes (or
    // code covered before it): no name, as a guess could name other code.
    std::optional<uint64_t> entry = image.program_entry();
    const std::vector<uint8_t> code = entry ? image.code_at(*entry, 64) : std::vector<uint8_t>();
    const auto hlt = std::find(code.begin(), code.end(), uint8_t{0xf4});
    const uint64_t size = hlt == code.end() ? 0 : static_cast<uint64_t>(hlt - code.begin()) + 1;
    bool free_run = size > 0;
    for (uint64_t i = 0; free_run && i < size; ++i) free_run = free_code(*entry + i);
    if (free_run) {
      FlatFunction f;
      f.range = {*entry, *entry + size};
      f.name = builder.add_string(kEntryName);
      if (builder.add_flat_function(f)) ++stats.label_functions;
    }
  }
  if (options.signal_frames) {
    // Signal trampolines no symbol names (a stripped libc's __restore_rt):
    // named from the runtime file's .eh_frame (a debug file's is empty).
    for (const AddressRange& tramp : signal_trampolines(image)) {
      if (!free_code(tramp.start) || !free_code(tramp.end - 1)) continue;
      FlatFunction f;
      f.range = tramp;
      f.name = builder.add_string(kSignalFrameName);
      if (builder.add_flat_function(f)) ++stats.label_functions;
    }
  }
  if (options.code_labels) {
    // From the table the function symbols came from: the debug file's
    // .symtab, else the input's.
    std::vector<ElfSymbol> labels;
    if (debug_image) labels = debug_image->code_label_symbols();
    if (labels.empty()) labels = image.code_label_symbols();
    for (const ElfSymbol& label : labels) {
      if (!free_code(label.value)) continue;
      FlatFunction f;
      f.range = {label.value, label.value};
      f.name = builder.add_string(label.name);
      if (builder.add_flat_function(f)) ++stats.label_functions;
    }
  }
}

// The separate debug file of `image` (`name` in messages): the one given
// (ConvertOptions::debug_file, which must match and hold DWARF), else the
// one the search finds for a file without DWARF; none is no error.
Expected<std::optional<ElfImage>> open_debug_image(const ElfImage& image, const std::string& name,
                                                   const ConvertOptions& options) {
  if (!options.debug_file.empty()) {
    Expected<ElfImage> d = ElfImage::open(options.debug_file);
    if (!d) return d.error().prefixed(options.debug_file + ": ");
    const std::vector<uint8_t> want = image.build_id(), have = d->build_id();
    if (!want.empty() && !have.empty() && want != have)
      return Error(options.debug_file + ": build ID " + to_hex(have) + " does not match " +
                   name + " (" + to_hex(want) + ")");
    if (!d->has_dwarf()) return Error(options.debug_file + ": has no DWARF");
    return std::optional<ElfImage>(std::move(*d));
  }
  if (image.has_dwarf() || !options.search_debug_file) return std::optional<ElfImage>();
  DebugFileSearch search;
  search.debug_directories = options.debug_directories;
  std::vector<std::string> rejected;
  std::string found = find_debug_file(image, search, &rejected);
  if (options.warning)
    for (const std::string& r : rejected) options.warning("debug file candidate rejected: " + r);
  if (found.empty()) return std::optional<ElfImage>();
  Expected<ElfImage> d = ElfImage::open(found);
  if (!d) return d.error().prefixed(found + ": ");
  return std::optional<ElfImage>(std::move(*d));
}

BuilderOptions builder_options_for(const ElfImage& image, const ConvertOptions& options,
                                   const std::vector<AddressRange>& text) {
  BuilderOptions builder_options;
  builder_options.endian = image.little_endian() ? Endian::Little : Endian::Big;
  builder_options.version = options.gsym_version;
  builder_options.build_id = image.build_id();
  // Version 1's UUID field holds 20 bytes (LLVM drops a longer ID too);
  // version 2's UUID section any length.
  if (options.gsym_version == kVersion && builder_options.build_id.size() > kMaxUuidSize)
    builder_options.build_id.clear();
  builder_options.base_address = image.first_load_address();
  builder_options.text_ranges = text;
  return builder_options;
}

// Symbols: the DWARF file's .symtab (what LLVM reads when given the debug
// file), else the ELF's .symtab, else its .dynsym (LLVM ignores .dynsym)
// and its MiniDebugInfo's .symtab. Only those in `text`; the sized ones'
// ranges go to `sized`.
void add_symbol_functions(const ElfImage& image, const ElfImage* debug_image, const std::string& name,
                          const ConvertOptions& options, const std::vector<AddressRange>& text, Builder& builder,
                          ConvertStats& stats, std::vector<AddressRange>& sized) {
  bool used_dynsym = false, used_minidebuginfo = false;
  std::vector<ElfSymbol> symbols;
  if (debug_image) symbols = debug_image->function_symbols(&used_dynsym);
  if (symbols.empty() || used_dynsym) symbols = image.function_symbols(&used_dynsym, &used_minidebuginfo);
  stats.used_dynsym = used_dynsym && !symbols.empty();
  stats.used_minidebuginfo = used_minidebuginfo;
  if (!image.mini_debuginfo_error().empty() && options.warning)
    options.warning(name + ": " + image.mini_debuginfo_error() + "; its symbols are not used");
  auto in_text = [&](uint64_t addr) {
    auto it = std::upper_bound(text.begin(), text.end(), addr,
                               [](uint64_t a, const AddressRange& r) { return a < r.start; });
    return it != text.begin() && std::prev(it)->contains(addr);
  };
  for (const ElfSymbol& sym : symbols) {
    if (sym.name.empty() || !in_text(sym.value)) continue;
    if (sym.size > UINT32_MAX || sym.value > UINT64_MAX - sym.size) continue;
    FlatFunction f;
    f.range = {sym.value, sym.value + sym.size};
    f.name = builder.add_string(sym.name);
    if (builder.add_flat_function(f)) {
      ++stats.symbol_functions;
      if (sym.size) sized.push_back(f.range);
    }
  }
}

}  // namespace

Expected<std::vector<uint8_t>> convert_elf(const std::string& elf_path,
                                           const ConvertOptions& options, ConvertStats* stats_out) {
  ConvertStats stats;
  const std::string& name = options.known_as.empty() ? elf_path : options.known_as;
  Expected<ElfImage> opened = ElfImage::open(elf_path, {}, options.known_as);
  if (!opened) return opened.error().prefixed(name + ": ");
  const ElfImage& image = *opened;

  // Where the DWARF comes from.
  Expected<std::optional<ElfImage>> debug_opened = open_debug_image(image, name, options);
  if (!debug_opened) return debug_opened.error();
  std::optional<ElfImage>& debug_image = *debug_opened;
  const ElfImage* dwarf_image = debug_image ? &*debug_image : (image.has_dwarf() ? &image : nullptr);
  if (debug_image) stats.debug_file_used = debug_image->path();
  stats.inputs_writable_only_by_us =
      image.writable_only_by_us() && (!debug_image || debug_image->writable_only_by_us());

  std::vector<AddressRange> text = image.executable_ranges();
  if (text.empty() && debug_image) text = debug_image->executable_ranges();
  Builder builder(builder_options_for(image, options, text));
  // Ranges of the sized functions added (DWARF, symbols): profiler names
  // go only where none of them is.
  std::vector<AddressRange> sized;

  if (dwarf_image) {
    UnitConverterOptions unit_options;
    unit_options.text_ranges = text;
    unit_options.inline_info = options.inline_info;
    unit_options.skip_children_without_code = options.skip_children_without_code;
    bool fatal = false;
    Status s = convert_dwarf(*dwarf_image, name, unit_options, options, builder, stats,
                             options.plt_names || options.code_labels ? &sized : nullptr, fatal);
    if (!s && fatal) return s.error();
    if (!s) {
      // One bad section must not cost the module its symbol-table names too:
      // go on without DWARF (convert_dwarf added no function).
      stats.dwarf_error = s.error().message;
      stats.compile_units = stats.skipped_units = 0;
    }
  }

  add_symbol_functions(image, debug_image ? &*debug_image : nullptr, name, options, text, builder, stats, sized);
  if (options.plt_names || options.code_labels)
    add_profiler_names(image, debug_image ? &*debug_image : nullptr, options, text, sized, builder, stats);

  if (builder.function_count() == 0 && !stats.dwarf_error.empty()) return Error(stats.dwarf_error);
  if (builder.function_count() == 0)
    return Error(ErrorCode::NoFunctions, name + ": no functions found (" +
                 (dwarf_image ? std::string("DWARF and symbol tables describe no code")
                              : std::string("no DWARF, no debug file and no function symbols")) +
                 ")");
  Expected<std::vector<uint8_t>> bytes = builder.encode();
  if (!bytes) return Error(name + ": " + bytes.error().message);
  stats.functions_written = builder.finalized_count();
  // Warned only now: when nothing converts, the error says it once.
  if (!stats.dwarf_error.empty() && options.warning)
    options.warning(stats.dwarf_error + "; functions come from the symbol table only");
  if (stats_out) *stats_out = stats;
  return bytes;
}

Status convert_elf_to_file(const std::string& elf_path, const std::string& out_path,
                           const ConvertOptions& options, ConvertStats* stats) {
  Expected<std::vector<uint8_t>> bytes = convert_elf(elf_path, options, stats);
  if (!bytes) return bytes.error();
  return write_file_atomically(out_path, *bytes, 0644);
}

}  // namespace gsym
