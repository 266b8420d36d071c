#include "userspace/process/python_runtime.h"

#include <gelf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <deque>
#include <mutex>
#include <string_view>

#include "gsym/convert/elf_handle.h"

namespace gsymprof {
namespace {

// ---- ELF symbols ----

uint64_t decode_unsigned(const uint8_t* bytes, size_t size, bool little_endian) {
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i) {
    const size_t shift = little_endian ? i : size - 1 - i;
    value |= uint64_t{bytes[i]} << (8 * shift);
  }
  return value;
}

// `size` bytes of `symbol`'s initial value: its section's bytes in the file
// (a statically initialized object's); empty when they are not all there.
std::span<const uint8_t> symbol_bytes(Elf* elf, const GElf_Sym& symbol, uint64_t size) {
  if (symbol.st_shndx == SHN_UNDEF || symbol.st_shndx >= SHN_LORESERVE) return {};
  Elf_Scn* section = elf_getscn(elf, symbol.st_shndx);
  GElf_Shdr header;
  if (!section || !gelf_getshdr(section, &header)) return {};
  if (header.sh_type == SHT_NOBITS || (header.sh_flags & SHF_COMPRESSED)) return {};
  if (symbol.st_value < header.sh_addr || symbol.st_value - header.sh_addr > header.sh_size) return {};
  const uint64_t offset = symbol.st_value - header.sh_addr;
  Elf_Data* data = elf_rawdata(section, nullptr);
  if (!data || !data->d_buf || offset > data->d_size || data->d_size - offset < size) return {};
  return {static_cast<const uint8_t*>(data->d_buf) + offset, static_cast<size_t>(size)};
}

// The value of Py_Version (const unsigned long) from its section's bytes in
// the file; 0 when they are not there.
uint32_t read_version_value(Elf* elf, const GElf_Sym& symbol) {
  if (symbol.st_size != 4 && symbol.st_size != 8) return 0;
  const std::span<const uint8_t> bytes = symbol_bytes(elf, symbol, symbol.st_size);
  const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr));
  if (bytes.empty() || !ident) return 0;
  const uint64_t value = decode_unsigned(bytes.data(), bytes.size(), ident[EI_DATA] != ELFDATA2MSB);
  // PY_VERSION_HEX fits 32 bits; more is not a version.
  return value > UINT32_MAX ? 0 : static_cast<uint32_t>(value);
}

gsym::Expected<std::optional<PythonSymbols>> python_symbols_of(Elf* elf) {
  PythonSymbols found;
  bool have_runtime = false, have_eval = false, have_version = false;
  GElf_Sym runtime{};
  const size_t symbol_size = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  if (symbol_size == 0) return gsym::Error(gsym::ErrorCode::Malformed, "ELF: unknown class");
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section; section = elf_nextscn(elf, section)) {
    GElf_Shdr header;
    if (!gelf_getshdr(section, &header) || header.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(section, nullptr);
    if (!data) continue;
    const size_t count = std::min<size_t>(data->d_size / symbol_size, INT_MAX);  // gelf_getsym takes an int
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym symbol;
      if (!gelf_getsym(data, static_cast<int>(i), &symbol) || symbol.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, header.sh_link, symbol.st_name);
      if (!name) continue;
      const std::string_view text(name);
      if (text == "_PyRuntime" && !have_runtime) {
        have_runtime = true;
        runtime = symbol;
        found.runtime_vaddr = symbol.st_value;
      } else if (text == "_PyEval_EvalFrameDefault" && !have_eval) {
        have_eval = true;
        found.eval_vaddr = symbol.st_value;
        found.eval_size = symbol.st_size;
      } else if (text == "Py_Version" && !have_version) {
        have_version = true;
        found.hexversion = read_version_value(elf, symbol);
      }
    }
  }
  if (!have_runtime) return std::optional<PythonSymbols>();
  // 3.13 publishes its layout at the start of _PyRuntime (x86-64's: a
  // 64-bit little-endian file, as the debug offsets are read).
  const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr));
  const bool x86_64_like = ident && ident[EI_CLASS] == ELFCLASS64 && ident[EI_DATA] == ELFDATA2LSB;
  if ((found.hexversion >> 16) == 0x030d && x86_64_like) {
    const std::span<const uint8_t> start = symbol_bytes(elf, runtime, kPython313DebugOffsetsBytes);
    if (!start.empty())
      found.debug_layout = python_layout_from_debug_offsets(start, found.hexversion, runtime.st_size);
  }
  return std::optional<PythonSymbols>(found);
}

// ---- Layouts ----

// Measured by tests/tools/python_offsets.c from the headers of Debian's
// 3.11.2 and pyenv's 3.11.7 (equal), and pyenv's 3.12.1, x86-64; the unit
// test compiles it against every CPython it finds and compares.

// What 3.11 and 3.12 share: the object model (PyObject, PyVarObject,
// PyTypeObject, PyBytesObject), a string's length and state and the state's
// kind, compact and ascii bits, and where a code object keeps its names and
// line table.
constexpr void set_shared_311_312(PythonLayout& l) {
  l.object_type = 8;
  l.var_object_size = 16;
  l.type_name = 24;
  l.type_flags = 168;
  l.bytes_size = 16;
  l.bytes_data = 32;
  l.unicode_length = 16;
  l.unicode_state = 32;
  l.unicode_kind_shift = 2;
  l.unicode_compact_shift = 5;
  l.unicode_ascii_shift = 6;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_linetable = 136;
  l.frame_owned_by_generator = 1;
}

constexpr PythonLayout kPython311 = [] {
  PythonLayout l;
  set_shared_311_312(l);
  l.version = 0x030b;
  l.runtime_tstate_current = 576;
  l.runtime_interpreters_head = 40;
  l.interp_threads_head = 16;
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_thread_id = 152;
  l.tstate_native_thread_id = 160;
  l.tstate_cframe = 56;
  l.cframe_current_frame = 8;
  l.frame_code = 32;
  l.frame_previous = 48;
  l.frame_prev_instr = 56;
  l.frame_is_entry = 68;
  l.frame_owner = 69;
  l.code_adaptive = 184;
  l.code_firstlineno = 72;
  l.unicode_ascii_size = 48;
  l.unicode_compact_size = 72;
  l.unicode_ready_shift = 7;  // 3.11 strings may still be built lazily (wstr)
  return l;
}();

constexpr PythonLayout kPython312 = [] {
  PythonLayout l;
  set_shared_311_312(l);
  l.version = 0x030c;
  // No tstate_current: 3.12 keeps the current thread state in a thread-local.
  l.runtime_interpreters_head = 40;
  l.interp_threads_head = 72;
  l.tstate_next = 8;
  l.tstate_interp = 16;
  l.tstate_thread_id = 136;
  l.tstate_native_thread_id = 144;
  l.tstate_cframe = 56;
  l.cframe_current_frame = 0;
  l.frame_code = 0;
  l.frame_previous = 8;
  l.frame_prev_instr = 56;
  l.frame_owner = 70;
  l.frame_owned_by_cstack = 3;
  l.code_adaptive = 192;
  l.code_firstlineno = 68;
  l.unicode_ascii_size = 40;  // no wstr since 3.12
  l.unicode_compact_size = 56;
  return l;
}();

// What 3.13's debug offsets do not say, from its headers (measured by
// tests/tools/python_offsets.c from pyenv's 3.13.0, x86-64; the unit test
// compares); the rest comes from the debug offsets of the very build.
constexpr PythonLayout kPython313Rest = [] {
  PythonLayout l;
  l.version = 0x030d;
  // No tstate_current (a thread-local, as in 3.12), no _PyCFrame (the
  // thread state holds the current frame), no is_entry (C-stack frames).
  l.frame_owned_by_generator = 1;
  l.frame_owned_by_cstack = 3;
  l.var_object_size = 16;        // checked: sizeof(PyObject), PyBytesObject's ob_size
  l.unicode_compact_size = 56;   // checked: sizeof(PyASCIIObject) + utf8_length + utf8
  l.unicode_kind_shift = 2;      // after interned (2 bits)
  l.unicode_compact_shift = 5;
  l.unicode_ascii_shift = 6;
  return l;
}();

// Where 3.13's _Py_DebugOffsets holds what the layout takes: bytes from its
// start (Include/internal/pycore_runtime.h; tests/tools/python_offsets.c
// prints them from the header, the unit test compares). Each structure's
// block starts with its size.
namespace debug313 {
constexpr size_t kVersion = 8, kFreeThreaded = 16;
constexpr size_t kRuntimeSize = 24, kRuntimeInterpretersHead = 40;
constexpr size_t kInterpSize = 48, kInterpThreadsHead = 72;
constexpr size_t kTstateSize = 152, kTstateNext = 168, kTstateInterp = 176, kTstateCurrentFrame = 184,
                 kTstateThreadId = 192, kTstateNativeThreadId = 200;
constexpr size_t kFrameSize = 224, kFramePrevious = 232, kFrameExecutable = 240, kFrameInstrPtr = 248,
                 kFrameOwner = 264;
constexpr size_t kCodeSize = 272, kCodeFilename = 280, kCodeName = 288, kCodeQualname = 296, kCodeLinetable = 304,
                 kCodeFirstlineno = 312, kCodeAdaptive = 344;
constexpr size_t kObjectSize = 352, kObjectType = 360;
constexpr size_t kTypeSize = 368, kTypeName = 376, kTypeFlags = 392;
constexpr size_t kBytesSize = 512, kBytesObSize = 520, kBytesData = 528;
constexpr size_t kUnicodeSize = 536, kUnicodeState = 544, kUnicodeLength = 552, kUnicodeAsciiSize = 560;
static_assert(kUnicodeAsciiSize + 8 <= kPython313DebugOffsetsBytes);
}  // namespace debug313

// ---- Line tables ----

// The bytes of one line-table entry after its first byte.
struct EntryBytes {
  std::span<const uint8_t> bytes;
  size_t at = 0;

  bool byte(uint8_t& out) {
    if (at >= bytes.size()) return false;
    out = bytes[at++];
    return true;
  }
  // 6 bits a byte, least significant first, 0x40: more follow. CPython's
  // values fit 32 bits.
  bool varint(uint64_t& out) {
    out = 0;
    for (unsigned shift = 0; shift < 36; shift += 6) {
      uint8_t b = 0;
      if (!byte(b)) return false;
      out |= uint64_t{b & 63u} << shift;
      if (!(b & 64)) return out <= UINT32_MAX;
    }
    return false;
  }
  // The sign in the lowest bit.
  bool signed_varint(int64_t& out) {
    uint64_t raw = 0;
    if (!varint(raw)) return false;
    out = (raw & 1) ? -static_cast<int64_t>(raw >> 1) : static_cast<int64_t>(raw >> 1);
    return true;
  }
  bool finished() const { return at == bytes.size(); }
};

// Location codes (Include/cpython/code.h, PY_CODE_LOCATION_INFO_*).
constexpr unsigned kShortFormLast = 9;
constexpr unsigned kOneLine0 = 10, kOneLine2 = 12;
constexpr unsigned kNoColumns = 13, kLongForm = 14, kNoLocation = 15;

// ---- Reading objects ----

constexpr uint64_t kTypeFlagHeapType = 1ull << 9;  // Py_TPFLAGS_HEAPTYPE: a class made at run time
constexpr uint64_t kTypeFlagReady = 1ull << 12;    // Py_TPFLAGS_READY
constexpr uint64_t kTypeFlagBytesSubclass = 1ull << 27;
constexpr uint64_t kTypeFlagUnicodeSubclass = 1ull << 28;
// Code units a code object may hold: a line-table entry covers at most 8.
constexpr uint64_t kMaxCodeUnits = 8 * kMaxPythonLineTableBytes;
// Offsets beyond this are not a layout of ours.
constexpr uint32_t kMaxLayoutOffset = 1024;

uint64_t load_u64(const uint8_t* bytes) { return decode_unsigned(bytes, 8, true); }
uint32_t load_u32(const uint8_t* bytes) { return static_cast<uint32_t>(decode_unsigned(bytes, 4, true)); }

// An address an object could be at: not null, 8-byte aligned (every CPython
// allocation is), not wrapping.
bool plausible_object(uint64_t address, uint64_t size) {
  return address != 0 && address % 8 == 0 && address <= UINT64_MAX - size;
}

bool readable(const MemoryReader& read, uint64_t address, std::span<uint8_t> out) {
  return address <= UINT64_MAX - out.size() && read(address, out);
}

bool usable(const PythonLayout& l) {
  for (uint32_t offset : {l.object_type, l.var_object_size, l.type_name, l.type_flags, l.code_firstlineno,
                          l.code_filename, l.code_name, l.code_qualname, l.code_linetable, l.unicode_length,
                          l.unicode_state, l.unicode_ascii_size, l.unicode_compact_size, l.bytes_size,
                          l.bytes_data})
    if (offset > kMaxLayoutOffset) return false;  // kPythonAbsent included
  for (uint32_t shift : {l.unicode_kind_shift, l.unicode_compact_shift, l.unicode_ascii_shift})
    if (shift > 29) return false;
  return l.unicode_ready_shift == kPythonAbsent || l.unicode_ready_shift < 32;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c >= 0xDC80 && c <= 0xDCFF) {
    // A surrogate escape (os.fsdecode of a path byte that is not UTF-8):
    // the byte itself, as os.fsencode gives the path back.
    out += static_cast<char>(c - 0xDC00);
  } else if (c >= 0xD800 && c <= 0xDFFF) {
    out += "\xEF\xBF\xBD";  // another lone surrogate: U+FFFD
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

enum class TypeKind : uint8_t { Str, Bytes, Code };

}  // namespace

// ---- Public: symbols, layouts, line tables ----

gsym::Expected<std::optional<PythonSymbols>> read_python_symbols(Elf* elf) { return python_symbols_of(elf); }

gsym::Expected<std::optional<PythonSymbols>> read_python_symbols_fd(int fd) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) return gsym::Error::from_errno(errno, "python runtime: fstat");
  gsym::Expected<gsym::ElfHandle> elf = gsym::ElfHandle::open(fd, status, gsym::UntrustedRead::OnDemand);
  if (!elf) return elf.error();
  return python_symbols_of(elf->get());
}

gsym::Expected<std::optional<PythonSymbols>> read_python_symbols(std::span<const uint8_t> elf_bytes) {
  gsym::Expected<gsym::ElfHandle> elf = gsym::ElfHandle::from_memory(elf_bytes);
  if (!elf) return elf.error();
  return python_symbols_of(elf->get());
}

namespace {

// Reads offsets out of _Py_DebugOffsets, each checked to lie within its
// structure; one that does not spoils the whole (ok() false).
class DebugOffsets {
 public:
  explicit DebugOffsets(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t value(size_t position) const { return load_u64(&bytes_[position]); }
  // A structure's size: not 0, at most `max`.
  uint64_t size(size_t position, uint64_t max) {
    const uint64_t size = value(position);
    if (size == 0 || size > max) ok_ = false;
    return size;
  }
  // The offset of a field `width` bytes wide that lies within the first
  // `within` bytes of its structure.
  uint32_t field(size_t position, uint64_t width, uint64_t within) {
    const uint64_t offset = value(position);
    if (within < width || offset > within - width) {
      ok_ = false;
      return kPythonAbsent;
    }
    return static_cast<uint32_t>(offset);
  }
  void require(bool condition) { ok_ = ok_ && condition; }
  bool ok() const { return ok_; }

 private:
  std::span<const uint8_t> bytes_;
  bool ok_ = true;
};

// Bounds on what a 3.13 debug-offsets block may say. _PyRuntimeState and
// PyInterpreterState are large (3.13.0: 283320 and 194968 bytes); the
// objects read for naming are small, and their fields within what the
// namer accepts (kMaxLayoutOffset).
constexpr uint64_t kMaxRuntimeStateBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxInterpreterStateBytes = uint64_t{4} << 20;
constexpr uint64_t kMaxObjectStructBytes = kMaxLayoutOffset;
// A frame's fields lie before localsplus, within what the sampler reads of
// each frame (bpf/profile.h PROFILE_PYTHON_FRAME_BYTES, 80).
constexpr uint64_t kMaxFrameFieldEnd = 72;

}  // namespace

std::optional<PythonLayout> python_layout_from_debug_offsets(std::span<const uint8_t> runtime_start,
                                                             uint32_t hexversion, uint64_t runtime_size) {
  using namespace debug313;
  if (runtime_start.size() < kPython313DebugOffsetsBytes) return std::nullopt;
  if (std::string_view(reinterpret_cast<const char*>(runtime_start.data()), 8) != "xdebugpy") return std::nullopt;
  DebugOffsets d(runtime_start.first(kPython313DebugOffsetsBytes));
  // The layout of _Py_DebugOffsets itself is known for 3.13 final releases
  // only (3.13.0rc2 added fields; the layout is stable within a minor
  // version after its release).
  const uint64_t version = d.value(kVersion);
  const uint64_t release_level = (version >> 4) & 0xF;
  if (version > UINT32_MAX || (version >> 16) != 0x030d || release_level != 0xF || (hexversion >> 16) != 0x030d)
    return std::nullopt;
  if (d.value(kFreeThreaded) != 0) return std::nullopt;

  PythonLayout l = kPython313Rest;
  const uint64_t runtime = d.size(kRuntimeSize, kMaxRuntimeStateBytes);
  d.require(runtime >= kPython313DebugOffsetsBytes && (runtime_size == 0 || runtime == runtime_size));
  l.runtime_interpreters_head = d.field(kRuntimeInterpretersHead, 8, runtime);
  const uint64_t interp = d.size(kInterpSize, kMaxInterpreterStateBytes);
  l.interp_threads_head = d.field(kInterpThreadsHead, 8, interp);

  const uint64_t tstate = d.size(kTstateSize, kMaxObjectStructBytes);
  l.tstate_next = d.field(kTstateNext, 8, tstate);
  l.tstate_interp = d.field(kTstateInterp, 8, tstate);
  l.tstate_cframe = d.field(kTstateCurrentFrame, 8, tstate);  // the current frame itself: no cframe
  l.tstate_thread_id = d.field(kTstateThreadId, 8, tstate);
  l.tstate_native_thread_id = d.field(kTstateNativeThreadId, 8, tstate);

  const uint64_t frame = std::min(d.size(kFrameSize, kMaxObjectStructBytes), kMaxFrameFieldEnd);
  l.frame_previous = d.field(kFramePrevious, 8, frame);
  l.frame_code = d.field(kFrameExecutable, 8, frame);
  l.frame_prev_instr = d.field(kFrameInstrPtr, 8, frame);
  l.frame_owner = d.field(kFrameOwner, 1, frame);

  const uint64_t code = d.size(kCodeSize, kMaxObjectStructBytes);
  l.code_filename = d.field(kCodeFilename, 8, code);
  l.code_name = d.field(kCodeName, 8, code);
  l.code_qualname = d.field(kCodeQualname, 8, code);
  l.code_linetable = d.field(kCodeLinetable, 8, code);
  l.code_firstlineno = d.field(kCodeFirstlineno, 4, code);  // int
  l.code_adaptive = d.field(kCodeAdaptive, 2, code);        // at least one code unit

  const uint64_t object = d.size(kObjectSize, kMaxObjectStructBytes);
  l.object_type = d.field(kObjectType, 8, object);
  // A PyVarObject is a PyObject, then ob_size (the table's).
  d.require(l.var_object_size == object);
  const uint64_t type = d.size(kTypeSize, kMaxObjectStructBytes);
  l.type_name = d.field(kTypeName, 8, type);
  l.type_flags = d.field(kTypeFlags, 8, type);

  const uint64_t bytes = d.size(kBytesSize, kMaxObjectStructBytes);
  l.bytes_size = d.field(kBytesObSize, 8, bytes);
  l.bytes_data = d.field(kBytesData, 1, bytes);  // char ob_sval[1]
  d.require(l.bytes_size == l.var_object_size && l.bytes_data >= l.bytes_size + 8);

  const uint64_t unicode = d.size(kUnicodeSize, kMaxObjectStructBytes);
  const uint64_t ascii_size = d.value(kUnicodeAsciiSize);
  // PyCompactUnicodeObject: the PyASCIIObject, then utf8_length and utf8;
  // a PyUnicodeObject is one of those and a data pointer.
  d.require(ascii_size + 16 == l.unicode_compact_size && l.unicode_compact_size + 8 <= unicode);
  l.unicode_ascii_size = static_cast<uint32_t>(std::min<uint64_t>(ascii_size, kPythonAbsent));
  l.unicode_state = d.field(kUnicodeState, 4, ascii_size);
  l.unicode_length = d.field(kUnicodeLength, 8, ascii_size);
  d.require(l.object_type + 8 <= l.unicode_length);  // past the object header
  if (!d.ok()) return std::nullopt;
  return l;
}

const PythonLayout* python_layout_for(const PythonSymbols& symbols) {
  if (const PythonLayout* table = python_layout(symbols.hexversion)) return table;
  if (!symbols.debug_layout || symbols.debug_layout->version != symbols.hexversion >> 16) return nullptr;
  // Layouts handed out are kept for the program's life (callers hold the
  // pointer): one per distinct layout, and few, or a file crafted to make
  // many would grow this without end.
  constexpr size_t kMaxKeptLayouts = 32;
  static std::mutex mutex;
  static std::deque<PythonLayout>* kept = new std::deque<PythonLayout>;  // never freed: pointers into it stay valid
  std::lock_guard<std::mutex> lock(mutex);
  for (const PythonLayout& layout : *kept)
    if (layout == *symbols.debug_layout) return &layout;
  if (kept->size() >= kMaxKeptLayouts) return nullptr;
  return &kept->emplace_back(*symbols.debug_layout);
}

const PythonLayout* python_layout(uint32_t hexversion) {
  const uint32_t release_level = (hexversion >> 4) & 0xF;  // 0xA alpha, 0xB beta, 0xC candidate, 0xF final
  if (release_level != 0xC && release_level != 0xF) return nullptr;
  switch (hexversion >> 16) {
    case 0x030b: return &kPython311;
    case 0x030c: return &kPython312;
    default: return nullptr;
  }
}

std::optional<std::vector<PythonLineRange>> python311_line_ranges(std::span<const uint8_t> linetable,
                                                                  uint32_t firstlineno) {
  if (linetable.size() > kMaxPythonLineTableBytes) return std::nullopt;
  std::vector<PythonLineRange> ranges;
  int64_t line = firstlineno;
  uint32_t offset = 0;  // at most 16 bytes an entry byte: fits
  size_t at = 0;
  while (at < linetable.size()) {
    const uint8_t first = linetable[at];
    if (!(first & 0x80)) return std::nullopt;
    // An entry runs to the next byte with the entry bit (as CPython's
    // advance() finds it); its form says how many bytes it must have.
    size_t end = at + 1;
    while (end < linetable.size() && !(linetable[end] & 0x80)) ++end;
    EntryBytes rest{linetable.subspan(at + 1, end - at - 1)};
    const unsigned code = (first >> 3) & 15;
    const uint32_t bytes = ((first & 7) + 1) * 2;
    int64_t delta = 0;
    uint64_t ignored = 0;
    uint8_t column = 0;
    bool located = true;
    if (code <= kShortFormLast) {
      if (!rest.byte(column)) return std::nullopt;  // line unchanged; columns in the byte
    } else if (code >= kOneLine0 && code <= kOneLine2) {
      delta = code - kOneLine0;
      if (!rest.byte(column) || !rest.byte(column)) return std::nullopt;
    } else if (code == kNoColumns) {
      if (!rest.signed_varint(delta)) return std::nullopt;
    } else if (code == kLongForm) {
      if (!rest.signed_varint(delta) || !rest.varint(ignored) || !rest.varint(ignored) || !rest.varint(ignored))
        return std::nullopt;
    } else {
      static_assert(kNoLocation == 15);
      located = false;  // the line stays for the next entry
    }
    if (!rest.finished()) return std::nullopt;
    line += delta;
    if (line < 0 || line > INT32_MAX) return std::nullopt;
    PythonLineRange range{offset, offset + bytes, std::nullopt};
    if (located) range.line = static_cast<uint32_t>(line);
    ranges.push_back(range);
    offset += bytes;
    at = end;
  }
  return ranges;
}

std::optional<uint32_t> python311_line(std::span<const uint8_t> linetable, uint32_t firstlineno,
                                       int32_t instr_byte_offset) {
  std::optional<std::vector<PythonLineRange>> ranges = python311_line_ranges(linetable, firstlineno);
  if (!ranges) return std::nullopt;
  // CPython (PyCode_Addr2Line): before the first instruction, the first line.
  if (instr_byte_offset == -2) return firstlineno;
  if (instr_byte_offset < 0 || instr_byte_offset % 2 != 0) return std::nullopt;
  const uint32_t offset = static_cast<uint32_t>(instr_byte_offset);
  auto it = std::upper_bound(ranges->begin(), ranges->end(), offset,
                             [](uint32_t value, const PythonLineRange& r) { return value < r.end; });
  if (it == ranges->end() || offset < it->start) return std::nullopt;
  return it->line;
}

// ---- The namer ----

namespace {

// How a read went; PythonCodeNamer::Outcome has the same values.
enum class ReadResult : uint8_t { Ok, Unreadable, Implausible };
constexpr ReadResult kOk = ReadResult::Ok, kUnreadable = ReadResult::Unreadable,
                     kImplausible = ReadResult::Implausible;

// Checks that `candidate` is CPython's static type `kind` (read once per
// process: `known` holds the address verified before).
ReadResult check_type(const PythonLayout& layout, const MemoryReader& read, TypeKind kind, uint64_t candidate,
                      uint64_t& known) {
  if (candidate != 0 && candidate == known) return kOk;
  const uint32_t header_size = std::max(layout.type_name, layout.type_flags) + 8;
  if (!plausible_object(candidate, header_size)) return kImplausible;
  std::vector<uint8_t> header(header_size);
  if (!readable(read, candidate, header)) return kUnreadable;
  const uint64_t flags = load_u64(&header[layout.type_flags]);
  const uint64_t name_address = load_u64(&header[layout.type_name]);
  const std::string_view expected = kind == TypeKind::Str ? "str" : kind == TypeKind::Bytes ? "bytes" : "code";
  const uint64_t subclass_flag = kind == TypeKind::Str     ? kTypeFlagUnicodeSubclass
                                 : kind == TypeKind::Bytes ? kTypeFlagBytesSubclass
                                                           : 0;
  if ((flags & kTypeFlagHeapType) || !(flags & kTypeFlagReady) || (flags & subclass_flag) != subclass_flag)
    return kImplausible;
  // The name with its terminating NUL ("str", not "string"), a byte at a
  // time: a shorter name may end just before unmapped memory.
  if (name_address == 0 || name_address > UINT64_MAX - expected.size()) return kImplausible;
  for (size_t i = 0; i <= expected.size(); ++i) {
    uint8_t c = 0;
    if (!readable(read, name_address + i, std::span<uint8_t>(&c, 1))) return kUnreadable;
    if (c != (i < expected.size() ? static_cast<uint8_t>(expected[i]) : 0)) return kImplausible;
  }
  known = candidate;
  return kOk;
}

// A str object: compact (its characters follow the header), ready (3.11),
// of the narrowest kind that holds its characters (as CPython makes every
// compact string), NUL-terminated, at most kMaxPythonStringBytes.
ReadResult read_string(const PythonLayout& layout, const MemoryReader& read, uint64_t address, uint64_t& str_type,
                       std::string& out) {
  const uint32_t header_size = layout.unicode_ascii_size;
  if (header_size < layout.unicode_state + 4 || header_size < layout.unicode_length + 8 ||
      header_size < layout.object_type + 8 || !plausible_object(address, layout.unicode_compact_size))
    return kImplausible;
  std::vector<uint8_t> header(header_size);
  if (!readable(read, address, header)) return kUnreadable;
  if (ReadResult type = check_type(layout, read, TypeKind::Str, load_u64(&header[layout.object_type]), str_type);
      type != kOk)
    return type;
  const uint64_t length = load_u64(&header[layout.unicode_length]);  // Py_ssize_t: negative is huge here
  const uint32_t state = load_u32(&header[layout.unicode_state]);
  const uint32_t kind = (state >> layout.unicode_kind_shift) & 7;
  const bool compact = (state >> layout.unicode_compact_shift) & 1;
  const bool ascii = (state >> layout.unicode_ascii_shift) & 1;
  const bool ready = layout.unicode_ready_shift == kPythonAbsent || ((state >> layout.unicode_ready_shift) & 1);
  if (!compact || !ready || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1)) return kImplausible;
  if (length > kMaxPythonStringBytes / kind) return kImplausible;
  const uint64_t data = address + (ascii ? layout.unicode_ascii_size : layout.unicode_compact_size);
  std::vector<uint8_t> bytes((length + 1) * kind);  // with the terminating NUL
  if (!readable(read, data, bytes)) return kUnreadable;
  out.clear();
  out.reserve(length * (ascii ? 1 : kind == 1 ? 2 : kind == 2 ? 3 : 4));  // UTF-8's bytes at most
  uint32_t widest = 0;
  for (uint64_t i = 0; i <= length; ++i) {
    const uint32_t c = static_cast<uint32_t>(decode_unsigned(&bytes[i * kind], kind, true));
    if (i == length) {
      if (c != 0) return kImplausible;
      break;
    }
    if (c > 0x10FFFF) return kImplausible;
    widest = std::max(widest, c);
    append_utf8(out, c);
  }
  const bool canonical = ascii ? widest < 0x80
                         : kind == 1 ? widest >= 0x80
                         : kind == 2 ? widest >= 0x100
                                     : widest >= 0x10000;
  return canonical ? kOk : kImplausible;
}

// A bytes object's contents, at most kMaxPythonLineTableBytes.
ReadResult read_line_table(const PythonLayout& layout, const MemoryReader& read, uint64_t address,
                           uint64_t& bytes_type, std::vector<uint8_t>& out) {
  const uint32_t header_size = layout.bytes_data;
  if (header_size < layout.bytes_size + 8 || header_size < layout.object_type + 8 ||
      !plausible_object(address, header_size))
    return kImplausible;
  std::vector<uint8_t> header(header_size);
  if (!readable(read, address, header)) return kUnreadable;
  if (ReadResult type = check_type(layout, read, TypeKind::Bytes, load_u64(&header[layout.object_type]), bytes_type);
      type != kOk)
    return type;
  const uint64_t size = load_u64(&header[layout.bytes_size]);
  if (size > kMaxPythonLineTableBytes) return kImplausible;
  out.resize(size + 1);  // with the NUL CPython keeps after every bytes object
  if (!readable(read, address + layout.bytes_data, out)) return kUnreadable;
  if (out.back() != 0) return kImplausible;
  out.pop_back();
  return kOk;
}

}  // namespace

PythonCodeNamer::Outcome PythonCodeNamer::read_fields(const PythonLayout& layout, uint64_t code,
                                                      const MemoryReader& read, ProcessTypes& types,
                                                      CodeFields& fields) const {
  uint32_t header_size = layout.code_firstlineno + 4;
  for (uint32_t pointer : {layout.object_type, layout.var_object_size, layout.code_filename, layout.code_name,
                           layout.code_qualname, layout.code_linetable})
    header_size = std::max(header_size, pointer + 8);
  if (!plausible_object(code, header_size)) return Outcome::Implausible;
  std::vector<uint8_t> header(header_size);
  if (!readable(read, code, header)) return Outcome::Unreadable;
  fields.version = layout.version;
  fields.type = load_u64(&header[layout.object_type]);
  fields.code_units = load_u64(&header[layout.var_object_size]);
  fields.firstlineno = static_cast<int32_t>(load_u32(&header[layout.code_firstlineno]));
  fields.filename = load_u64(&header[layout.code_filename]);
  fields.name = load_u64(&header[layout.code_name]);
  fields.qualname = load_u64(&header[layout.code_qualname]);
  fields.linetable = load_u64(&header[layout.code_linetable]);
  static_assert(static_cast<int>(Outcome::Implausible) == static_cast<int>(ReadResult::Implausible) &&
                static_cast<int>(Outcome::Unreadable) == static_cast<int>(ReadResult::Unreadable));
  if (Outcome type = static_cast<Outcome>(check_type(layout, read, TypeKind::Code, fields.type, types.code));
      type != Outcome::Ok)
    return type;
  if (fields.code_units == 0 || fields.code_units > kMaxCodeUnits || fields.firstlineno < 0)
    return Outcome::Implausible;
  for (uint64_t pointer : {fields.filename, fields.name, fields.qualname, fields.linetable})
    if (!plausible_object(pointer, 64)) return Outcome::Implausible;
  return Outcome::Ok;
}

PythonCodeNamer::Outcome PythonCodeNamer::read_entry(const PythonLayout& layout, const CodeFields& fields,
                                                     const MemoryReader& read, ProcessTypes& types,
                                                     Entry& entry) const {
  if (Outcome got = static_cast<Outcome>(read_string(layout, read, fields.qualname, types.str, entry.qualname));
      got != Outcome::Ok)
    return got;
  if (Outcome got = static_cast<Outcome>(read_string(layout, read, fields.filename, types.str, entry.file));
      got != Outcome::Ok)
    return got;
  std::vector<uint8_t> linetable;
  if (Outcome got = static_cast<Outcome>(read_line_table(layout, read, fields.linetable, types.bytes, linetable));
      got != Outcome::Ok)
    return got;
  std::optional<std::vector<PythonLineRange>> ranges =
      python311_line_ranges(linetable, static_cast<uint32_t>(fields.firstlineno));
  // CPython's table covers every code unit of the object: a table that
  // does not is another object's, or garbage.
  if (!ranges || (ranges->empty() ? 0 : ranges->back().end) != fields.code_units * 2) return Outcome::Implausible;
  entry.lines.clear();
  for (const PythonLineRange& range : *ranges) {
    // Code CPython gives no line (the POP_TOP a generator or coroutine runs
    // when first resumed, some cleanup) or line 0 (a module's RESUME) is
    // named by the line before it, the first line at the start: a frame
    // always says where it is.
    const uint32_t line = range.line && *range.line != 0 ? *range.line
                          : entry.lines.empty()          ? static_cast<uint32_t>(fields.firstlineno)
                                                         : entry.lines.back().line;
    if (!entry.lines.empty() && entry.lines.back().line == line)
      entry.lines.back().end = range.end;  // runs of one line merged
    else
      entry.lines.push_back({range.end, line});
  }
  entry.lines.shrink_to_fit();
  entry.qualname.shrink_to_fit();
  entry.file.shrink_to_fit();
  entry.fields = fields;
  return Outcome::Ok;
}

std::optional<PythonFrameName> PythonCodeNamer::answer(const Entry& entry, int32_t instr_byte_offset) {
  PythonFrameName name{entry.qualname, entry.file, 0};
  if (instr_byte_offset == -2) {
    name.line = static_cast<uint32_t>(entry.fields.firstlineno);
  } else {
    if (instr_byte_offset < 0 || instr_byte_offset % 2 != 0 ||
        static_cast<uint64_t>(instr_byte_offset) >= entry.fields.code_units * 2) {
      ++stats_.bad_offset;
      return std::nullopt;
    }
    const uint32_t offset = static_cast<uint32_t>(instr_byte_offset);
    auto run = std::upper_bound(entry.lines.begin(), entry.lines.end(), offset,
                                [](uint32_t value, const LineRun& r) { return value < r.end; });
    if (run != entry.lines.end()) name.line = run->line;
  }
  ++stats_.named;
  return name;
}

void PythonCodeNamer::drop(std::list<Entry>::iterator it) {
  auto process = processes_.find(it->pid);
  if (process != processes_.end()) {
    process->second.entries.erase(it->code);
    if (process->second.entries.empty()) processes_.erase(process);
  }
  cached_bytes_ -= it->bytes;
  lru_.erase(it);
}

void PythonCodeNamer::evict_to_bounds() {
  while (!lru_.empty() && (lru_.size() > options_.max_entries || cached_bytes_ > options_.max_bytes)) {
    drop(std::prev(lru_.end()));
    ++stats_.evicted;
  }
}

void PythonCodeNamer::forget(uint32_t pid) {
  auto process = processes_.find(pid);
  if (process == processes_.end()) return;
  for (auto& [code, it] : process->second.entries) {
    cached_bytes_ -= it->bytes;
    lru_.erase(it);
  }
  processes_.erase(process);
}

std::optional<PythonFrameName> PythonCodeNamer::name(uint32_t pid, const PythonLayout& layout, uint64_t code,
                                                     int32_t instr_byte_offset, const MemoryReader& read,
                                                     uint64_t now_ns) {
  if (!usable(layout)) {
    ++stats_.implausible;
    return std::nullopt;
  }
  // The types learnt for this process; kept only while it has entries.
  ProcessTypes types;
  std::optional<CodeFields> fields;
  if (auto process = processes_.find(pid); process != processes_.end()) {
    types = process->second.types;
    if (auto found = process->second.entries.find(code); found != process->second.entries.end()) {
      auto it = found->second;
      const bool fresh = it->fields.version == layout.version && now_ns >= it->validated_ns &&
                         now_ns - it->validated_ns < options_.revalidate_ns;
      if (!fresh) {
        CodeFields now;
        const Outcome outcome = read_fields(layout, code, read, types, now);
        if (outcome != Outcome::Ok) {
          drop(it);
          ++(outcome == Outcome::Unreadable ? stats_.unreadable : stats_.implausible);
          return std::nullopt;
        }
        if (now == it->fields) {
          it->validated_ns = now_ns;
        } else {
          // Freed and reused (or another interpreter after exec): read anew.
          ++stats_.revalidated_changed;
          drop(it);
          fields = now;
        }
      }
      if (!fields) {
        lru_.splice(lru_.begin(), lru_, it);
        ++stats_.cache_hits;
        return answer(*it, instr_byte_offset);
      }
    }
  }

  Entry entry;
  entry.pid = pid;
  entry.code = code;
  entry.validated_ns = now_ns;
  Outcome outcome = Outcome::Ok;
  if (!fields) {
    CodeFields read_now;
    outcome = read_fields(layout, code, read, types, read_now);
    if (outcome == Outcome::Ok) fields = read_now;
  }
  if (outcome == Outcome::Ok) outcome = read_entry(layout, *fields, read, types, entry);
  if (outcome != Outcome::Ok) {
    ++(outcome == Outcome::Unreadable ? stats_.unreadable : stats_.implausible);
    return std::nullopt;
  }
  entry.bytes = sizeof(Entry) + entry.qualname.capacity() + entry.file.capacity() +
                entry.lines.capacity() * sizeof(LineRun) + 64;  // list and map nodes
  std::optional<PythonFrameName> result = answer(entry, instr_byte_offset);
  cached_bytes_ += entry.bytes;
  lru_.push_front(std::move(entry));
  Process& process = processes_[pid];
  process.types = types;
  process.entries[code] = lru_.begin();
  evict_to_bounds();
  return result;
}

}  // namespace gsymprof
