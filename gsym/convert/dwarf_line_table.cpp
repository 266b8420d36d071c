#include "gsym/convert/dwarf_line_table.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>

#include "gsym/format/data_cursor.h"

namespace gsym {

namespace {

using detail::DataCursor;

constexpr bool kHostLittle = std::endian::native == std::endian::little;

// DWARF constants (dwarf.h names), local so the header stays libdw-free.
enum : uint8_t {
  kLnsCopy = 1, kLnsAdvancePc, kLnsAdvanceLine, kLnsSetFile, kLnsSetColumn, kLnsNegateStmt,
  kLnsSetBasicBlock, kLnsConstAddPc, kLnsFixedAdvancePc, kLnsSetPrologueEnd,
  kLnsSetEpilogueBegin, kLnsSetIsa,
};
enum : uint8_t { kLneEndSequence = 1, kLneSetAddress, kLneDefineFile, kLneSetDiscriminator };
enum : uint64_t { kLnctPath = 1, kLnctDirectoryIndex = 2 };
enum : uint64_t {
  kFormBlock2 = 0x03, kFormBlock4 = 0x04, kFormData2 = 0x05, kFormData4 = 0x06,
  kFormData8 = 0x07, kFormString = 0x08, kFormBlock = 0x09, kFormBlock1 = 0x0a,
  kFormData1 = 0x0b, kFormFlag = 0x0c, kFormSdata = 0x0d, kFormStrp = 0x0e, kFormUdata = 0x0f,
  kFormData16 = 0x1e, kFormLineStrp = 0x1f,
};

// A NUL-terminated string at the cursor (inside its bounds).
bool read_cstr(DataCursor& c, std::string_view& out) {
  const uint8_t* p = c.position();
  const void* nul = std::memchr(p, 0, c.remaining());
  if (!nul) {
    c.skip(c.remaining() + 1);  // marks the cursor failed
    return false;
  }
  const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(nul) - p);
  out = std::string_view(reinterpret_cast<const char*>(p), n);
  c.skip(n + 1);
  return true;
}

bool string_at(std::span<const uint8_t> section, uint64_t offset, std::string_view& out) {
  if (offset >= section.size()) return false;
  const uint8_t* p = section.data() + offset;
  const void* nul = std::memchr(p, 0, section.size() - offset);
  if (!nul) return false;
  out = std::string_view(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(static_cast<const uint8_t*>(nul) - p));
  return true;
}

struct FormValue {
  uint64_t number = 0;
  std::string_view text;
  bool is_text = false;
};

// Reads one DWARF 5 entry-format value. Only forms the line header allows.
Status read_form(DataCursor& c, uint64_t form, bool dwarf64, const DwarfLineSections& s,
                 FormValue& v) {
  v = FormValue{};
  switch (form) {
    case kFormString:
      if (!read_cstr(c, v.text)) return Error("unterminated string in the line table header");
      v.is_text = true;
      return Status::success();
    case kFormLineStrp:
    case kFormStrp: {
      const uint64_t off = dwarf64 ? c.u64() : c.u32();
      const auto& sec = form == kFormStrp ? s.debug_str : s.debug_line_str;
      if (!c.ok()) return Error("truncated line table header");
      if (!string_at(sec, off, v.text))
        return Error("line table string offset " + std::to_string(off) + " is out of range");
      v.is_text = true;
      return Status::success();
    }
    case kFormUdata: v.number = c.uleb(); break;
    case kFormSdata: v.number = static_cast<uint64_t>(c.sleb()); break;
    case kFormData1: case kFormFlag: v.number = c.u8(); break;
    case kFormData2: v.number = c.u16(); break;
    case kFormData4: v.number = c.u32(); break;
    case kFormData8: v.number = c.u64(); break;
    case kFormData16: c.skip(16); break;
    case kFormBlock: c.skip(c.uleb()); break;
    case kFormBlock1: c.skip(c.u8()); break;
    case kFormBlock2: c.skip(c.u16()); break;
    case kFormBlock4: c.skip(c.u32()); break;
    default:
      return Error(ErrorCode::Unsupported, "unsupported form " + std::to_string(form) + " in the line table header");
  }
  if (!c.ok()) return Error("truncated line table header");
  return Status::success();
}

bool is_absolute(std::string_view p) {
  if (!p.empty() && (p[0] == '/' || p[0] == '\\')) return true;
  // Windows drive paths ("C:\x", "C:/x") count as absolute for LLVM too.
  return p.size() >= 3 && std::isalpha(static_cast<unsigned char>(p[0])) && p[1] == ':' &&
         (p[2] == '/' || p[2] == '\\');
}

// LLVM's sys::path::append (POSIX style) of one non-empty component.
void path_append(std::string& path, std::string_view component) {
  if (component.empty()) return;
  if (!path.empty() && path.back() == '/') {
    size_t first = component.find_first_not_of('/');
    if (first != std::string_view::npos) path.append(component.substr(first));
    return;
  }
  if (component[0] != '/' && !path.empty()) path.push_back('/');
  path.append(component);
}

size_t filename_pos(std::string_view s) {
  if (!s.empty() && s.back() == '/') return s.size() - 1;
  size_t pos = s.find_last_of('/');
  if (pos == std::string_view::npos || (pos == 1 && s[0] == '/')) return 0;
  return pos + 1;
}

size_t root_dir_start(std::string_view s) {
  if (s.size() > 3 && s[0] == '/' && s[1] == '/' && s[2] != '/') return s.find('/', 2);
  if (!s.empty() && s[0] == '/') return 0;
  return std::string_view::npos;
}

}  // namespace

std::string_view path_parent(std::string_view path) {
  size_t end = filename_pos(path);
  const bool filename_was_sep = !path.empty() && path[end] == '/';
  const size_t root = root_dir_start(path);
  while (end > 0 && (root == std::string_view::npos || end > root) && path[end - 1] == '/') --end;
  if (end == root && !filename_was_sep) return path.substr(0, root + 1);
  return path.substr(0, end);
}

std::string_view path_filename(std::string_view path) {
  if (path.empty()) return path;
  const size_t root = root_dir_start(path);
  size_t end = path.size();
  while (end > 0 && end - 1 != root && path[end - 1] == '/') --end;
  if (path.back() == '/' && (root == std::string_view::npos || end - 1 > root)) return ".";
  const size_t start = filename_pos(path.substr(0, end));
  return path.substr(start, end - start);
}

bool DwarfLineTable::file_path(uint64_t index, std::string_view comp_dir, std::string& out) const {
  const FileName* entry = nullptr;
  if (version >= 5) {
    if (index < file_names.size()) entry = &file_names[index];
  } else if (index >= 1 && index <= file_names.size()) {
    entry = &file_names[index - 1];
  }
  if (!entry) return false;
  out.clear();
  if (is_absolute(entry->name)) {
    out.assign(entry->name);
    return true;
  }
  std::string_view include_dir;
  const uint64_t d = entry->directory_index;
  if (version >= 5) {
    if (d < include_directories.size()) include_dir = include_directories[d];
  } else if (d > 0 && d <= include_directories.size()) {
    include_dir = include_directories[d - 1];
  }
  if ((version < 5 || d != 0) && !comp_dir.empty() && !is_absolute(include_dir))
    path_append(out, comp_dir);
  path_append(out, include_dir);
  path_append(out, entry->name);
  return true;
}

bool DwarfLineTable::lookup_address_runs(uint64_t address, uint64_t size, std::vector<RowRun>& out) const {
  out.clear();
  if (sequences.empty()) return false;
  const uint64_t end_address = address + size;
  auto seq = std::upper_bound(sequences.begin(), sequences.end(), address,
                              [](uint64_t a, const DwarfLineSequence& s) { return a < s.high_pc; });
  if (seq == sequences.end() || !(seq->low_pc <= address && address < seq->high_pc)) return false;
  // The row describing `addr` in a sequence: the last row whose address is
  // <= addr (so of several rows at one address, the last).
  auto row_in = [&](const DwarfLineSequence& s, uint64_t addr) -> int64_t {
    if (!(s.low_pc <= addr && addr < s.high_pc)) return -1;
    auto first = rows.begin() + s.first_row + 1;
    auto last = rows.begin() + s.end_row - 1;
    if (first > last) first = last;
    auto it = std::upper_bound(first, last, addr,
                               [](uint64_t a, const DwarfLineRow& r) { return a < r.address; });
    return (it - rows.begin()) - 1;
  };
  const auto start = seq;
  for (; seq != sequences.end() && seq->low_pc < end_address; ++seq) {
    int64_t first = seq == start ? row_in(*seq, address) : seq->first_row;
    int64_t last = row_in(*seq, end_address - 1);
    if (last < 0) last = int64_t(seq->end_row) - 1;
    if (first < 0 || first > last) continue;
    out.push_back({static_cast<uint32_t>(first), static_cast<uint32_t>(last)});
  }
  return true;
}

namespace {

// The fields of a line table's header that drive its program.
struct LineProgramHeader {
  uint8_t min_inst_length = 1;
  int8_t line_base = 0;
  uint8_t line_range = 0;
  uint8_t opcode_base = 1;
  std::vector<uint8_t> standard_lengths;  // operands of opcodes 1 .. opcode_base - 1
};

Expected<LineProgramHeader> read_program_header(DataCursor& header, uint16_t version) {
  LineProgramHeader h;
  h.min_inst_length = header.u8();
  if (version >= 4) header.u8();  // maximum_operations_per_instruction
  header.u8();                     // default_is_stmt: rows keep no is_stmt
  h.line_base = static_cast<int8_t>(header.u8());
  h.line_range = header.u8();
  h.opcode_base = header.u8();
  for (unsigned i = 1; i < h.opcode_base; ++i) h.standard_lengths.push_back(header.u8());
  if (!header.ok()) return Error("line table header is truncated");
  return h;
}

// DWARF 2-4: include_directories and file_names, each list ended by an
// empty string.
Status read_file_tables_v2(DataCursor& header, DwarfLineTable& table) {
  for (;;) {
    std::string_view dir;
    if (!read_cstr(header, dir)) return Error("line table include directories are truncated");
    if (dir.empty()) break;
    table.include_directories.push_back(dir);
  }
  for (;;) {
    DwarfLineTable::FileName f;
    if (!read_cstr(header, f.name)) return Error("line table file names are truncated");
    if (f.name.empty()) break;
    f.directory_index = header.uleb();
    header.uleb();  // modification time
    header.uleb();  // length
    if (!header.ok()) return Error("line table file names are truncated");
    table.file_names.push_back(f);
  }
  return Status::success();
}

// DWARF 5: directories then file names, each an entry format (content type,
// form) followed by its entries.
Status read_file_tables_v5(DataCursor& header, bool dwarf64, const DwarfLineSections& s,
                           DwarfLineTable& table) {
  for (int pass = 0; pass < 2; ++pass) {
    const uint8_t format_count = header.u8();
    std::vector<std::pair<uint64_t, uint64_t>> format;
    for (unsigned i = 0; i < format_count; ++i) {
      uint64_t type = header.uleb();
      uint64_t form = header.uleb();
      format.emplace_back(type, form);
    }
    const uint64_t count = header.uleb();
    if (!header.ok()) return Error("line table header is truncated");
    if (count > header.remaining()) return Error("line table entry count is too large");
    for (uint64_t i = 0; i < count; ++i) {
      DwarfLineTable::FileName f;
      bool has_path = false;
      for (auto [type, form] : format) {
        FormValue v;
        Status st = read_form(header, form, dwarf64, s, v);
        if (!st) return st.error();
        if (type == kLnctPath) {
          if (!v.is_text) return Error("line table path has a non-string form");
          f.name = v.text;
          has_path = true;
        } else if (type == kLnctDirectoryIndex) {
          f.directory_index = v.number;
        }
      }
      if (pass == 0) {
        table.include_directories.push_back(has_path ? f.name : std::string_view());
      } else {
        table.file_names.push_back(f);
      }
    }
  }
  return Status::success();
}

// The line-number program's state machine: rows and sequences into `table`.
class LineProgram {
 public:
  LineProgram(const LineProgramHeader& header, DwarfLineTable& table) : h_(header), table_(table) {
    // What each special opcode adds to the address and line, computed once
    // per table (two divisions per row otherwise; most rows are special
    // opcodes): adjusted = opcode - opcode_base, its quotient and remainder
    // by line_range counted up without dividing. Opcodes below opcode_base
    // are not special and have no entry.
    uint64_t quotient = 0;
    uint32_t remainder = 0;
    for (unsigned opcode = h_.opcode_base; opcode < 256; ++opcode) {
      address_step_[opcode] = h_.line_range ? quotient * h_.min_inst_length : 0;
      line_step_[opcode] = h_.line_range ? static_cast<uint32_t>(int32_t(h_.line_base) + int32_t(remainder)) : 0;
      if (h_.line_range && ++remainder == h_.line_range) {
        remainder = 0;
        ++quotient;
      }
    }
  }

  void run(DataCursor& program) {
    // About one row per 3 bytes in compiler output.
    table_.rows.reserve(program.remaining() / 3 + 1);
    while (program.ok() && !program.at_end()) {
      const uint8_t opcode = program.u8();
      if (opcode >= h_.opcode_base) {
        row_.address += address_step_[opcode];
        row_.line += line_step_[opcode];
        append_row();
      } else if (opcode == 0) {
        if (!run_extended(program)) break;
      } else {
        run_standard(opcode, program);
      }
    }
  }

 private:
  // Inlined for the common row, inside a sequence (a call per special
  // opcode was a tenth of decoding); a sequence's first and last rows go
  // the long way.
  [[gnu::always_inline]] void append_row() {
    if (tombstoned_) return;
    if (sequence_empty_ || end_sequence_) [[unlikely]] {
      append_boundary_row();
      return;
    }
    table_.rows.push_back(row_);
  }
  // append_row for the first row of a sequence or its end_sequence row.
  [[gnu::noinline]] void append_boundary_row() {
    const uint32_t index = static_cast<uint32_t>(table_.rows.size());
    if (sequence_empty_) {
      sequence_empty_ = false;
      sequence_.low_pc = row_.address;
      sequence_.first_row = index;
    }
    table_.rows.push_back(row_);
    if (end_sequence_) {
      if (table_.end_rows.size() <= index / 64) table_.end_rows.resize(index / 64 + 1);
      table_.end_rows[index / 64] |= uint64_t{1} << (index % 64);
      sequence_.high_pc = row_.address;
      sequence_.end_row = index + 1;
      if (sequence_.low_pc < sequence_.high_pc) table_.sequences.push_back(sequence_);
      sequence_empty_ = true;
    }
  }

  // An extended opcode; false when its length is unusable (the program ends).
  bool run_extended(DataCursor& program) {
    const uint64_t length = program.uleb();
    if (!program.ok() || length > program.remaining() || length == 0) return false;
    DataCursor ext = program.sub(static_cast<size_t>(length));
    switch (ext.u8()) {
      case kLneEndSequence:
        end_sequence_ = true;
        append_row();
        end_sequence_ = false;
        row_ = DwarfLineRow{};
        tombstoned_ = false;
        break;
      case kLneSetAddress: {
        const size_t size = static_cast<size_t>(length - 1);
        uint64_t a = 0;
        if (size == 1) a = ext.u8();
        else if (size == 2) a = ext.u16();
        else if (size == 4) a = ext.u32();
        else if (size == 8) a = ext.u64();
        else break;  // unsupported width: LLVM skips it too
        row_.address = a;
        tombstoned_ = a == (size == 8 ? UINT64_MAX : (uint64_t(1) << (8 * size)) - 1);
        break;
      }
      case kLneDefineFile: {
        DwarfLineTable::FileName f;
        if (read_cstr(ext, f.name)) {
          f.directory_index = ext.uleb();
          if (ext.ok()) table_.file_names.push_back(f);
        }
        break;
      }
      default:
        break;  // discriminator and vendor opcodes carry nothing we use
    }
    return true;
  }

  void run_standard(uint8_t opcode, DataCursor& program) {
    switch (opcode) {
      case kLnsCopy: append_row(); break;
      case kLnsAdvancePc: row_.address += program.uleb() * h_.min_inst_length; break;
      case kLnsAdvanceLine: row_.line += static_cast<uint32_t>(program.sleb()); break;
      case kLnsSetFile: row_.file = static_cast<uint32_t>(program.uleb()); break;
      case kLnsSetColumn: program.uleb(); break;
      case kLnsNegateStmt: case kLnsSetBasicBlock: case kLnsSetPrologueEnd:
      case kLnsSetEpilogueBegin: break;
      case kLnsConstAddPc: row_.address += address_step_[255]; break;
      case kLnsFixedAdvancePc: row_.address += program.u16(); break;
      case kLnsSetIsa: program.uleb(); break;
      default:
        for (uint8_t i = 0; i < h_.standard_lengths[opcode - 1]; ++i) program.uleb();
        break;
    }
  }

  const LineProgramHeader& h_;
  DwarfLineTable& table_;
  uint64_t address_step_[256];
  uint32_t line_step_[256];
  DwarfLineRow row_;
  bool end_sequence_ = false;  // the row being appended ends its sequence
  DwarfLineSequence sequence_;
  bool sequence_empty_ = true;
  bool tombstoned_ = false;  // in a sequence at a tombstone address (discarded code)
};

}  // namespace

Status parse_line_table_into(const DwarfLineSections& s, uint64_t offset, uint8_t unit_address_size,
                            DwarfLineTable& table) {
  (void)unit_address_size;  // rows keep addresses of any width as read
  table.version = 0;
  table.include_directories.clear();
  table.file_names.clear();
  table.rows.clear();
  table.end_rows.clear();
  table.sequences.clear();
  const auto& sec = s.debug_line;
  if (offset >= sec.size())
    return Error("line table offset " + std::to_string(offset) + " is past .debug_line");
  const bool swap = s.little_endian != kHostLittle;
  DataCursor c(sec.data() + offset, sec.data() + sec.size(), offset, swap);
  uint64_t unit_length = c.u32();
  bool dwarf64 = false;
  if (unit_length == 0xffffffff) {
    dwarf64 = true;
    unit_length = c.u64();
  } else if (unit_length >= 0xfffffff0) {
    return Error("line table has a reserved unit length");
  }
  if (!c.ok() || unit_length > c.remaining()) return Error("line table is truncated");
  DataCursor unit = c.sub(static_cast<size_t>(unit_length));

  table.version = unit.u16();
  if (!unit.ok()) return Error("line table is truncated");
  if (table.version < 2 || table.version > 5)
    return Error(ErrorCode::Unsupported, "unsupported line table version " + std::to_string(table.version));
  if (table.version >= 5) {
    unit.u8();  // address size
    unit.u8();  // segment selector size
  }
  const uint64_t header_length = dwarf64 ? unit.u64() : unit.u32();
  if (!unit.ok() || header_length > unit.remaining()) return Error("line table header is truncated");
  DataCursor header = unit.sub(static_cast<size_t>(header_length));
  DataCursor& program = unit;  // the rest of the unit

  Expected<LineProgramHeader> program_header = read_program_header(header, table.version);
  if (!program_header) return program_header.error();
  Status files = table.version < 5 ? read_file_tables_v2(header, table)
                                   : read_file_tables_v5(header, dwarf64, s, table);
  if (!files) return files.error();
  LineProgram(*program_header, table).run(program);
  std::stable_sort(table.sequences.begin(), table.sequences.end(),
                   [](const DwarfLineSequence& a, const DwarfLineSequence& b) {
                     return a.high_pc < b.high_pc;
                   });
  return Status::success();
}

Expected<DwarfLineTable> parse_line_table(const DwarfLineSections& sections, uint64_t offset,
                                          uint8_t address_size) {
  DwarfLineTable table;
  if (Status s = parse_line_table_into(sections, offset, address_size, table); !s) return s.error();
  return table;
}

}  // namespace gsym
