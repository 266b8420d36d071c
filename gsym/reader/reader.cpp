// gsym/reader/reader.cpp - GSYM reader (versions 1 and 2): storage, layout checks at open
// time, and the dispatch of lookups, decode and verify to the record codecs
// (line_table.h, inline_info.h) and the acceleration index (lookup_index.h).
#include "gsym/reader/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>

#include "gsym/format/data_cursor.h"
#include "gsym/base/file_io.h"
#include "gsym/format/format.h"
#include "gsym/format/inline_info.h"
#include "gsym/format/line_table.h"
#include "gsym/reader/lookup_index.h"
#include "gsym/reader/reader_layout.h"

namespace gsym {

using detail::DataCursor;
using detail::DecodeContext;

namespace {

Error no_such_file(uint32_t index) {
  return Error("failed to extract file[" + std::to_string(index) + "]");
}

// Version 2's known sections by GlobalInfoType (index 0 unused): where each
// is, or null.
constexpr uint32_t kKnownGlobalTypes = static_cast<uint32_t>(GlobalInfoType::UUID) + 1;
using KnownSections = std::array<const GlobalDataEntry*, kKnownGlobalTypes>;

}  // namespace

struct Reader::Impl : detail::Layout {
  std::vector<uint8_t> owned;
  void* map_base = nullptr;
  size_t map_size = 0;
  detail::LookupIndex index;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (map_base) munmap(map_base, map_size);
  }

  // Each file entry's strings, resolved at open: a lookup names several
  // files per frame chain and would otherwise scan each for its NUL.
  struct FileStrings {
    std::string_view directory, basename;
    bool empty = false;  // both offsets 0 (LLVM drops inline frames calling from it)
  };
  std::vector<FileStrings> file_strings;
  void build_file_strings() {
    file_strings.resize(num_files);
    for (uint32_t i = 0; i < num_files; ++i) {
      uint64_t dir = 0, base = 0;
      file_offsets(i, dir, base);
      file_strings[i] = {string(dir), string(base), dir == 0 && base == 0};
    }
  }

  DecodeContext decode_context(bool strict, VerifyReport* report) const {
    return {strtab(), num_files, strict, report};
  }

  std::vector<GlobalDataEntry> sections;  // version 2's directory

  Status parse_layout(Reader::Index index_kind);  // index_kind: build the lookup index or not
  Status parse_header_v1(DataCursor& c);
  Status parse_header_v2(DataCursor& c);
  Status read_directory_v2(KnownSections& found);
  Status place_tables_v2(const KnownSections& found);
  int64_t find_function(uint64_t addr) const;
  Expected<bool> lookup(uint64_t addr, const LookupOptions& options, LookupScratch& s) const;
  Status add_inline_frames(uint64_t addr, const LookupOptions& options, LookupScratch& s) const;
  Expected<Function> decode_record(DataCursor c, uint64_t start, size_t merged_depth,
                                   const DecodeContext& ctx) const;
  Status decode_merged(DataCursor payload, uint64_t at, uint64_t start, size_t merged_depth,
                       const DecodeContext& ctx, Function& fn) const;
  Status decode_call_sites(DataCursor payload, uint64_t at, uint32_t size, const DecodeContext& ctx,
                           Function& fn) const;
};

// ---------------------------------------------------------------------------
// Opening

Status Reader::Impl::parse_layout(Reader::Index index_kind) {
  const uint64_t size = data.size();
  if (size < 4) return Error("not enough data for a GSYM header", 0);
  uint32_t magic;
  std::memcpy(&magic, data.data(), 4);
  if (magic == kMagic)
    swap = false;
  else if (magic == kMagicSwapped)
    swap = true;
  else
    return Error("not a GSYM file", 0);
  DataCursor c = cursor_at(0);
  header.magic = c.u32();
  header.version = c.u16();
  if (!c.ok()) return Error("not enough data for a GSYM header", 0);
  header.endian = (swap == (std::endian::native == std::endian::little)) ? Endian::Big
                                                                          : Endian::Little;
  Status st;
  if (header.version == kVersion)
    st = parse_header_v1(c);
  else if (header.version == kVersion2)
    st = parse_header_v2(c);
  else
    return Error(ErrorCode::Unsupported, "unsupported GSYM version " + std::to_string(header.version), 4);
  if (!st) return st;

  const uint64_t n = header.num_addresses;
  const uint64_t info_size = wide ? 8 : 4;
  // Every record must at least hold its Size and Name, so lookups can read
  // them without checks.
  const uint64_t fixed = 4 + string_offset_size();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t rel = wide ? u64_at(info_table + 8 * i) : u32_at(info_table + 4 * i);
    const uint64_t room = info_end - info_base;
    if (rel > room || room - rel < fixed)
      return Error("function info " + std::to_string(i) + " offset " + hex_number(rel) +
                       (wide ? " is past the end of the FunctionInfo section"
                             : " is past the end of the file"),
                   info_table + info_size * i);
  }
  if (index_kind == Reader::Index::Build) index.build(*this);
  build_file_strings();
  return {};
}

Status Reader::Impl::parse_header_v1(DataCursor& c) {
  const uint64_t size = data.size();
  if (size < kHeaderSize) return Error("not enough data for a GSYM header", 0);
  header.addr_off_size = c.u8();
  header.uuid_size = c.u8();
  header.base_address = c.u64();
  header.num_addresses = c.u32();
  header.strtab_offset = c.u32();
  header.strtab_size = c.u32();
  for (uint8_t& b : header.uuid) b = c.u8();
  const uint8_t aos = header.addr_off_size;
  if (aos != 1 && aos != 2 && aos != 4 && aos != 8)
    return Error("invalid address offset size " + std::to_string(aos), 6);
  if (header.uuid_size > kMaxUuidSize)
    return Error("invalid UUID size " + std::to_string(header.uuid_size), 7);
  uuid_offset = 28;
  uuid_size = header.uuid_size;

  const uint64_t n = header.num_addresses;
  addr_table = kHeaderSize;
  if (n * aos > size - addr_table)
    return Error("address table (" + std::to_string(n) + " entries) extends past the end of the file",
                 16);
  info_table = (addr_table + n * aos + 3) & ~uint64_t{3};
  if (info_table > size || n * 4 > size - info_table)
    return Error("address info table (" + std::to_string(n) +
                     " entries) extends past the end of the file",
                 info_table);
  const uint64_t files_at = info_table + n * 4;
  if (size - files_at < 4) return Error("file table count is past the end of the file", files_at);
  num_files = u32_at(files_at);
  file_table = files_at + 4;
  if (uint64_t{num_files} * 8 > size - file_table)
    return Error("file table (" + std::to_string(num_files) +
                     " entries) extends past the end of the file",
                 files_at);
  if (header.strtab_offset + header.strtab_size > size)
    return Error("string table [" + hex_number(header.strtab_offset) + ", " +
                     hex_number(header.strtab_offset + header.strtab_size) +
                     ") extends past the end of the file",
                 20);
  info_base = 0;
  info_end = size;
  return {};
}

// Version 2: the header, then the directory; each required section once,
// inside the file, with the size its contents need (gsym/FORMAT.md §9).
Status Reader::Impl::parse_header_v2(DataCursor& c) {
  const uint64_t size = data.size();
  if (size < kHeaderSizeV2) return Error("not enough data for a GSYM version 2 header", 0);
  wide = true;
  header.addr_off_size = c.u8();
  header.string_table_encoding = c.u8();
  header.base_address = c.u64();
  header.num_addresses = c.u32();
  const uint8_t aos = header.addr_off_size;
  if (aos != 1 && aos != 2 && aos != 4 && aos != 8)
    return Error("invalid address offset size " + std::to_string(aos), 6);
  if (header.string_table_encoding != 0)
    return Error(ErrorCode::Unsupported,
                 "unsupported string table encoding " + std::to_string(header.string_table_encoding), 7);

  KnownSections found{};
  if (Status st = read_directory_v2(found); !st) return st;
  return place_tables_v2(found);
}

// The directory up to its end first (bounded by the file size / 20), so a
// cut-off directory says so; then each entry: inside the file, each known
// type once, every required one there.
Status Reader::Impl::read_directory_v2(KnownSections& found) {
  const uint64_t size = data.size();
  uint64_t at = kHeaderSizeV2;
  while (true) {
    if (size - at < kDirectoryEntrySize)
      return Error("global data directory has no end (entry at " + hex_number(at) +
                       " is past the end of the file)",
                   at);
    DataCursor e = cursor_at(at);
    GlobalDataEntry entry;
    entry.type = e.u32();
    entry.offset = e.u64();
    entry.size = e.u64();
    if (entry.type == static_cast<uint32_t>(GlobalInfoType::EndOfList)) break;
    sections.push_back(entry);
    at += kDirectoryEntrySize;
  }
  for (size_t k = 0; k < sections.size(); ++k) {
    const GlobalDataEntry& entry = sections[k];
    const uint64_t entry_at = kHeaderSizeV2 + kDirectoryEntrySize * k;
    const std::string name = entry.type < kKnownGlobalTypes
                                 ? std::string(global_info_type_name(entry.type))
                                 : "type " + std::to_string(entry.type);
    if (entry.size == 0) return Error("global data " + name + " has size 0", entry_at);
    if (entry.offset > size || entry.size > size - entry.offset)
      return Error("global data " + name + " [" + hex_number(entry.offset) + ", +" +
                       hex_number(entry.size) + ") extends past the end of the file",
                   entry_at);
    if (entry.type < kKnownGlobalTypes) {
      if (found[entry.type]) return Error("global data " + name + " appears twice", entry_at);
      found[entry.type] = &entry;
    }
  }
  for (GlobalInfoType required :
       {GlobalInfoType::AddrOffsets, GlobalInfoType::AddrInfoOffsets, GlobalInfoType::StringTable,
        GlobalInfoType::FileTable, GlobalInfoType::FunctionInfo}) {
    if (!found[static_cast<uint32_t>(required)])
      return Error(std::string("global data directory has no ") +
                       global_info_type_name(static_cast<uint32_t>(required)),
                   kHeaderSizeV2);
  }
  return {};
}

// Each table where the directory puts it, with the size its contents need.
Status Reader::Impl::place_tables_v2(const KnownSections& found) {
  const uint64_t n = header.num_addresses;
  const uint8_t aos = header.addr_off_size;
  const GlobalDataEntry& addrs = *found[static_cast<uint32_t>(GlobalInfoType::AddrOffsets)];
  if (addrs.size != n * aos)
    return Error("AddrOffsets size " + hex_number(addrs.size) + " is not " + std::to_string(n) +
                     " x " + std::to_string(aos),
                 addrs.offset);
  const GlobalDataEntry& infos = *found[static_cast<uint32_t>(GlobalInfoType::AddrInfoOffsets)];
  if (infos.size != n * 8)
    return Error("AddrInfoOffsets size " + hex_number(infos.size) + " is not " +
                     std::to_string(n) + " x 8",
                 infos.offset);
  const GlobalDataEntry& files = *found[static_cast<uint32_t>(GlobalInfoType::FileTable)];
  if (files.size < 4) return Error("FileTable is too small for its count", files.offset);
  num_files = u32_at(files.offset);
  if (uint64_t{num_files} * 16 > files.size - 4)
    return Error("file table (" + std::to_string(num_files) +
                     " entries) extends past the end of its section",
                 files.offset);
  const GlobalDataEntry& strings = *found[static_cast<uint32_t>(GlobalInfoType::StringTable)];
  const GlobalDataEntry& records = *found[static_cast<uint32_t>(GlobalInfoType::FunctionInfo)];
  addr_table = addrs.offset;
  info_table = infos.offset;
  file_table = files.offset + 4;
  header.strtab_offset = strings.offset;
  header.strtab_size = strings.size;
  info_base = records.offset;
  info_end = records.offset + records.size;
  if (const GlobalDataEntry* uuid = found[static_cast<uint32_t>(GlobalInfoType::UUID)]) {
    uuid_offset = uuid->offset;
    uuid_size = uuid->size;
    // Mirrored into the version 1 fields when it fits them.
    if (uuid->size <= kMaxUuidSize) {
      header.uuid_size = static_cast<uint8_t>(uuid->size);
      std::memcpy(header.uuid, data.data() + uuid->offset, uuid->size);
    }
  }
  return {};
}

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Expected<Reader> Reader::parse(std::span<const uint8_t> bytes, Index index) {
  auto impl = std::make_unique<Impl>();
  impl->data = bytes;
  if (Status st = impl->parse_layout(index); !st) return st.error();
  return Reader(std::move(impl));
}

namespace {

// Opens a GSYM file as untrusted input (never blocks on a FIFO, regular files
// only); errors without the path, which callers prefix.
Expected<OpenFile> open_gsym_file(const std::string& path) {
  return open_regular_file_at(AT_FDCWD, path, Symlinks::Follow, "");
}

}  // namespace

Expected<Reader> Reader::open(const std::string& path) {
  Expected<OpenFile> file = open_gsym_file(path);
  if (!file) return file.error();
  return from_descriptor(file->fd.get(), Load::Read);
}

Expected<Reader> Reader::map(const std::string& path) {
  Expected<OpenFile> file = open_gsym_file(path);
  if (!file) return file.error();
  return from_descriptor(file->fd.get(), safe_load(file->status));
}

// A mapping of a file someone else can truncate would die of SIGBUS.
Reader::Load Reader::safe_load(const struct stat& status) {
  return writable_only_by_us(status) ? Load::Map : Load::Read;
}

Expected<Reader> Reader::from_descriptor(int fd, Load load, Index index) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    return Error::from_errno(err, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return Error(ErrorCode::Refused, "not a regular file");
  auto impl = std::make_unique<Impl>();
  if (load == Load::Read) {
    Expected<std::vector<uint8_t>> bytes = read_descriptor(fd, UINT64_MAX, "");
    if (!bytes) return bytes.error();
    impl->owned = std::move(*bytes);
    impl->data = impl->owned;
  } else if (st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      return Error::from_errno(err, std::string("cannot map: ") + std::strerror(err));
    }
    impl->map_base = p;
    impl->map_size = static_cast<size_t>(st.st_size);
    impl->data = {static_cast<const uint8_t*>(p), impl->map_size};
  }
  if (Status s = impl->parse_layout(index); !s) return s.error();
  return Reader(std::move(impl));
}

// ---------------------------------------------------------------------------
// Accessors

const Header& Reader::header() const { return impl_->header; }
std::span<const GlobalDataEntry> Reader::sections() const { return impl_->sections; }
std::span<const uint8_t> Reader::build_id() const {
  return impl_->data.subspan(impl_->uuid_offset, impl_->uuid_size);
}
std::span<const uint8_t> Reader::bytes() const { return impl_->data; }
size_t Reader::memory_bytes() const { return impl_->owned.capacity() + impl_->index.memory_bytes(); }
void Reader::release_pages() const {
  // The mapping is private and never written: every page is the file's.
  if (impl_->map_base) madvise(impl_->map_base, impl_->map_size, MADV_DONTNEED);
}
size_t Reader::function_count() const { return impl_->header.num_addresses; }
uint64_t Reader::function_start(size_t index) const { return impl_->function_start(index); }
std::string_view Reader::string(uint64_t offset) const { return impl_->string(offset); }
size_t Reader::file_count() const { return impl_->num_files; }

Expected<std::pair<std::string_view, std::string_view>> Reader::file(uint32_t index) const {
  uint64_t dir, base;
  if (!impl_->file_offsets(index, dir, base))
    return no_such_file(index);
  return std::pair{impl_->string(dir), impl_->string(base)};
}

Expected<std::vector<FileEntry>> Reader::decode_files() const {
  std::vector<FileEntry> files;
  files.reserve(impl_->num_files);
  for (uint32_t i = 0; i < impl_->num_files; ++i) {
    uint64_t dir, base;
    (void)impl_->file_offsets(i, dir, base);
    files.push_back({std::string(impl_->string(dir)), std::string(impl_->string(base))});
  }
  return files;
}

// ---------------------------------------------------------------------------
// Lookup

// LLVM's rule: the greatest start <= addr, moved back to the first of a run
// of equal starts; then the first record of that run whose size is 0 or whose
// range holds addr.
namespace {

template <class T>
T load_entry(const uint8_t* p, bool swap) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (sizeof(T) == 2) {
    if (swap) v = __builtin_bswap16(v);
  } else if constexpr (sizeof(T) == 4) {
    if (swap) v = __builtin_bswap32(v);
  } else if constexpr (sizeof(T) == 8) {
    if (swap) v = __builtin_bswap64(v);
  }
  return v;
}

// Greatest index whose entry is <= rel, or -1. Branch-free halving (the
// comparison becomes a conditional move): random lookups mispredict less.
template <class T>
int64_t last_not_above(const uint8_t* table, uint64_t n, uint64_t rel, bool swap) {
  uint64_t base = 0, len = n;
  while (len > 1) {
    const uint64_t half = len / 2;
    base = load_entry<T>(table + (base + half) * sizeof(T), swap) <= rel ? base + half : base;
    len -= half;
  }
  return load_entry<T>(table + base * sizeof(T), swap) <= rel ? static_cast<int64_t>(base) : -1;
}

}  // namespace

int64_t Reader::Impl::find_function(uint64_t addr) const {
  const uint64_t n = header.num_addresses;
  if (n == 0 || addr < header.base_address) return -1;
  const uint64_t rel = addr - header.base_address;
  // The entries to search: all, or the bucket of `rel`.
  uint64_t lo = 0, count = n;
  index.bucket(rel, n, lo, count);
  const uint8_t* table = data.data() + addr_table + lo * header.addr_off_size;
  int64_t found = -1;
  if (count > 0) {
    switch (header.addr_off_size) {
      case 1:
        found = last_not_above<uint8_t>(table, count, rel, swap);
        break;
      case 2:
        found = last_not_above<uint16_t>(table, count, rel, swap);
        break;
      case 4:
        found = last_not_above<uint32_t>(table, count, rel, swap);
        break;
      default:
        found = last_not_above<uint64_t>(table, count, rel, swap);
        break;
    }
  }
  // Nothing at or below rel in the bucket: the answer is the entry before it.
  found = found < 0 ? static_cast<int64_t>(lo) - 1 : found + static_cast<int64_t>(lo);
  if (found < 0) return -1;
  uint64_t i = static_cast<uint64_t>(found);
  const uint64_t run = addr_offset(i);
  while (i > 0 && addr_offset(i - 1) == run) --i;
  const uint64_t start = header.base_address + run;
  for (uint64_t j = i; j < n && addr_offset(j) == run; ++j) {
    const uint32_t size = function_size(j);
    const uint64_t end = start + size;
    if (size == 0 || (start <= addr && addr < end)) return static_cast<int64_t>(j);
  }
  return -1;
}

int64_t Reader::find_function(uint64_t addr) const { return impl_->find_function(addr); }

Expected<bool> Reader::Impl::lookup(uint64_t addr, const LookupOptions& options,
                                    LookupScratch& s) const {
  s.frames.clear();
  s.inline_chain.clear();
  const int64_t found = find_function(addr);
  if (found < 0) return false;
  const size_t i = static_cast<size_t>(found);
  const uint64_t start = function_start(i);
  const uint64_t rec = info_offset(i);
  DataCursor c = cursor_at(rec);
  c.u32();  // size, already checked by find_function
  const uint64_t name = c.string_offset();
  if (name == 0) return Error("invalid FunctionInfo Name value 0x00000000", rec + 4);

  bool have_line_table = false, have_row = false;
  uint32_t row_file = 0, row_line = 0;
  // Fetched when first needed: fetching counts as this function's lookup.
  const detail::FunctionIndex* function_index = nullptr;
  auto indexed = [&]() -> const detail::FunctionIndex& {
    if (function_index == nullptr) function_index = &index.function(*this, i);
    return *function_index;
  };
  DataCursor inline_data;
  bool have_inline = false;
  while (true) {
    const uint32_t type = c.u32();
    const uint32_t length = c.u32();
    if (!c.ok() || length > c.remaining())
      return Error("FunctionInfo data is truncated", c.ok() ? c.offset() - 8 : c.failure_offset());
    DataCursor payload = c.sub(length);
    if (type == static_cast<uint32_t>(InfoType::EndOfList)) break;
    if (type == static_cast<uint32_t>(InfoType::LineTable)) {
      have_line_table = true;
      if (options.line_information) {
        if (Status st = detail::lookup_line(payload, start, addr, indexed().line_checkpoints(),
                                            data.data(), row_file, row_line);
            !st)
          return st.error();
        have_row = true;
      }
    } else if (type == static_cast<uint32_t>(InfoType::Inline)) {
      inline_data = payload;
      have_inline = true;
    }
    // Other types (merged functions, call sites, unknown) do not affect lookup.
  }

  LookupFrame first;
  first.name = string(name);
  first.offset = static_cast<uint32_t>(addr - start);  // LLVM's Offset is 32-bit
  if (have_row) {
    if (row_file >= file_strings.size()) return no_such_file(row_file);
    first.directory = file_strings[row_file].directory;
    first.basename = file_strings[row_file].basename;
    first.line = row_line;
  }
  s.frames.push_back(first);
  // LLVM consults inline info only when the function has a line table.
  if (have_line_table && have_inline && options.inline_frames) {
    if (Status st = detail::walk_inline_tree(inline_data, start, addr, indexed().inline_skips(),
                                             s.inline_chain);
        !st)
      return st.error();
    if (Status st = add_inline_frames(addr, options, s); !st) return st.error();
  }
  for (size_t k = 0; k + 1 < s.frames.size(); ++k) s.frames[k].inlined = true;
  return true;
}

// Turns s.inline_chain (root first) into frames: the innermost frame takes
// the deepest node's name, each outer frame the call site on the node
// nested inside it.
Status Reader::Impl::add_inline_frames(uint64_t addr, const LookupOptions& options,
                                       LookupScratch& s) const {
  for (size_t k = s.inline_chain.size(); k-- > 0;) {
    const LookupScratch::InlineStep& step = s.inline_chain[k];
    if (step.call_file >= file_strings.size()) return no_such_file(step.call_file);
    const FileStrings& file = file_strings[step.call_file];
    if (file.empty) continue;  // LLVM drops frames without a call file
    LookupFrame outer;
    outer.name = s.frames.back().name;
    outer.offset = s.frames.back().offset;
    if (options.line_information) {
      outer.directory = file.directory;
      outer.basename = file.basename;
      outer.line = step.call_line;
    }
    s.frames.back().name = string(step.name);
    s.frames.back().offset = static_cast<uint32_t>(addr - step.first_start);
    s.frames.push_back(outer);
  }
  return {};
}

Expected<bool> Reader::lookup_into(uint64_t addr, const LookupOptions& options,
                                   LookupScratch& scratch) const {
  return impl_->lookup(addr, options, scratch);
}

Expected<std::optional<LookupResult>> Reader::lookup(uint64_t addr,
                                                     const LookupOptions& options) const {
  LookupScratch scratch;
  Expected<bool> found = impl_->lookup(addr, options, scratch);
  if (!found) return found.error();
  if (!*found) return std::optional<LookupResult>();
  const int64_t index = impl_->find_function(addr);
  LookupResult result;
  result.address = addr;
  const uint64_t start = impl_->function_start(static_cast<size_t>(index));
  result.function = {start, start + impl_->function_size(static_cast<size_t>(index))};
  result.frames = std::move(scratch.frames);
  return std::optional<LookupResult>(std::move(result));
}

// ---------------------------------------------------------------------------
// Full decode

Expected<Function> Reader::Impl::decode_record(DataCursor c, uint64_t start, size_t merged_depth,
                                               const DecodeContext& ctx) const {
  const uint64_t rec = c.offset();
  const uint32_t size = c.u32();
  const uint64_t name = c.string_offset();
  if (!c.ok()) return Error("FunctionInfo data is truncated", c.failure_offset());
  if (name == 0) return Error("invalid FunctionInfo Name value 0x00000000", rec + 4);
  if (Status st = ctx.check_string(name, rec + 4); !st) return st.error();
  Function fn;
  fn.range = {start, start + size};
  fn.name = std::string(string(name));
  while (true) {
    const uint64_t at = c.offset();
    const uint32_t type = c.u32();
    const uint32_t length = c.u32();
    if (!c.ok() || length > c.remaining())
      return Error("FunctionInfo data is truncated", c.ok() ? at : c.failure_offset());
    DataCursor payload = c.sub(length);
    switch (static_cast<InfoType>(type)) {
      case InfoType::EndOfList:
        return fn;
      case InfoType::LineTable:
        fn.lines.clear();
        if (Status st = detail::decode_line_table(payload, start, fn.lines, ctx); !st)
          return st.error();
        if (ctx.report) ctx.report->line_rows += fn.lines.size();
        break;
      case InfoType::Inline: {
        auto node = detail::decode_inline_tree(payload, start, 0, nullptr, ctx);
        if (!node) return node.error();
        fn.inline_tree = std::move(*node);
        if (ctx.strict && fn.inline_tree && fn.range.size() > 0 &&
            !std::all_of(fn.inline_tree->ranges.begin(), fn.inline_tree->ranges.end(),
                         [&](const AddressRange& r) { return fn.range.contains(r); }))
          return Error("InlineInfo root range is outside the function", payload.offset());
        break;
      }
      case InfoType::MergedFunctions:
        if (Status st = decode_merged(payload, at, start, merged_depth, ctx, fn); !st)
          return st.error();
        break;
      case InfoType::CallSites:
        if (Status st = decode_call_sites(payload, at, size, ctx, fn); !st) return st.error();
        break;
      default:
        return Error(ErrorCode::Unsupported, "unsupported InfoType " + std::to_string(type), at);
    }
  }
}

// MergedFunctionsInfo (record at `at`): a count, then sized FunctionInfos.
Status Reader::Impl::decode_merged(DataCursor payload, uint64_t at, uint64_t start,
                                   size_t merged_depth, const DecodeContext& ctx,
                                   Function& fn) const {
  if (merged_depth + 1 > kMaxMergedDepth)
    return Error("MergedFunctionsInfo nested deeper than " + std::to_string(kMaxMergedDepth), at);
  const uint32_t count = payload.u32();
  if (!payload.ok()) return payload.error("MergedFunctionsInfo");
  if (count > payload.remaining() / 4)
    return Error("MergedFunctionsInfo count " + std::to_string(count) + " exceeds the data",
                 at + 8);
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t bytes = payload.u32();
    DataCursor sub = payload.sub(bytes);
    if (!payload.ok()) return payload.error("MergedFunctionsInfo");
    auto merged = decode_record(sub, start, merged_depth + 1, ctx);
    if (!merged) return merged.error();
    fn.merged.push_back(std::move(*merged));
    if (ctx.report) ++ctx.report->merged_functions;
  }
  return {};
}

// CallSiteInfo (record at `at`) of a function of `size` bytes.
Status Reader::Impl::decode_call_sites(DataCursor payload, uint64_t at, uint32_t size,
                                       const DecodeContext& ctx, Function& fn) const {
  const uint32_t count = payload.u32();
  if (!payload.ok()) return payload.error("CallSiteInfo");
  if (count > payload.remaining() / 13)
    return Error("CallSiteInfo count " + std::to_string(count) + " exceeds the data", at + 8);
  for (uint32_t i = 0; i < count; ++i) {
    CallSite cs;
    cs.return_offset = payload.u64();
    cs.flags = payload.u8();
    const uint32_t num_regex = payload.u32();
    if (!payload.ok()) return payload.error("CallSiteInfo");
    if (num_regex > payload.remaining() / payload.string_offset_size())
      return Error("CallSiteInfo regex count " + std::to_string(num_regex) + " exceeds the data",
                   payload.offset() - 4);
    for (uint32_t r = 0; r < num_regex; ++r) {
      const uint64_t str_at = payload.offset();
      const uint64_t off = payload.string_offset();
      if (Status st = ctx.check_string(off, str_at); !st) return st.error();
      cs.match_regex.emplace_back(string(off));
    }
    if (!payload.ok()) return payload.error("CallSiteInfo");
    if (ctx.strict && size != 0 && cs.return_offset > size)
      return Error("call site return offset " + hex_number(cs.return_offset) +
                       " is outside the function",
                   payload.offset());
    fn.call_sites.push_back(std::move(cs));
  }
  if (ctx.report) ctx.report->call_sites += count;
  return {};
}

Expected<Function> Reader::decode_function(size_t index) const {
  if (index >= function_count())
    return Error("function index " + std::to_string(index) + " out of range (" +
                 std::to_string(function_count()) + " functions)");
  return impl_->decode_record(impl_->cursor_at(impl_->info_offset(index)),
                              impl_->function_start(index), 0,
                              impl_->decode_context(false, nullptr));
}

// ---------------------------------------------------------------------------
// Verify

Expected<VerifyReport> Reader::verify() const {
  const Impl& m = *impl_;
  VerifyReport report;
  report.functions = m.header.num_addresses;
  report.files = m.num_files;
  if (m.header.strtab_size == 0 || m.data[m.header.strtab_offset] != 0)
    return Error("string table does not start with a NUL byte", m.header.strtab_offset);
  const uint8_t* strtab = m.data.data() + m.header.strtab_offset;
  report.strings = static_cast<uint64_t>(std::count(strtab, strtab + m.header.strtab_size, 0));
  for (uint32_t i = 0; i < m.num_files; ++i) {
    uint64_t dir, base;
    (void)m.file_offsets(i, dir, base);
    const uint64_t at = m.file_entry_offset(i);
    if (i == 0 && (dir != 0 || base != 0))
      return Error("file[0] is not the empty entry", at);
    if (dir >= m.header.strtab_size || base >= m.header.strtab_size)
      return Error("file[" + std::to_string(i) + "] string offset is past the string table", at);
  }
  const DecodeContext ctx = m.decode_context(true, &report);
  for (size_t i = 0; i < m.header.num_addresses; ++i) {
    const uint64_t start = m.function_start(i);
    auto prefix = [&](const Error& e) {
      return Error("function[" + std::to_string(i) + "] at " + hex_number(start) + ": " +
                       e.message,
                   e.offset);
    };
    if (i > 0 && m.addr_offset(i) < m.addr_offset(i - 1))
      return prefix(Error("address table is not sorted", m.addr_table + i * m.header.addr_off_size));
    auto fn = m.decode_record(m.cursor_at(m.info_offset(i)), start, 0, ctx);
    if (!fn) return prefix(fn.error());
  }
  return report;
}

}  // namespace gsym
