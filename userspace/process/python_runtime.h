// userspace/process/python_runtime.h - CPython frames named from the
// interpreter's own objects: which module is a CPython runtime (its ELF
// symbols), where the structures the BPF walk and the naming read lie (a
// table per minor version for 3.11 and 3.12, measured from the headers by
// tests/tools/python_offsets.c; for 3.13, the _Py_DebugOffsets the
// interpreter publishes at the start of _PyRuntime), a code object's line
// table (3.11's format, kept by 3.12 and 3.13), and a cache of code objects
// read from a live process.
//
// The BPF sampler records, per sample of a CPython process, a chain of
// (code object address, instruction byte offset from co_code_adaptive,
// is_entry); PythonCodeNamer turns each into qualname, file and line.
//
// A process's memory is untrusted and changes under us: every read may
// fail, every value may be garbage or stale (a code object freed and its
// memory reused). Nothing here trusts a size before bounding it, loops over
// more than the bytes read, or names an object whose type, strings and line
// table do not hold together: a wrong name is worse than no name.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gsym/base/expected.h"

namespace gsymprof {

// ---- Where things lie, per minor version ----

// A member this version does not have (3.12: no runtime_tstate_current, no
// frame_is_entry; 3.11: no frame_owned_by_cstack, unicode_ready_shift is 3.11's
// only; 3.13: no cframe_current_frame).
inline constexpr uint32_t kPythonAbsent = UINT32_MAX;

// Offsets (bytes) into CPython's structures for one minor version on x86-64,
// from a table or the interpreter's own debug offsets, never guessed. The member names are the lines
// tests/tools/python_offsets.c prints.
struct PythonLayout {
  uint16_t version = 0;  // 0x030b for 3.11

  // What the BPF walk needs: _PyRuntime -> interpreters -> threads -> the
  // thread's current frame -> previous frames.
  uint32_t runtime_tstate_current = kPythonAbsent;  // _PyRuntimeState.gilstate.tstate_current (3.11): the GIL holder
  uint32_t runtime_interpreters_head = kPythonAbsent;
  uint32_t interp_threads_head = kPythonAbsent;     // PyInterpreterState.threads.head
  uint32_t tstate_next = kPythonAbsent, tstate_interp = kPythonAbsent;
  uint32_t tstate_thread_id = kPythonAbsent;         // pthread_t
  uint32_t tstate_native_thread_id = kPythonAbsent;  // the kernel's tid
  uint32_t tstate_cframe = kPythonAbsent;            // PyThreadState.cframe (3.13: .current_frame)
  uint32_t cframe_current_frame = kPythonAbsent;     // _PyCFrame.current_frame (3.13: absent)
  uint32_t frame_code = kPythonAbsent;               // _PyInterpreterFrame.f_code (3.13: .f_executable)
  uint32_t frame_previous = kPythonAbsent;
  // _Py_CODEUNIT* (3.13: instr_ptr): instr_byte_offset = prev_instr - (code + code_adaptive)
  uint32_t frame_prev_instr = kPythonAbsent;
  uint32_t frame_is_entry = kPythonAbsent;    // bool (3.11): the first frame of a _PyEval_EvalFrameDefault call
  uint32_t frame_owner = kPythonAbsent;       // char: FRAME_OWNED_BY_*
  uint32_t frame_owned_by_generator = kPythonAbsent;  // the owner value of a generator's frame
  // (3.12, 3.13) The owner value of the entry frame each _PyEval_EvalFrameDefault
  // call pushes (its code is a trampoline, not the program's).
  uint32_t frame_owned_by_cstack = kPythonAbsent;
  uint32_t code_adaptive = kPythonAbsent;     // PyCodeObject.co_code_adaptive: the instructions

  // What naming needs.
  uint32_t object_type = kPythonAbsent;      // PyObject.ob_type
  uint32_t var_object_size = kPythonAbsent;  // PyVarObject.ob_size (a code object's: its code units)
  uint32_t type_name = kPythonAbsent;        // PyTypeObject.tp_name (const char*)
  uint32_t type_flags = kPythonAbsent;       // PyTypeObject.tp_flags (unsigned long)
  uint32_t code_firstlineno = kPythonAbsent, code_filename = kPythonAbsent, code_name = kPythonAbsent,
           code_qualname = kPythonAbsent, code_linetable = kPythonAbsent;
  uint32_t unicode_length = kPythonAbsent, unicode_state = kPythonAbsent;  // PyASCIIObject
  uint32_t unicode_ascii_size = kPythonAbsent;    // sizeof(PyASCIIObject): a compact ASCII string's characters follow
  uint32_t unicode_compact_size = kPythonAbsent;  // sizeof(PyCompactUnicodeObject): other compact strings' follow
  // Bit positions in the 32-bit state word: kind (3 bits: 1, 2, 4 bytes a
  // character), compact, ascii, ready (3.11 only).
  uint32_t unicode_kind_shift = kPythonAbsent, unicode_compact_shift = kPythonAbsent,
           unicode_ascii_shift = kPythonAbsent, unicode_ready_shift = kPythonAbsent;
  uint32_t bytes_size = kPythonAbsent, bytes_data = kPythonAbsent;  // PyBytesObject ob_size, ob_sval

  bool operator==(const PythonLayout&) const = default;
};

// The layout of CPython `hexversion`'s minor version (3.11, 3.12), or
// nullptr: no table for it, or an alpha or beta (their structures changed
// between pre-releases). Release candidates and final releases only. 3.13
// has no table: its layout comes from its debug offsets (below).
const PythonLayout* python_layout(uint32_t hexversion);

// sizeof(_Py_DebugOffsets) in CPython 3.13 (Include/internal/
// pycore_runtime.h): the first bytes of _PyRuntime, where the interpreter
// publishes its structures' offsets for out-of-process tools.
inline constexpr size_t kPython313DebugOffsetsBytes = 584;

// The layout of a CPython 3.13 whose _PyRuntime starts with
// `runtime_start` (at least kPython313DebugOffsetsBytes), whose Py_Version
// is `hexversion` and whose _PyRuntime symbol is `runtime_size` bytes (its
// st_size; 0: unknown). The debug offsets give where things lie; what they
// do not (unicode state bits, sizeof(PyCompactUnicodeObject), the frame
// owner values, PyVarObject.ob_size) comes from a table for 3.13, checked
// against the debug offsets where they overlap. nullopt unless: the cookie
// is "xdebugpy"; the debug offsets' version is a 3.13 final release (their
// own layout changed until 3.13.0rc2; 3.14's is not verified) with
// `hexversion`'s major.minor; not free-threaded (another object layout);
// the runtime's size is `runtime_size`; every structure's size is bounded
// and every field read lies within its structure, a frame's within the 72
// bytes the sampler reads before localsplus. A wrong layout would name
// frames wrongly: when in doubt, none.
std::optional<PythonLayout> python_layout_from_debug_offsets(std::span<const uint8_t> runtime_start,
                                                             uint32_t hexversion, uint64_t runtime_size);

// ---- Which module is a CPython runtime ----

struct PythonSymbols {
  uint64_t runtime_vaddr = 0;              // _PyRuntime's st_value
  uint64_t eval_vaddr = 0, eval_size = 0;  // _PyEval_EvalFrameDefault's st_value and st_size (0: absent)
  uint32_t hexversion = 0;                 // Py_Version's value in the file (PY_VERSION_HEX), 0 if absent
  // 3.13: the layout _PyRuntime's debug offsets give, read from the file
  // (_PyRuntime is statically initialized: they are its first bytes there);
  // nullopt for other versions, or when they fail a check.
  std::optional<PythonLayout> debug_layout{};
};

// The CPython symbols of an ELF file's .dynsym (where CPython exports them:
// the executable of a static build such as Debian's python3.11, else
// libpython3.X.so). nullopt when it defines no _PyRuntime: not a CPython
// runtime. Errors: the file is not ELF, or libelf cannot read it.
// `fd` stays the caller's; it is read on demand, never mapped writable.
gsym::Expected<std::optional<PythonSymbols>> read_python_symbols_fd(int fd);
// The same from an ELF libelf has open (module identity reads it once).
gsym::Expected<std::optional<PythonSymbols>> read_python_symbols(Elf* elf);
gsym::Expected<std::optional<PythonSymbols>> read_python_symbols(std::span<const uint8_t> elf_bytes);

// The layout of CPython runtime `symbols`: its version's table (3.11,
// 3.12), else the layout its debug offsets gave (3.13); nullptr: neither,
// its frames stay native. The pointer stays valid for the program's life
// (debug-offset layouts are kept, one copy per distinct layout, a few
// dozen at most: past that, nullptr). Thread-safe.
const PythonLayout* python_layout_for(const PythonSymbols& symbols);

// ---- Line tables (CPython 3.11 Objects/locations.md; 3.12 keeps the format) ----

// One run of instructions: [start, end) bytes from co_code_adaptive, and
// their line; nullopt: an entry without a location (artificial code).
struct PythonLineRange {
  uint32_t start = 0, end = 0;
  std::optional<uint32_t> line;
};

// Largest line table decoded (bigger: not a line table we believe).
inline constexpr size_t kMaxPythonLineTableBytes = size_t{1} << 20;

// Every entry of `linetable`, lines counted from `firstlineno`. nullopt
// when it is malformed anywhere: an entry not starting with the entry bit,
// a varint running past its entry, extra or missing bytes in an entry, a
// line below 0 or above INT32_MAX, more than kMaxPythonLineTableBytes.
std::optional<std::vector<PythonLineRange>> python311_line_ranges(std::span<const uint8_t> linetable,
                                                                  uint32_t firstlineno);

// Line of the instruction at `instr_byte_offset` (bytes from
// co_code_adaptive; -2 is "before the first instruction", a frame that has
// not run yet, whose line is firstlineno as CPython says). nullopt when the
// table is malformed, does not cover the offset, has no location for it, or
// the offset is odd (instructions are 2-byte code units) or another
// negative value.
std::optional<uint32_t> python311_line(std::span<const uint8_t> linetable, uint32_t firstlineno,
                                       int32_t instr_byte_offset);

// ---- Naming code objects of live processes ----

// Copies `out.size()` bytes of the process's memory at `address`; true only
// when every byte was read.
using MemoryReader = std::function<bool(uint64_t address, std::span<uint8_t> out)>;

struct PythonFrameName {
  std::string qualname;  // co_qualname, e.g. "Worker.run" or "<module>" (UTF-8)
  std::string file;      // co_filename as the code object holds it (UTF-8; surrogate escapes as the path's bytes)
  uint32_t line = 0;     // 0: unknown
  bool operator==(const PythonFrameName&) const = default;
};

// Largest string read: its characters' bytes (length x bytes a character).
inline constexpr size_t kMaxPythonStringBytes = 4096;

struct PythonCodeNamerOptions {
  // Code objects cached at most, all processes together; the least recently
  // used goes first.
  size_t max_entries = 16384;
  // Bytes the cached entries may hold together (names and line ranges); the
  // least recently used go first. 16384 typical entries take about 10 MB.
  uint64_t max_bytes = uint64_t{64} << 20;
  // A cached entry older than this is checked again before use.
  uint64_t revalidate_ns = 1'000'000'000;
};

// One per session, used from one thread.
class PythonCodeNamer {
 public:
  explicit PythonCodeNamer(PythonCodeNamerOptions options = {}) : options_(options) {}

  // Names code object `code` of process `pid` at `instr_byte_offset` (bytes
  // from co_code_adaptive, -2 before the first instruction). Reads the code
  // object's fields, strings and line table through `read` on first use and
  // caches them per (pid, code); an entry older than options.revalidate_ns
  // at `now_ns` is re-validated (the code object's type, size, first line
  // and string and line-table pointers read again and compared) so that a
  // freed and reused object is not misnamed for long: changed, it is read
  // anew (revalidated_changed).
  //
  // Checked: the code object's and the line table's types are CPython's
  // `code` and `bytes`, the strings' the `str` type (each type object checked
  // once per process by its name and flags: a static, ready type of that
  // name, with the str or bytes subclass flag); strings are compact, ready
  // (3.11), of a canonical kind, at most kMaxPythonStringBytes; the line
  // table at most kMaxPythonLineTableBytes, well formed, covering exactly
  // the code object's instructions; the offset even, within them (or -2).
  // nullopt when something cannot be read (unreadable) or fails a check
  // (implausible, bad_offset), counted by reason. A line the table gives no
  // location for is 0.
  std::optional<PythonFrameName> name(uint32_t pid, const PythonLayout& layout, uint64_t code,
                                      int32_t instr_byte_offset, const MemoryReader& read, uint64_t now_ns);

  // The process exited (or exec'd): its entries and learnt types go.
  void forget(uint32_t pid);

  struct Stats {
    uint64_t named = 0;        // names returned (cache hits included)
    uint64_t cache_hits = 0;   // ... from a cached entry
    uint64_t unreadable = 0;   // a read failed
    uint64_t implausible = 0;  // read, but not a code object with its strings and line table
    uint64_t bad_offset = 0;   // a good code object, an instruction offset outside it
    uint64_t revalidated_changed = 0;  // a cached entry's object changed: read anew
    uint64_t evicted = 0;      // entries dropped for the bounds
  };
  const Stats& stats() const { return stats_; }
  size_t cached_entries() const { return lru_.size(); }
  uint64_t cached_bytes() const { return cached_bytes_; }

 private:
  // The fields of a code object that identify it; equal on revalidation, the
  // object is taken to be the one cached.
  struct CodeFields {
    uint64_t type = 0, code_units = 0, filename = 0, name = 0, qualname = 0, linetable = 0;
    int64_t firstlineno = 0;
    uint16_t version = 0;
    bool operator==(const CodeFields&) const = default;
  };
  struct LineRun {
    uint32_t end = 0;   // bytes from co_code_adaptive; the run starts where the previous ends
    uint32_t line = 0;  // 0: no location
  };
  struct Entry {
    uint32_t pid = 0;
    uint64_t code = 0;
    CodeFields fields;
    std::string qualname, file;
    std::vector<LineRun> lines;
    uint64_t validated_ns = 0;
    uint64_t bytes = 0;  // what it costs, for max_bytes
  };
  // Type objects verified for a process (0: none yet).
  struct ProcessTypes {
    uint64_t str = 0, bytes = 0, code = 0;
  };
  struct Process {
    ProcessTypes types;
    std::unordered_map<uint64_t, std::list<Entry>::iterator> entries;  // by code address
  };
  enum class Outcome : uint8_t { Ok, Unreadable, Implausible };

  Outcome read_fields(const PythonLayout& layout, uint64_t code, const MemoryReader& read,
                      ProcessTypes& types, CodeFields& fields) const;
  Outcome read_entry(const PythonLayout& layout, const CodeFields& fields, const MemoryReader& read,
                     ProcessTypes& types, Entry& entry) const;
  std::optional<PythonFrameName> answer(const Entry& entry, int32_t instr_byte_offset);
  void drop(std::list<Entry>::iterator it);
  void evict_to_bounds();

  PythonCodeNamerOptions options_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<uint32_t, Process> processes_;
  uint64_t cached_bytes_ = 0;
  Stats stats_;
};

}  // namespace gsymprof
