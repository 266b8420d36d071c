// gsym/convert/convert.h - ELF/DWARF -> GSYM conversion on elfutils (libelf, libdw).
//
// Follows llvm-gsymutil --convert (LLVM 22) rule for rule, so lookups in our
// files equal lookups in LLVM's (and for inputs without symbol aliases the
// bytes are identical to `llvm-gsymutil --num-threads=1`):
//   base address = first PT_LOAD p_vaddr; text ranges = SHF_EXECINSTR
//   sections; build ID from .note.gnu.build-id; DWARF subprograms per range
//   with LLVM's names, per-range line tables and inline trees (see
//   dwarf_unit_converter.h); then defined STT_FUNC symbols in text ranges.
// Deliberate differences (see gsym/README.md, "Converter"), and the
// opt-in profiler names (ConvertOptions::plt_names, code_labels):
//   - .dynsym is used when there is no .symtab (LLVM ignores .dynsym, so a
//     stripped library converts to nothing there);
//   - among records with one range the Builder keeps a fixed one (greatest
//     name) where LLVM keeps the last added, so output never depends on
//     input or thread order;
//   - the output is the same whatever `threads` is (LLVM's is not).
// Split DWARF: skeleton units are converted from their .dwo or .dwp unit
// (split_dwarf.h); dwz alt files are read (.gnu_debugaltlink).
// Not supported: DW_AT_LLVM_stmt_sequence (ignored), ET_REL objects.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gsym/base/expected.h"

namespace gsym {

struct ConvertOptions {
  unsigned threads = 0;            // 0 = number of online CPUs
  // Explicit separate debug file ("" = search). Its build ID must equal the
  // ELF's when both have one.
  std::string debug_file;
  // Roots of the gdb-style search (DIR/.build-id/xx/rest.debug, then
  // .gnu_debuglink next to the ELF, in its .debug/, under DIR/<its dir>).
  std::vector<std::string> debug_directories = {"/usr/lib/debug"};
  bool search_debug_file = true;   // search when the ELF itself has no DWARF
  // Split DWARF package (.dwp) of the skeleton units ("" = ELF.dwp beside
  // the ELF when present). Given and unusable: an error. Units it lacks are
  // looked for as .dwo files (split_dwarf.h).
  std::string dwp_file;
  bool inline_info = true;
  // Whether the DIE walk may skip the children of DIEs that hold no code
  // (see UnitConverterOptions); the output is the same either way, which
  // tests check by turning it off.
  bool skip_children_without_code = true;
  // GSYM version written: 1 (the default: LLVM <= 22 reads only that) or 2.
  uint16_t gsym_version = 1;
  // Profiler names (off by default, so output stays byte-identical to
  // llvm-gsymutil's; gsymprof's cache turns both on, `gsym convert
  // --profiler-names` too). They only add records where LLVM's file has
  // none of their own, so lookups elsewhere are unchanged:
  //  - plt_names: every PLT stub (ElfImage::plt_entries: `strlen@plt`, PLT0
  //    as `.plt`) becomes a function of its entry's size, read from the
  //    input ELF (a debug file's PLT sections are empty), skipped where a
  //    sized function already covers its start. Without them a zero-size
  //    symbol before the PLT (`_init`) names every stub.
  //  - code_labels: local untyped symbols inside code (ElfImage::
  //    code_label_symbols: ld.so's `_start`, `_dl_start_user`) become
  //    zero-size functions, as typed zero-size symbols are, when no sized
  //    function (DWARF or symbol) covers them; LLVM reads only STT_FUNC.
  bool plt_names = false;
  bool code_labels = false;
  //  - entry_name: a program's ELF entry point (ElfImage::program_entry)
  //    that no symbol covers, named kEntryName ("_start", the toolchains'
  //    name for it), so a stripped program's stacks end at a named root.
  bool entry_name = false;
  //  - signal_frames: signal trampolines (FDEs whose CIE has the 'S'
  //    augmentation) no symbol covers, named kSignalFrameName.
  bool signal_frames = false;
  // Called now and then with (units done, units total); may be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Called with each non-fatal warning (a malformed CU skipped, ...).
  std::function<void(const std::string&)> warning;
  // The name the input is known by when `elf_path` is another name for the
  // same file (e.g. /proc/self/fd/N of a descriptor already checked): used
  // in messages and for the .gnu_debuglink search beside it. "" = elf_path.
  std::string known_as;
};

// Bumped whenever the converter's output for a given input may change, so
// that remembered results (a cache keyed by it) are not trusted across
// versions: a converter fix re-converts instead of reusing an older file.
// c3: the cache's conversions name PLT stubs and code labels.
// c4: dwz alt references resolved in the alt file (names, qualifiers) and
// split DWARF (.dwo/.dwp) read.
// c5: a stripped program's entry point and signal trampolines are named
// (entry_name, signal_frames).
inline constexpr const char* kConverterVersion = "c5";
inline constexpr const char* kEntryName = "_start";
inline constexpr const char* kSignalFrameName = "[signal]";

struct ConvertStats {
  std::string debug_file_used;     // "" when DWARF came from the input itself
  std::string alt_file_used;       // the dwz alt file read ("" = none linked or found)
  std::string dwp_file_used;       // the .dwp read ("" = none)
  uint64_t split_units = 0;         // skeleton units whose split unit was read
  uint64_t split_units_missing = 0; // skeletons whose .dwo (or .dwp entry) was not found: warned
  uint64_t dwo_files_read = 0;
  uint64_t compile_units = 0;
  uint64_t skipped_units = 0;      // malformed CUs skipped with a warning
  uint64_t dwarf_functions = 0;
  uint64_t symbol_functions = 0;
  uint64_t plt_functions = 0;      // PLT stubs added (plt_names)
  uint64_t label_functions = 0;    // code labels added (code_labels)
  uint64_t line_rows = 0;
  uint64_t inline_nodes = 0;
  uint64_t functions_written = 0;
  bool used_dynsym = false;        // .symtab absent, .dynsym used instead
  bool used_minidebuginfo = false; // symbols from .gnu_debugdata's .symtab too
  // Why the DWARF was not used (corrupt first unit header, a compressed
  // section refused by check_section_sizes, a libdw error); the functions
  // then come from the symbol table alone, and options.warning said so.
  std::string dwarf_error;
  // Every file read (the input, its debug file, a dwz alt file, .dwo and
  // .dwp files) could only
  // have been written by root or us (gsym::writable_only_by_us).
  bool inputs_writable_only_by_us = true;
};

// Converts `elf_path` and returns the encoded GSYM bytes. Errors (one line,
// starting with the offending path): not ELF, truncated ELF, unreadable or
// corrupt DWARF (first unit header), debug-file mismatch, no functions at all
// (ErrorCode::NoFunctions: a stripped file without a debug file, which
// callers tell from real failures by that code).
// A malformed compile unit is skipped: options.warning + stats.skipped_units.
Expected<std::vector<uint8_t>> convert_elf(const std::string& elf_path,
                                           const ConvertOptions& options,
                                           ConvertStats* stats = nullptr);

// convert_elf() + atomic write (temp file + rename; no partial output). An
// existing non-regular `out_path` (/dev/null, a pipe) is written in place.
Status convert_elf_to_file(const std::string& elf_path, const std::string& out_path,
                           const ConvertOptions& options, ConvertStats* stats = nullptr);

}  // namespace gsym
