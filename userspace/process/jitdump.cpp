#include "userspace/process/jitdump.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr uint32_t kMagic = 0x4A695444;  // "JiTD" as the writer's u32
constexpr uint32_t kSwappedMagic = 0x4454694A;
constexpr size_t kHeaderBytes = 40;   // magic .. flags
constexpr size_t kMaxHeaderBytes = 4096;  // total_size may grow with versions; more is nonsense
constexpr size_t kRecordHeaderBytes = 16;  // id, total_size, timestamp
// Where perf inject puts the code in the ELF it writes, past the ELF
// header; V8 adds it to each debug row's address.
constexpr uint64_t kV8LineBias = 0x40;

enum RecordId : uint32_t { kCodeLoad = 0, kCodeMove = 1, kDebugInfo = 2, kCodeClose = 3, kUnwindingInfo = 4 };

uint32_t load_u32(const uint8_t* at, bool swapped) {
  uint32_t v;
  std::memcpy(&v, at, sizeof v);
  return swapped ? __builtin_bswap32(v) : v;
}
uint64_t load_u64(const uint8_t* at, bool swapped) {
  uint64_t v;
  std::memcpy(&v, at, sizeof v);
  return swapped ? __builtin_bswap64(v) : v;
}

// A NUL-terminated name at the start of `bytes`: its length, or npos when
// no NUL ends it there.
size_t terminated_length(std::span<const uint8_t> bytes) {
  const void* nul = std::memchr(bytes.data(), 0, bytes.size());
  return nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - bytes.data()) : std::string_view::npos;
}

// A file name worth showing: printable UTF-8 (node 20 writes freed memory
// as the name of user scripts' rows).
bool readable_name(std::string_view name) {
  for (size_t i = 0; i < name.size();) {
    uint32_t code_point = 0;
    const size_t length = decode_utf8(name, i, &code_point);
    if (length == 0 || code_point < 0x20 || (code_point >= 0x7f && code_point < 0xa0)) return false;
    i += length;
  }
  return !name.empty();
}

struct RawRow {
  uint64_t address = 0;
  uint32_t line = 0, column = 0;
  std::string_view file;
};

// The rows of a debug record: per the spec (each name up to its NUL), or at
// a fixed stride of `stride` bytes each (name up to its first NUL in the
// slot). Empty if the entries do not fit the body.
std::vector<RawRow> read_rows(std::span<const uint8_t> entries, uint64_t count, bool swapped, size_t stride) {
  std::vector<RawRow> rows;
  size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (entries.size() - at < 16) return {};
    RawRow row;
    row.address = load_u64(entries.data() + at, swapped);
    row.line = load_u32(entries.data() + at + 8, swapped);
    row.column = load_u32(entries.data() + at + 12, swapped);
    const std::span<const uint8_t> rest = entries.subspan(at + 16);
    size_t name_length = terminated_length(stride ? rest.first(std::min(rest.size(), stride - 16)) : rest);
    if (stride) {
      if (rest.size() < stride - 16) return {};
      if (name_length == std::string_view::npos) name_length = stride - 17;
      at += stride;
    } else {
      if (name_length == std::string_view::npos) return {};
      at += 16 + name_length + 1;
    }
    row.file = std::string_view(reinterpret_cast<const char*>(rest.data()), name_length);
    rows.push_back(row);
  }
  return rows;
}

// Rows within [start, end) once `bias` is taken off, or none if any is not:
// a wrong reading shows in addresses off the code.
bool rows_fit(const std::vector<RawRow>& rows, uint64_t bias, uint64_t start, uint64_t end) {
  for (const RawRow& row : rows)
    if (row.address < start + bias || row.address - bias >= end) return false;
  return !rows.empty();
}

}  // namespace

std::vector<JitLine> parse_jitdump_debug_info(std::span<const uint8_t> body, bool swapped, uint64_t start,
                                              uint64_t end) {
  if (body.size() < 16 || end <= start || end > UINT64_MAX - kV8LineBias) return {};
  const uint64_t count = load_u64(body.data() + 8, swapped);
  const std::span<const uint8_t> entries = body.subspan(16);
  if (count == 0 || count > entries.size() / 17) return {};  // each row: 16 bytes and a NUL at least
  std::vector<RawRow> rows = read_rows(entries, count, swapped, 0);
  uint64_t bias = 0;
  auto choose_bias = [&] {
    if (rows_fit(rows, kV8LineBias, start, end)) bias = kV8LineBias;
    else if (rows_fit(rows, 0, start, end)) bias = 0;
    else return false;
    return true;
  };
  if (!choose_bias()) {
    // node 20 writes a user script's name with the length of its real name
    // but other bytes (NULs among them): every row has the same size, and
    // the record is padded to 8 bytes.
    const size_t stride = static_cast<size_t>(entries.size() / count);
    if (entries.size() - stride * count >= 8) return {};
    rows = read_rows(entries, count, swapped, stride);
    if (!choose_bias()) return {};
    // Those names are freed memory: up to its first NUL it may well be
    // printable ("e" came out of one: `fib (e:3)`), and no name beats a
    // wrong one. The lines stay.
    for (RawRow& row : rows) row.file = {};
  }
  std::vector<JitLine> lines;
  lines.reserve(std::min(rows.size(), kMaxJitdumpLineRows));
  for (const RawRow& row : rows) {
    if (lines.size() == kMaxJitdumpLineRows) break;
    if (row.line == 0) continue;  // no line: the spec's lines count from 1
    JitLine line;
    line.address = row.address - bias;
    line.line = row.line;
    line.column = row.column;
    if (readable_name(row.file)) line.file = std::string(row.file.substr(0, kMaxJitdumpNameBytes));
    lines.push_back(std::move(line));
  }
  // Rows in address order (V8 writes them so); for one address the first wins.
  std::stable_sort(lines.begin(), lines.end(),
                   [](const JitLine& a, const JitLine& b) { return a.address < b.address; });
  lines.erase(std::unique(lines.begin(), lines.end(),
                          [](const JitLine& a, const JitLine& b) { return a.address == b.address; }),
              lines.end());
  return lines;
}

uint32_t JitdumpParser::u32(const uint8_t* at) const { return load_u32(at, swapped_); }
uint64_t JitdumpParser::u64(const uint8_t* at) const { return load_u64(at, swapped_); }

std::string JitdumpParser::truncation(uint64_t pending) const {
  if (!error_.empty()) return error_;
  if (pending == 0 || closed_) return "";
  return header_read_ ? "truncated record at offset " + std::to_string(consumed_) + " (" +
                            std::to_string(pending) + " bytes left)"
                      : "truncated header (" + std::to_string(pending) + " bytes)";
}

bool JitdumpParser::parse_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4) return false;
  const uint32_t magic = load_u32(bytes.data(), false);
  if (magic == kSwappedMagic) {
    swapped_ = true;
  } else if (magic != kMagic) {
    error_ = "not a jitdump file (bad magic)";
    return false;
  }
  if (bytes.size() < kHeaderBytes) return false;
  const uint32_t version = u32(bytes.data() + 4);
  const uint32_t total_size = u32(bytes.data() + 8);
  if (version != 1) {
    error_ = "jitdump version " + std::to_string(version) + " (only version 1 is known)";
    return false;
  }
  if (total_size < kHeaderBytes || total_size > kMaxHeaderBytes) {
    error_ = "bad jitdump header size " + std::to_string(total_size);
    return false;
  }
  if (bytes.size() < total_size) return false;
  pid_ = u32(bytes.data() + 20);
  header_read_ = true;
  consumed_ = total_size;
  return true;
}

size_t JitdumpParser::parse(std::span<const uint8_t> bytes, std::vector<JitdumpEvent>& out) {
  size_t at = 0;
  if (!error_.empty() || closed_) return 0;
  if (!header_read_) {
    if (!parse_header(bytes)) return 0;
    at = static_cast<size_t>(consumed_);
  }
  while (bytes.size() - at >= kRecordHeaderBytes && !closed_) {
    const uint32_t id = u32(bytes.data() + at);
    const uint32_t total_size = u32(bytes.data() + at + 4);
    if (total_size < kRecordHeaderBytes || total_size > kMaxJitdumpRecordBytes) {
      // The framing is lost: nothing after this can be trusted to start a record.
      error_ = "bad record size " + std::to_string(total_size) + " at offset " + std::to_string(consumed_);
      break;
    }
    if (bytes.size() - at < total_size) break;  // the rest is not written yet (or truncated)
    parse_record(id, bytes.subspan(at + kRecordHeaderBytes, total_size - kRecordHeaderBytes), out);
    at += total_size;
    consumed_ += total_size;
  }
  return at;
}

void JitdumpParser::parse_record(uint32_t id, std::span<const uint8_t> body, std::vector<JitdumpEvent>& out) {
  switch (id) {
    case kCodeLoad: parse_load(body, out); break;
    case kCodeMove: parse_move(body, out); break;
    case kDebugInfo:
      // For the next load: its rows are read once its range is known.
      if (body.size() < 16) ++bad_records_;
      else pending_debug_.assign(body.begin(), body.end());
      break;
    case kCodeClose: closed_ = true; break;
    case kUnwindingInfo: parse_unwinding_info(body); break;
    default: ++unknown_records_; break;
  }
}

void JitdumpParser::parse_load(std::span<const uint8_t> body, std::vector<JitdumpEvent>& out) {
  // pid, tid, vma, code_addr, code_size, code_index, name, code.
  constexpr size_t kFixed = 40;
  std::vector<uint8_t> debug = std::exchange(pending_debug_, {});
  std::vector<uint8_t> unwind = std::exchange(pending_unwind_, {});
  const uint64_t eh_frame_hdr_size = std::exchange(pending_eh_frame_hdr_size_, 0);
  if (body.size() < kFixed + 1) {
    ++bad_records_;
    return;
  }
  const uint64_t code_addr = u64(body.data() + 16);
  const uint64_t code_size = u64(body.data() + 24);
  const std::span<const uint8_t> rest = body.subspan(kFixed);
  const size_t name_length = terminated_length(rest);
  // The code follows the name and must fit in the record.
  if (name_length == std::string_view::npos || name_length == 0 || code_size == 0 ||
      code_size > rest.size() - name_length - 1 || code_addr > UINT64_MAX - code_size) {
    ++bad_records_;
    return;
  }
  JitdumpEvent event;
  JitCode& code = event.code;
  code.start = code_addr;
  code.end = code_addr + code_size;
  code.code_index = u64(body.data() + 32);
  code.name.assign(reinterpret_cast<const char*>(rest.data()), std::min(name_length, kMaxJitdumpNameBytes));
  if (!debug.empty()) code.lines = parse_jitdump_debug_info(debug, swapped_, code.start, code.end);
  code.unwind = std::move(unwind);
  code.eh_frame_hdr_size = eh_frame_hdr_size;
  out.push_back(std::move(event));
}

void JitdumpParser::parse_move(std::span<const uint8_t> body, std::vector<JitdumpEvent>& out) {
  // pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index.
  if (body.size() < 48) {
    ++bad_records_;
    return;
  }
  const uint64_t old_addr = u64(body.data() + 16);
  const uint64_t new_addr = u64(body.data() + 24);
  const uint64_t size = u64(body.data() + 32);
  if (size == 0 || new_addr > UINT64_MAX - size) {
    ++bad_records_;
    return;
  }
  JitdumpEvent event;
  event.move = true;
  event.moved_from = old_addr;
  event.code.start = new_addr;
  event.code.end = new_addr + size;
  event.code.code_index = u64(body.data() + 40);
  out.push_back(std::move(event));
}

void JitdumpParser::parse_unwinding_info(std::span<const uint8_t> body) {
  // unwinding_size, eh_frame_hdr_size, mapped_size, then the data.
  pending_unwind_.clear();
  pending_eh_frame_hdr_size_ = 0;
  if (body.size() < 24) {
    ++bad_records_;
    return;
  }
  const uint64_t unwinding_size = u64(body.data());
  const uint64_t eh_frame_hdr_size = u64(body.data() + 8);
  if (unwinding_size > body.size() - 24 || eh_frame_hdr_size > unwinding_size) {
    ++bad_records_;
    return;
  }
  // Beyond the bounds the code keeps its name, not its .eh_frame.
  if (unwinding_size > kMaxJitdumpUnwindBytes || unwind_total_ + unwinding_size > kMaxJitdumpUnwindTotalBytes) return;
  unwind_total_ += unwinding_size;
  pending_unwind_.assign(body.begin() + 24, body.begin() + 24 + static_cast<ptrdiff_t>(unwinding_size));
  pending_eh_frame_hdr_size_ = eh_frame_hdr_size;
}

ParsedJitdump parse_jitdump(std::span<const uint8_t> bytes) {
  ParsedJitdump out;
  JitdumpParser parser;
  const size_t used = parser.parse(bytes, out.events);
  out.error = parser.truncation(bytes.size() - used);
  out.closed = parser.closed();
  out.bad_records = parser.bad_records();
  return out;
}

std::string jit_line_name(std::string_view name, const JitLine* line) {
  std::string out(name);
  if (!line) return out;
  if (line->file.empty()) return out + " (line " + std::to_string(line->line) + ")";
  std::string_view file = line->file;
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos && slash + 1 < file.size())
    file.remove_prefix(slash + 1);
  out += " (";
  out += file;
  out += ":" + std::to_string(line->line) + ")";
  return out;
}

void JitCodeMap::paint(uint64_t start, uint64_t end, const Piece& piece) {
  auto it = pieces_.lower_bound(start);
  if (it != pieces_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > start) {
      const Piece old = before->second;
      before->second.end = start;
      if (old.end > end) pieces_.emplace(end, old);  // the part right of the new range
    }
  }
  it = pieces_.lower_bound(start);
  while (it != pieces_.end() && it->first < end) {
    if (it->second.end > end) {
      const Piece rest = it->second;
      pieces_.erase(it);
      pieces_.emplace(end, rest);
      break;
    }
    it = pieces_.erase(it);
  }
  pieces_[start] = Piece{end, piece.code, piece.moved_by};
}

void JitCodeMap::apply(std::vector<JitdumpEvent>&& events) {
  for (JitdumpEvent& event : events) {
    if (event.move) {
      // The code loaded (or moved) to the old address, wherever it came from.
      auto it = pieces_.find(event.moved_from);
      if (it == pieces_.end()) continue;
      const Piece old = it->second;
      const JitCode& code = codes_[old.code];
      const uint64_t size = event.code.end - event.code.start;
      // Only the whole code, still whole where it was.
      if (code.end - code.start != size || old.end - it->first != size) continue;
      pieces_.erase(it);  // nothing is left where it was
      paint(event.code.start, event.code.end, Piece{0, old.code, event.code.start - code.start});
      continue;
    }
    if (codes_.size() >= UINT32_MAX) return;
    codes_.push_back(std::move(event.code));
    const JitCode& code = codes_.back();
    paint(code.start, code.end, Piece{0, static_cast<uint32_t>(codes_.size() - 1), 0});
  }
}

const JitCode* JitCodeMap::find(uint64_t address, uint64_t* moved_by) const {
  auto it = pieces_.upper_bound(address);
  if (it == pieces_.begin()) return nullptr;
  --it;
  if (address >= it->second.end) return nullptr;
  if (moved_by) *moved_by = it->second.moved_by;
  return &codes_[it->second.code];
}

std::vector<JitSymbol> JitCodeMap::symbols() const {
  std::vector<JitSymbol> out;
  out.reserve(pieces_.size());
  for (const auto& [start, piece] : pieces_) {
    const JitCode& code = codes_[piece.code];
    // Past the bound (pieces left to name, one each), names without lines.
    const bool with_lines = out.size() + pieces_.size() < kMaxJitdumpSymbols;
    // The rows over [start, piece.end): each from its address to the next's,
    // in the code's own addresses (`start - moved_by`).
    const uint64_t code_start = start - piece.moved_by;
    auto row = with_lines ? std::upper_bound(code.lines.begin(), code.lines.end(), code_start,
                                             [](uint64_t a, const JitLine& l) { return a < l.address; })
                          : code.lines.end();
    const JitLine* current = !with_lines || row == code.lines.begin() ? nullptr : &*std::prev(row);
    uint64_t from = start;
    for (;; ++row) {
      const uint64_t row_at = row == code.lines.end() ? piece.end : row->address + piece.moved_by;
      const uint64_t to = std::min(row_at, piece.end);
      if (to > from) {
        std::string name = jit_line_name(code.name, current);
        // Rows for the same line make one symbol.
        if (!out.empty() && out.back().end == from && out.back().name == name) out.back().end = to;
        else out.push_back({from, to, std::move(name)});
        from = to;
      }
      if (row == code.lines.end() || row_at >= piece.end) break;
      current = &*row;
    }
  }
  return out;
}

}  // namespace gsymprof
