// gsym/reader.cpp - GSYM version 1 reader: layout checks at open time, streaming
// lookups straight from the bytes, full decode and verify.
#include "gsym/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "gsym/data_cursor.h"
#include "gsym/file_io.h"

namespace gsym {

using detail::DataCursor;

namespace {

constexpr uint32_t kMagic = 0x4753594D;
constexpr uint32_t kMagicSwapped = 0x4D595347;
constexpr size_t kHeaderSize = 48;

enum InfoType : uint32_t {
  kEndOfList = 0,
  kLineTableInfo = 1,
  kInlineInfo = 2,
  kMergedFunctionsInfo = 3,
  kCallSiteInfo = 4,
};

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

// An Error for a cursor that failed while reading `what`.
Error cursor_error(const DataCursor& c, const char* what) {
  if (c.failure() == DataCursor::Failure::LebTooLong)
    return Error(std::string(what) + ": LEB128 value longer than 10 bytes or over 64 bits",
                 c.failure_offset());
  return Error(std::string(what) + " is truncated", c.failure_offset());
}

// Line-table header and state machine shared by lookup and decode.
struct LineProgram {
  int64_t min_delta = 0;
  uint64_t range = 1;  // special-opcode line range, clamped to 256 (ops are < 252)
  uint64_t addr = 0;
  uint32_t file = 1;
  uint32_t line = 0;

  // Reads MinDelta, MaxDelta and FirstLine.
  Status start(DataCursor& c, uint64_t func_start) {
    min_delta = c.sleb();
    const int64_t max_delta = c.sleb();
    line = static_cast<uint32_t>(c.uleb());
    if (!c.ok()) return cursor_error(c, "line table header");
    if (max_delta < min_delta)
      return Error("line table MaxDelta " + std::to_string(max_delta) + " < MinDelta " +
                       std::to_string(min_delta),
                   c.offset());
    const uint64_t span = static_cast<uint64_t>(max_delta) - static_cast<uint64_t>(min_delta);
    range = span >= 255 ? 256 : span + 1;
    addr = func_start;
    file = 1;
    return {};
  }

  enum class Step : uint8_t { Row, NoRow, End, Bad };

  // Executes one opcode; Row means a row (addr, file, line) was emitted.
  Step step(DataCursor& c) {
    const uint8_t op = c.u8();
    if (!c.ok()) return Step::Bad;
    switch (op) {
      case 0x00:
        return Step::End;
      case 0x01:
        file = static_cast<uint32_t>(c.uleb());
        return c.ok() ? Step::NoRow : Step::Bad;
      case 0x02:
        addr += c.uleb();
        return c.ok() ? Step::Row : Step::Bad;
      case 0x03:
        line += static_cast<uint32_t>(c.sleb());
        return c.ok() ? Step::NoRow : Step::Bad;
      default: {
        const uint64_t adj = op - 4u;
        line += static_cast<uint32_t>(min_delta + static_cast<int64_t>(adj % range));
        addr += adj / range;
        return Step::Row;
      }
    }
  }
};

Error line_program_error(const DataCursor& c) {
  if (c.failure() == DataCursor::Failure::LebTooLong) return cursor_error(c, "line table");
  return Error("line table: EOF found before EndSequence", c.failure_offset());
}

// AddressRanges semantics (LLVM): empty ranges dropped, overlapping and
// touching ranges merged, sorted by start.
std::vector<AddressRange> normalize_ranges(std::vector<AddressRange> in) {
  std::sort(in.begin(), in.end());
  std::vector<AddressRange> out;
  for (const AddressRange& r : in) {
    if (r.end <= r.start) continue;
    if (!out.empty() && r.start <= out.back().end)
      out.back().end = std::max(out.back().end, r.end);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace

namespace {

// Raw-pointer LEB128 readers for the hot loop; false on truncation or more
// than 10 bytes (the caller then reruns the checked decoder for the error).
inline bool fast_uleb(const uint8_t*& p, const uint8_t* end, uint64_t& out) {
  if (p < end && *p < 0x80) {
    out = *p++;
    return true;
  }
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      out = v;
      return shift < 63 || (b & 0x7f) <= 1;
    }
  }
  return false;
}

inline bool fast_sleb(const uint8_t*& p, const uint8_t* end, int64_t& out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (shift == 63 && (b & 0x7f) != 0 && (b & 0x7f) != 0x7f) return false;
      if (shift + 7 < 64 && (b & 0x40)) v |= ~uint64_t{0} << (shift + 7);
      out = static_cast<int64_t>(v);
      return true;
    }
  }
  return false;
}

struct LineHeader {
  int64_t min_delta = 0;
  uint64_t range = 1;
  uint32_t first_line = 0;
};

inline bool fast_line_header(const uint8_t*& p, const uint8_t* end, LineHeader& h) {
  int64_t max_delta;
  uint64_t first;
  if (!fast_sleb(p, end, h.min_delta) || !fast_sleb(p, end, max_delta) ||
      !fast_uleb(p, end, first) || max_delta < h.min_delta)
    return false;
  const uint64_t span = static_cast<uint64_t>(max_delta) - static_cast<uint64_t>(h.min_delta);
  h.range = span >= 255 ? 256 : span + 1;
  h.first_line = static_cast<uint32_t>(first);
  return true;
}

// Runs the line program from `p` with the given state. For every emitted row
// calls on_row(addr, file, line, position after the opcode); stops when it
// returns false (true result) or at EndSequence (true). Returns false when
// the program is malformed: the checked decoder then produces the exact error.
template <class OnRow>
inline bool run_line_program(const uint8_t* p, const uint8_t* end, const LineHeader& h,
                             uint64_t row_addr, uint32_t file, uint32_t line, OnRow&& on_row) {
  while (p < end) {
    const uint8_t op = *p++;
    if (op >= 4) {
      const uint64_t adj = op - 4u;
      line += static_cast<uint32_t>(h.min_delta + static_cast<int64_t>(adj % h.range));
      row_addr += adj / h.range;
    } else if (op == 0) {
      return true;
    } else if (op == 1) {
      uint64_t v;
      if (!fast_uleb(p, end, v)) return false;
      file = static_cast<uint32_t>(v);
      continue;
    } else if (op == 2) {
      uint64_t v;
      if (!fast_uleb(p, end, v)) return false;
      row_addr += v;
    } else {
      int64_t v;
      if (!fast_sleb(p, end, v)) return false;
      line += static_cast<uint32_t>(v);
      continue;
    }
    if (!on_row(row_addr, file, line, p)) return true;
  }
  return false;  // no EndSequence
}

}  // namespace

void LookupScratch::reserve(size_t inline_depth) {
  frames.reserve(inline_depth + 1);
  inline_chain.reserve(inline_depth + 1);
}

struct Reader::Impl {
  std::vector<uint8_t> owned;
  void* map_base = nullptr;
  size_t map_size = 0;

  std::span<const uint8_t> data;
  Header header;
  bool swap = false;
  uint64_t addr_table = 0;   // offset of the address-offsets table
  uint64_t info_table = 0;   // offset of the address-info offsets
  uint64_t file_table = 0;   // offset of the first file entry (after the count)
  uint32_t num_files = 0;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (map_base) munmap(map_base, map_size);
  }

  // --- raw accessors (offsets validated by parse) ---
  uint32_t u32_at(uint64_t off) const {
    uint32_t v;
    std::memcpy(&v, data.data() + off, 4);
    return swap ? __builtin_bswap32(v) : v;
  }
  uint64_t addr_offset(size_t i) const {
    const uint8_t* p = data.data() + addr_table + i * header.addr_off_size;
    switch (header.addr_off_size) {
      case 1:
        return *p;
      case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return swap ? __builtin_bswap16(v) : v;
      }
      case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return swap ? __builtin_bswap32(v) : v;
      }
      default: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return swap ? __builtin_bswap64(v) : v;
      }
    }
  }
  uint64_t function_start(size_t i) const { return header.base_address + addr_offset(i); }
  uint32_t info_offset(size_t i) const { return u32_at(info_table + 4 * i); }
  uint32_t function_size(size_t i) const { return u32_at(info_offset(i)); }

  std::string_view string(uint64_t off) const {
    if (off >= header.strtab_size) return {};
    const char* begin = reinterpret_cast<const char*>(data.data()) + header.strtab_offset + off;
    const size_t max = header.strtab_size - off;
    const void* nul = std::memchr(begin, 0, max);
    return {begin, nul ? static_cast<size_t>(static_cast<const char*>(nul) - begin) : max};
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
      uint32_t dir = 0, base = 0;
      file_offsets(i, dir, base);
      file_strings[i] = {string(dir), string(base), dir == 0 && base == 0};
    }
  }
  // File entry string offsets, or false when the index is out of range.
  bool file_offsets(uint32_t index, uint32_t& dir, uint32_t& base) const {
    if (index >= num_files) return false;
    dir = u32_at(file_table + 8ull * index);
    base = u32_at(file_table + 8ull * index + 4);
    return true;
  }

  DataCursor cursor_at(uint64_t off) const {
    return DataCursor(data.data() + off, data.data() + data.size(), off, swap);
  }

  Status parse_layout();
  int64_t find_function(uint64_t addr) const;
  Expected<bool> lookup(uint64_t addr, const LookupOptions& options, LookupScratch& s) const;
  Status line_lookup(DataCursor c, int64_t index, uint64_t func_start, uint64_t addr,
                     uint32_t& file, uint32_t& line) const;
  void build_line_checkpoints();
  // Open-time index over the address table: for addresses bucketed by their
  // high bits, the first table entry of each bucket, so a lookup binary-
  // searches a few entries instead of the whole table (fewer cache misses
  // when lookups jump between functions). Only for sorted tables.
  std::vector<uint32_t> bucket_first;  // size buckets + 1; empty = no index
  unsigned bucket_shift = 0;
  void build_address_buckets();
  // The payload of function i's only record of `type`, or nullopt when it has
  // none, several, or a malformed record list (the plain path reports those).
  std::optional<DataCursor> single_record(uint64_t i, uint32_t type) const;

  // Acceleration built at open: for functions with long line programs, the
  // decoder state every ~kCheckpointBytes of program, so a lookup resumes
  // near its address instead of at the function start. Immutable afterwards.
  struct LineCheckpoint {
    uint64_t addr;    // address of the row just emitted
    uint64_t offset;  // absolute offset of the next opcode
    uint32_t file;
    uint32_t line;
  };
  static constexpr size_t kCheckpointBytes = 48;
  std::vector<LineCheckpoint> checkpoints;
  std::vector<uint32_t> checkpoint_begin;  // per function, size n+1; empty = none
  Status inline_walk(DataCursor c, int64_t index, uint64_t func_start, uint64_t addr,
                     LookupScratch& s) const;
  void build_inline_skips();

  // Acceleration built at open: for inline subtrees of at least
  // kSkipMinBytes, where the children start and where the subtree ends, so a
  // lookup steps over a non-containing subtree without decoding it.
  struct InlineSkip {
    uint64_t children_start;  // absolute offset of the first child
    uint64_t end;             // absolute offset after the children's terminator
    uint64_t node = 0;        // absolute offset of the node these children belong to
    // Children's ranges sorted by start, when they are pairwise disjoint
    // (then at most one child holds an address): [table_begin, +table_count).
    uint32_t table_begin = 0;
    uint32_t table_count = 0;
  };
  struct ChildRange {
    uint64_t start;
    uint64_t end;
    uint64_t child;  // absolute offset of the child node
    // The child's own InlineSkip (index into `skips`), so a descent needs no
    // search per level; kNoSkip = the child has none.
    uint32_t child_skip = kNoSkip;
  };
  static constexpr uint32_t kNoSkip = UINT32_MAX;
  static constexpr size_t kChildTableMin = 4;
  std::vector<ChildRange> child_ranges;
  // child_ranges[i].start, packed: the binary search over a big node's
  // children touches a quarter of the cache lines.
  std::vector<uint64_t> child_starts;
  static constexpr uint64_t kSkipMinBytes = 16;
  std::vector<InlineSkip> skips;
  std::vector<uint32_t> skip_begin;  // per function, size n+1; empty = none
  const InlineSkip* find_skip(int64_t index, uint64_t children_start) const {
    if (skip_begin.empty()) return nullptr;
    const InlineSkip* first = skips.data() + skip_begin[index];
    const InlineSkip* last = skips.data() + skip_begin[index + 1];
    // The root's children come first: its skip, if any, is the first one.
    if (first != last && first->children_start == children_start) return first;
    const InlineSkip* it = std::lower_bound(
        first, last, children_start,
        [](const InlineSkip& k, uint64_t off) { return k.children_start < off; });
    return it != last && it->children_start == children_start ? it : nullptr;
  }

  // Full decode; `strict` adds verify's reference checks, `report` counts.
  struct DecodeContext {
    bool strict = false;
    VerifyReport* report = nullptr;
  };
  Expected<Function> decode_record(DataCursor c, uint64_t start, size_t merged_depth,
                                   const DecodeContext& ctx) const;
  Status decode_line_table(DataCursor c, uint64_t start, std::vector<LineEntry>& rows,
                           const DecodeContext& ctx) const;
  Expected<std::optional<InlineNode>> decode_inline(DataCursor& c, uint64_t base, size_t depth,
                                                    const std::vector<AddressRange>* parent,
                                                    const DecodeContext& ctx) const;
  Status check_string(uint64_t off, uint64_t at, const DecodeContext& ctx) const {
    if (ctx.strict && off >= header.strtab_size)
      return Error("string offset " + hex(off) + " is past the string table (size " +
                       hex(header.strtab_size) + ")",
                   at);
    return {};
  }
  Status check_file(uint64_t index, uint64_t at, const DecodeContext& ctx) const {
    if (ctx.strict && index >= num_files)
      return Error("file index " + std::to_string(index) + " is past the file table (" +
                       std::to_string(num_files) + " files)",
                   at);
    return {};
  }
};

// ---------------------------------------------------------------------------
// Opening

Status Reader::Impl::parse_layout() {
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
  if (header.version != 1)
    return Error("unsupported GSYM version " + std::to_string(header.version), 4);
  if (size < kHeaderSize) return Error("not enough data for a GSYM header", 0);
  header.endian = (swap == (std::endian::native == std::endian::little)) ? Endian::Big
                                                                          : Endian::Little;
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
  if (header.uuid_size > 20)
    return Error("invalid UUID size " + std::to_string(header.uuid_size), 7);

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
  if (uint64_t{header.strtab_offset} + header.strtab_size > size)
    return Error("string table [" + hex(header.strtab_offset) + ", " +
                     hex(uint64_t{header.strtab_offset} + header.strtab_size) +
                     ") extends past the end of the file",
                 20);
  // Every record must at least hold its Size and Name, so lookups can read
  // them without checks.
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t off = info_offset(i);
    if (off > size || size - off < 8)
      return Error("function info " + std::to_string(i) + " offset " + hex(off) +
                       " is past the end of the file",
                   info_table + 4 * i);
  }
  build_line_checkpoints();
  build_inline_skips();
  build_address_buckets();
  build_file_strings();
  return {};
}

void Reader::Impl::build_address_buckets() {
  const uint64_t n = header.num_addresses;
  if (n < 64 || n >= UINT32_MAX) return;
  for (uint64_t i = 1; i < n; ++i)
    if (addr_offset(i) < addr_offset(i - 1)) return;  // unsorted: plain search only
  const uint64_t max_rel = addr_offset(n - 1);
  unsigned shift = 0;
  while (shift < 63 && (max_rel >> shift) + 1 > n) ++shift;  // about one entry per bucket
  const uint64_t buckets = (max_rel >> shift) + 1;
  bucket_first.resize(buckets + 1);
  uint64_t i = 0;
  for (uint64_t b = 0; b <= buckets; ++b) {
    while (i < n && (addr_offset(i) >> shift) < b) ++i;
    bucket_first[b] = static_cast<uint32_t>(i);
  }
  bucket_shift = shift;
}

std::optional<DataCursor> Reader::Impl::single_record(uint64_t i, uint32_t type) const {
  DataCursor c = cursor_at(info_offset(i));
  c.skip(8);
  std::optional<DataCursor> found;
  int count = 0;
  while (c.ok()) {
    const uint32_t record_type = c.u32();
    const uint32_t length = c.u32();
    if (!c.ok() || length > c.remaining()) break;
    DataCursor payload = c.sub(length);
    if (record_type == kEndOfList) break;
    if (record_type == type) {
      found = payload;
      ++count;
    }
  }
  if (count != 1) return std::nullopt;
  return found;
}

// Only well-formed programs with a single line table record get checkpoints;
// anything unusual keeps the plain path (and its exact errors).
void Reader::Impl::build_line_checkpoints() {
  const uint64_t n = header.num_addresses;
  std::vector<uint32_t> begin(n + 1, 0);
  for (uint64_t i = 0; i < n; ++i) {
    begin[i] = static_cast<uint32_t>(checkpoints.size());
    std::optional<DataCursor> found = single_record(i, kLineTableInfo);
    if (!found || found->remaining() < 2 * kCheckpointBytes) continue;
    DataCursor line_data = *found;
    const size_t mark = checkpoints.size();
    const uint8_t* p = line_data.position();
    const uint8_t* const program_start = p;
    LineHeader h;
    if (!fast_line_header(p, line_data.end(), h)) continue;
    const uint8_t* last = p;
    const bool ok = run_line_program(
        p, line_data.end(), h, function_start(i), 1, h.first_line,
        [&](uint64_t a, uint32_t f, uint32_t l, const uint8_t* at) {
          if (static_cast<size_t>(at - last) >= kCheckpointBytes) {
            checkpoints.push_back(
                {a, line_data.offset() + static_cast<uint64_t>(at - program_start), f, l});
            last = at;
          }
          return true;
        });
    // Rows must be in address order for the binary search over checkpoints.
    bool sorted = ok;
    for (size_t k = mark + 1; sorted && k < checkpoints.size(); ++k)
      sorted = checkpoints[k - 1].addr <= checkpoints[k].addr;
    if (!sorted || checkpoints.size() - mark > UINT32_MAX) checkpoints.resize(mark);
    if (checkpoints.size() > UINT32_MAX) {
      checkpoints.clear();
      return;
    }
  }
  begin[n] = static_cast<uint32_t>(checkpoints.size());
  if (!checkpoints.empty()) {
    checkpoints.shrink_to_fit();
    checkpoint_begin = std::move(begin);
  }
}

// Mirrors the lookup's skip rules (a raw range count of 0 ends a sibling
// list). Only well-formed trees within the depth limit are indexed, so the
// plain path still reports every error.
void Reader::Impl::build_inline_skips() {
  const uint64_t n = header.num_addresses;
  std::vector<uint32_t> begin(n + 1, 0);
  for (uint64_t i = 0; i < n; ++i) {
    begin[i] = static_cast<uint32_t>(skips.size());
    std::optional<DataCursor> found = single_record(i, kInlineInfo);
    if (!found || found->remaining() < 2 * kSkipMinBytes) continue;
    DataCursor tree = *found;
    const size_t mark = skips.size();
    const size_t table_mark = child_ranges.size();
    struct Level {
      uint64_t node;  // the parent node's offset
      uint64_t children_start;
      uint64_t base;        // children's ranges are relative to this
      size_t pending_mark;  // where this level's children start in `pending`
      bool disjoint_ok;     // every child has a non-empty, non-wrapping range
    };
    std::vector<Level> open;
    std::vector<ChildRange> pending;
    bool ok = true;
    uint64_t base = function_start(i);
    do {
      const uint64_t node_at = tree.offset();
      const uint64_t num_ranges = tree.uleb();
      if (!tree.ok()) {
        ok = false;
        break;
      }
      if (num_ranges == 0) {
        if (open.empty()) break;
        Level& level = open.back();
        const uint64_t end = tree.offset();
        InlineSkip skip{level.children_start, end, level.node};
        auto first = pending.begin() + static_cast<ptrdiff_t>(level.pending_mark);
        const size_t count = static_cast<size_t>(pending.end() - first);
        if (level.disjoint_ok && count >= kChildTableMin) {
          std::sort(first, pending.end(),
                    [](const ChildRange& a, const ChildRange& b) { return a.start < b.start; });
          bool disjoint = true;
          for (auto it = first + 1; disjoint && it < pending.end(); ++it)
            disjoint = it->start >= (it - 1)->end;
          if (disjoint && child_ranges.size() + count <= UINT32_MAX) {
            skip.table_begin = static_cast<uint32_t>(child_ranges.size());
            skip.table_count = static_cast<uint32_t>(count);
            child_ranges.insert(child_ranges.end(), first, pending.end());
          }
        }
        if (end - level.children_start >= kSkipMinBytes || skip.table_count)
          skips.push_back(skip);
        pending.resize(level.pending_mark);
        open.pop_back();
        continue;
      }
      if (!open.empty()) base = open.back().base;
      uint64_t first_start = UINT64_MAX;
      bool any = false, wraps = false;
      const size_t before = pending.size();
      for (uint64_t r = 0; r < num_ranges && tree.ok(); ++r) {
        const uint64_t start = base + tree.uleb();
        const uint64_t size = tree.uleb();
        if (size == 0) continue;
        any = true;
        wraps |= start + size < start;
        first_start = std::min(first_start, start);
        if (!open.empty()) pending.push_back({start, start + size, node_at});
      }
      const bool kids = tree.u8() != 0;
      tree.u32();
      tree.uleb();
      tree.uleb();
      if (!tree.ok() || (kids && open.size() + 2 >= kMaxInlineDepth)) {
        ok = false;
        break;
      }
      // A child whose ranges are all empty ends its sibling list in LLVM's
      // walk; the table cannot express that, so that level gets none.
      if (!open.empty() && (!any || wraps)) {
        open.back().disjoint_ok = false;
        pending.resize(before);
      }
      if (!any && open.empty()) break;
      if (kids) open.push_back({node_at, tree.offset(), first_start, pending.size(), any});
    } while (!open.empty());
    if (!ok || skips.size() > UINT32_MAX) {
      skips.resize(mark);
      child_ranges.resize(table_mark);
      continue;
    }
    std::sort(skips.begin() + static_cast<ptrdiff_t>(mark), skips.end(),
              [](const InlineSkip& a, const InlineSkip& b) { return a.children_start < b.children_start; });
    // Link each table entry to its child's skip. A node's header precedes its
    // children, so node offsets ascend with children_start.
    for (size_t t = table_mark; t < child_ranges.size(); ++t) {
      auto it = std::lower_bound(skips.begin() + static_cast<ptrdiff_t>(mark), skips.end(),
                                 child_ranges[t].child,
                                 [](const InlineSkip& k, uint64_t node) { return k.node < node; });
      if (it != skips.end() && it->node == child_ranges[t].child)
        child_ranges[t].child_skip = static_cast<uint32_t>(it - skips.begin());
    }
  }
  begin[n] = static_cast<uint32_t>(skips.size());
  if (!skips.empty()) {
    skips.shrink_to_fit();
    child_ranges.shrink_to_fit();
    child_starts.resize(child_ranges.size());
    for (size_t i = 0; i < child_ranges.size(); ++i) child_starts[i] = child_ranges[i].start;
    skip_begin = std::move(begin);
  }
}

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

Expected<Reader> Reader::parse(std::span<const uint8_t> bytes) {
  auto impl = std::make_unique<Impl>();
  impl->data = bytes;
  if (Status st = impl->parse_layout(); !st) return st.error();
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

Expected<Reader> Reader::from_descriptor(int fd, Load load) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Error(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Error("not a regular file");
  auto impl = std::make_unique<Impl>();
  if (load == Load::Read) {
    Expected<std::vector<uint8_t>> bytes = read_descriptor(fd, UINT64_MAX, "file");
    if (!bytes) {
      std::string message = bytes.error().message;
      if (message.starts_with("file: ")) message.erase(0, 6);
      return Error(message);
    }
    impl->owned = std::move(*bytes);
    impl->data = impl->owned;
  } else if (st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return Error(std::string("cannot map: ") + std::strerror(errno));
    impl->map_base = p;
    impl->map_size = static_cast<size_t>(st.st_size);
    impl->data = {static_cast<const uint8_t*>(p), impl->map_size};
  }
  if (Status s = impl->parse_layout(); !s) return s.error();
  return Reader(std::move(impl));
}

// ---------------------------------------------------------------------------
// Accessors

const Header& Reader::header() const { return impl_->header; }
std::span<const uint8_t> Reader::build_id() const {
  return {impl_->header.uuid, impl_->header.uuid_size};
}
std::span<const uint8_t> Reader::bytes() const { return impl_->data; }
size_t Reader::function_count() const { return impl_->header.num_addresses; }
uint64_t Reader::function_start(size_t index) const { return impl_->function_start(index); }
std::string_view Reader::string(uint32_t offset) const { return impl_->string(offset); }
size_t Reader::file_count() const { return impl_->num_files; }

Expected<std::pair<std::string_view, std::string_view>> Reader::file(uint32_t index) const {
  uint32_t dir, base;
  if (!impl_->file_offsets(index, dir, base))
    return Error("failed to extract file[" + std::to_string(index) + "]");
  return std::pair{impl_->string(dir), impl_->string(base)};
}

Expected<std::vector<FileEntry>> Reader::decode_files() const {
  std::vector<FileEntry> files;
  files.reserve(impl_->num_files);
  for (uint32_t i = 0; i < impl_->num_files; ++i) {
    uint32_t dir, base;
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
  // The entries to search: all, or the bucket of `rel` (entries before it are
  // all below rel, entries after it all above).
  uint64_t lo = 0, count = n;
  if (!bucket_first.empty()) {
    const uint64_t b = rel >> bucket_shift;
    const uint64_t buckets = bucket_first.size() - 1;
    if (b >= buckets) {
      lo = n - 1;
      count = 1;
    } else {
      lo = bucket_first[b];
      count = bucket_first[b + 1] - lo;
    }
  }
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

// Streams the line program up to the first row past `addr`; the last row at
// or before it wins (LLVM >= 18).
Status Reader::Impl::line_lookup(DataCursor c, int64_t index, uint64_t func_start,
                                 uint64_t addr, uint32_t& file, uint32_t& line) const {
  // Fast path: resume from the last checkpoint at or before addr (if this
  // function has any), else run from the start.
  const uint8_t* p = c.position();
  LineHeader h;
  if (fast_line_header(p, c.end(), h)) {
    bool found = false;
    uint64_t row_addr = func_start;
    uint32_t row_file = 1, row_line = h.first_line;
    if (index >= 0 && !checkpoint_begin.empty()) {
      const LineCheckpoint* first = checkpoints.data() + checkpoint_begin[index];
      const LineCheckpoint* last = checkpoints.data() + checkpoint_begin[index + 1];
      const LineCheckpoint* it = std::upper_bound(
          first, last, addr, [](uint64_t a, const LineCheckpoint& cp) { return a < cp.addr; });
      if (it != first) {
        --it;
        found = true;
        row_addr = it->addr;
        row_file = file = it->file;
        row_line = line = it->line;
        p = data.data() + it->offset;
      }
    }
    const bool ok = run_line_program(
        p, c.end(), h, row_addr, row_file, row_line,
        [&](uint64_t a, uint32_t f, uint32_t l, const uint8_t*) {
          if (addr < a) return false;
          found = true;
          file = f;
          line = l;
          return true;
        });
    if (ok) {
      if (!found || file == 0) return Error("address " + hex(addr) + " is not in the line table");
      return {};
    }
  }
  LineProgram lp;
  if (Status st = lp.start(c, func_start); !st) return st;
  bool found = false;
  while (true) {
    const LineProgram::Step step = lp.step(c);
    if (step == LineProgram::Step::Row) {
      if (addr < lp.addr) break;
      file = lp.file;
      line = lp.line;
      found = true;
    } else if (step == LineProgram::Step::End) {
      break;
    } else if (step == LineProgram::Step::Bad) {
      return line_program_error(c);
    }
  }
  if (!found || file == 0) return Error("address " + hex(addr) + " is not in the line table");
  return {};
}

// Walks the inline tree to the deepest node containing `addr`, skipping
// non-containing subtrees without building anything. Fills s.inline_chain
// (root first). Mirrors LLVM: the first containing sibling wins, a node whose
// ranges are all empty ends its sibling list.
Status Reader::Impl::inline_walk(DataCursor c, int64_t index, uint64_t func_start,
                                 uint64_t addr, LookupScratch& s) const {
  uint64_t base = func_start;
  bool at_root = true;
  // Set when a child table led here: this node's skip, known without a search.
  const InlineSkip* linked_skip = nullptr;
  bool linked = false;
  while (true) {
    const bool came_linked = linked;
    linked = false;
    const uint64_t num_ranges = c.uleb();
    if (!c.ok()) return cursor_error(c, "InlineInfo");
    if (num_ranges == 0) return {};
    bool contains = false, any = false;
    uint64_t first_start = UINT64_MAX;
    for (uint64_t r = 0; r < num_ranges; ++r) {
      const uint64_t start = base + c.uleb();
      const uint64_t size = c.uleb();
      if (!c.ok()) return cursor_error(c, "InlineInfo ranges");
      if (size == 0) continue;
      any = true;
      first_start = std::min(first_start, start);
      if (addr >= start && addr - start < size && start + size > start) contains = true;
    }
    if (!any) return {};
    const bool has_children = c.u8() != 0;
    const uint32_t name = c.u32();
    const uint64_t call_file = c.uleb();
    const uint64_t call_line = c.uleb();
    if (!c.ok()) return cursor_error(c, "InlineInfo");
    if (!contains) {
      if (at_root) return {};
      if (has_children) {
        if (const InlineSkip* k = find_skip(index, c.offset())) {
          c.skip(k->end - c.offset());
          continue;  // next sibling
        }
      }
      if (has_children) {
        // Skip the whole subtree: count open sibling lists (LLVM ends a list at
        // a raw range count of 0).
        size_t open = 1;
        while (open > 0) {
          const uint64_t n = c.uleb();
          if (!c.ok()) return cursor_error(c, "InlineInfo");
          if (n == 0) {
            --open;
            continue;
          }
          for (uint64_t r = 0; r < 2 * n && c.ok(); ++r) c.uleb();
          const bool kids = c.u8() != 0;
          c.u32();
          c.uleb();
          c.uleb();
          if (!c.ok()) return cursor_error(c, "InlineInfo");
          if (kids && ++open + s.inline_chain.size() > kMaxInlineDepth)
            return Error("InlineInfo nested deeper than " + std::to_string(kMaxInlineDepth),
                         c.offset());
        }
      }
      continue;  // next sibling
    }
    if (s.inline_chain.size() >= kMaxInlineDepth)
      return Error("InlineInfo nested deeper than " + std::to_string(kMaxInlineDepth), c.offset());
    s.inline_chain.push_back({name, static_cast<uint32_t>(call_file),
                              static_cast<uint32_t>(call_line), first_start});
    if (!has_children) return {};
    base = first_start;
    at_root = false;
    const InlineSkip* k = came_linked ? linked_skip : find_skip(index, c.offset());
    if (k && k->table_count) {
      // Jump straight to the one child holding addr, or stop: none does.
      const uint64_t* first = child_starts.data() + k->table_begin;
      const uint64_t* it = std::upper_bound(first, first + k->table_count, addr);
      if (it == first) return {};
      const ChildRange& hit = child_ranges[static_cast<size_t>(it - 1 - child_starts.data())];
      if (addr >= hit.end) return {};
      c.skip(hit.child - c.offset());
      linked = true;
      linked_skip = hit.child_skip == kNoSkip ? nullptr : skips.data() + hit.child_skip;
    }
  }
}

Expected<bool> Reader::Impl::lookup(uint64_t addr, const LookupOptions& options,
                                    LookupScratch& s) const {
  s.frames.clear();
  s.inline_chain.clear();
  const int64_t index = find_function(addr);
  if (index < 0) return false;
  const uint64_t start = function_start(static_cast<size_t>(index));
  const uint64_t rec = info_offset(static_cast<size_t>(index));
  DataCursor c = cursor_at(rec);
  c.u32();  // size, already checked by find_function
  const uint32_t name = c.u32();
  if (name == 0) return Error("invalid FunctionInfo Name value 0x00000000", rec + 4);

  bool have_line_table = false, have_row = false;
  uint32_t row_file = 0, row_line = 0;
  DataCursor inline_data;
  bool have_inline = false;
  while (true) {
    const uint32_t type = c.u32();
    const uint32_t length = c.u32();
    if (!c.ok() || length > c.remaining())
      return Error("FunctionInfo data is truncated", c.ok() ? c.offset() - 8 : c.failure_offset());
    DataCursor payload = c.sub(length);
    if (type == kEndOfList) break;
    if (type == kLineTableInfo) {
      have_line_table = true;
      if (options.line_information) {
        if (Status st = line_lookup(payload, index, start, addr, row_file, row_line); !st)
          return st.error();
        have_row = true;
      }
    } else if (type == kInlineInfo) {
      inline_data = payload;
      have_inline = true;
    }
    // Other types (merged functions, call sites, unknown) do not affect lookup.
  }

  LookupFrame first;
  first.name = string(name);
  first.offset = static_cast<uint32_t>(addr - start);  // LLVM's Offset is 32-bit
  if (have_row) {
    if (row_file >= file_strings.size())
      return Error("failed to extract file[" + std::to_string(row_file) + "]");
    first.directory = file_strings[row_file].directory;
    first.basename = file_strings[row_file].basename;
    first.line = row_line;
  }
  s.frames.push_back(first);
  // LLVM consults inline info only when the function has a line table.
  if (have_line_table && have_inline && options.inline_frames) {
    if (Status st = inline_walk(inline_data, index, start, addr, s); !st) return st.error();
    for (size_t k = s.inline_chain.size(); k-- > 0;) {
      const LookupScratch::InlineStep& step = s.inline_chain[k];
      if (step.call_file >= file_strings.size())
        return Error("failed to extract file[" + std::to_string(step.call_file) + "]");
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
  }
  for (size_t k = 0; k + 1 < s.frames.size(); ++k) s.frames[k].inlined = true;
  return true;
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

Status Reader::Impl::decode_line_table(DataCursor c, uint64_t start, std::vector<LineEntry>& rows,
                                       const DecodeContext& ctx) const {
  LineProgram lp;
  if (Status st = lp.start(c, start); !st) return st;
  while (true) {
    const uint64_t at = c.offset();
    const LineProgram::Step step = lp.step(c);
    if (step == LineProgram::Step::End) return {};
    if (step == LineProgram::Step::Bad) return line_program_error(c);
    if (step != LineProgram::Step::Row) continue;
    if (ctx.strict) {
      if (Status st = check_file(lp.file, at, ctx); !st) return st;
      if (lp.addr < start || (!rows.empty() && lp.addr < rows.back().address))
        return Error("line table address " + hex(lp.addr) + " wraps around", at);
    }
    rows.push_back({lp.addr, lp.file, lp.line});
  }
}

Expected<std::optional<InlineNode>> Reader::Impl::decode_inline(
    DataCursor& c, uint64_t base, size_t depth, const std::vector<AddressRange>* parent,
    const DecodeContext& ctx) const {
  if (depth >= kMaxInlineDepth)
    return Error("InlineInfo nested deeper than " + std::to_string(kMaxInlineDepth), c.offset());
  const uint64_t at = c.offset();
  const uint64_t num_ranges = c.uleb();
  if (!c.ok()) return cursor_error(c, "InlineInfo");
  // Each range takes at least two bytes: refuse counts the data cannot hold
  // before allocating anything.
  if (num_ranges > c.remaining() / 2)
    return Error("InlineInfo range count " + std::to_string(num_ranges) + " exceeds the data", at);
  std::vector<AddressRange> raw;
  raw.reserve(num_ranges);
  for (uint64_t r = 0; r < num_ranges; ++r) {
    const uint64_t start = base + c.uleb();
    const uint64_t size = c.uleb();
    if (!c.ok()) return cursor_error(c, "InlineInfo ranges");
    if (ctx.strict && size != 0 && start + size < start)
      return Error("InlineInfo range wraps around", at);
    raw.push_back({start, start + size});
  }
  std::vector<AddressRange> ranges = normalize_ranges(std::move(raw));
  if (ranges.empty()) return std::optional<InlineNode>();  // ends a sibling list
  if (ctx.strict && parent) {
    for (const AddressRange& r : ranges) {
      const bool inside = std::any_of(parent->begin(), parent->end(),
                                      [&](const AddressRange& p) { return p.contains(r); });
      if (!inside)
        return Error("InlineInfo range [" + hex(r.start) + ", " + hex(r.end) +
                         ") is not inside its parent's ranges",
                     at);
    }
  }
  InlineNode node;
  node.ranges = std::move(ranges);
  const bool has_children = c.u8() != 0;
  const uint64_t name_at = c.offset();
  const uint32_t name = c.u32();
  const uint64_t file_at = c.offset();
  const uint64_t call_file = c.uleb();
  node.call_line = static_cast<uint32_t>(c.uleb());
  if (!c.ok()) return cursor_error(c, "InlineInfo");
  if (Status st = check_string(name, name_at, ctx); !st) return st.error();
  if (Status st = check_file(call_file, file_at, ctx); !st) return st.error();
  node.name = std::string(string(name));
  node.call_file = static_cast<uint32_t>(call_file);
  if (ctx.report) ++ctx.report->inline_nodes;
  if (has_children) {
    const uint64_t child_base = node.ranges.front().start;
    while (true) {
      auto child = decode_inline(c, child_base, depth + 1, &node.ranges, ctx);
      if (!child) return child.error();
      if (!*child) break;
      node.children.push_back(std::move(**child));
    }
  }
  return std::optional<InlineNode>(std::move(node));
}

Expected<Function> Reader::Impl::decode_record(DataCursor c, uint64_t start, size_t merged_depth,
                                               const DecodeContext& ctx) const {
  const uint64_t rec = c.offset();
  const uint32_t size = c.u32();
  const uint32_t name = c.u32();
  if (!c.ok()) return Error("FunctionInfo data is truncated", c.failure_offset());
  if (name == 0) return Error("invalid FunctionInfo Name value 0x00000000", rec + 4);
  if (Status st = check_string(name, rec + 4, ctx); !st) return st.error();
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
    switch (type) {
      case kEndOfList:
        return fn;
      case kLineTableInfo:
        fn.lines.clear();
        if (Status st = decode_line_table(payload, start, fn.lines, ctx); !st) return st.error();
        if (ctx.report) ctx.report->line_rows += fn.lines.size();
        break;
      case kInlineInfo: {
        auto node = decode_inline(payload, start, 0, nullptr, ctx);
        if (!node) return node.error();
        fn.inline_tree = std::move(*node);
        if (ctx.strict && fn.inline_tree && fn.range.size() > 0 &&
            !std::all_of(fn.inline_tree->ranges.begin(), fn.inline_tree->ranges.end(),
                         [&](const AddressRange& r) { return fn.range.contains(r); }))
          return Error("InlineInfo root range is outside the function", payload.offset());
        break;
      }
      case kMergedFunctionsInfo: {
        if (merged_depth + 1 > kMaxMergedDepth)
          return Error("MergedFunctionsInfo nested deeper than " + std::to_string(kMaxMergedDepth),
                       at);
        const uint32_t count = payload.u32();
        if (!payload.ok()) return cursor_error(payload, "MergedFunctionsInfo");
        if (count > payload.remaining() / 4)
          return Error("MergedFunctionsInfo count " + std::to_string(count) + " exceeds the data",
                       at + 8);
        for (uint32_t i = 0; i < count; ++i) {
          const uint32_t bytes = payload.u32();
          DataCursor sub = payload.sub(bytes);
          if (!payload.ok()) return cursor_error(payload, "MergedFunctionsInfo");
          auto merged = decode_record(sub, start, merged_depth + 1, ctx);
          if (!merged) return merged.error();
          fn.merged.push_back(std::move(*merged));
          if (ctx.report) ++ctx.report->merged_functions;
        }
        break;
      }
      case kCallSiteInfo: {
        const uint32_t count = payload.u32();
        if (!payload.ok()) return cursor_error(payload, "CallSiteInfo");
        if (count > payload.remaining() / 13)
          return Error("CallSiteInfo count " + std::to_string(count) + " exceeds the data", at + 8);
        for (uint32_t i = 0; i < count; ++i) {
          CallSite cs;
          cs.return_offset = payload.u64();
          cs.flags = payload.u8();
          const uint32_t num_regex = payload.u32();
          if (!payload.ok()) return cursor_error(payload, "CallSiteInfo");
          if (num_regex > payload.remaining() / 4)
            return Error("CallSiteInfo regex count " + std::to_string(num_regex) +
                             " exceeds the data",
                         payload.offset() - 4);
          for (uint32_t r = 0; r < num_regex; ++r) {
            const uint64_t str_at = payload.offset();
            const uint32_t off = payload.u32();
            if (Status st = check_string(off, str_at, ctx); !st) return st.error();
            cs.match_regex.emplace_back(string(off));
          }
          if (!payload.ok()) return cursor_error(payload, "CallSiteInfo");
          if (ctx.strict && size != 0 && cs.return_offset > size)
            return Error("call site return offset " + hex(cs.return_offset) +
                             " is outside the function",
                         payload.offset());
          fn.call_sites.push_back(std::move(cs));
        }
        if (ctx.report) ctx.report->call_sites += count;
        break;
      }
      default:
        return Error("unsupported InfoType " + std::to_string(type), at);
    }
  }
}

Expected<Function> Reader::decode_function(size_t index) const {
  if (index >= function_count())
    return Error("function index " + std::to_string(index) + " out of range (" +
                 std::to_string(function_count()) + " functions)");
  return impl_->decode_record(impl_->cursor_at(impl_->info_offset(index)),
                              impl_->function_start(index), 0, {});
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
    uint32_t dir, base;
    (void)m.file_offsets(i, dir, base);
    const uint64_t at = m.file_table + 8ull * i;
    if (i == 0 && (dir != 0 || base != 0))
      return Error("file[0] is not the empty entry", at);
    if (dir >= m.header.strtab_size || base >= m.header.strtab_size)
      return Error("file[" + std::to_string(i) + "] string offset is past the string table", at);
  }
  const Impl::DecodeContext ctx{true, &report};
  for (size_t i = 0; i < m.header.num_addresses; ++i) {
    const uint64_t start = m.function_start(i);
    auto prefix = [&](const Error& e) {
      return Error("function[" + std::to_string(i) + "] at " + hex(start) + ": " + e.message,
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
