// gsym/convert.h - ELF/DWARF -> GSYM conversion on elfutils (libelf, libdw).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gsym/expected.h"

namespace gsym {

struct ConvertOptions {
  unsigned threads = 0;            // 0 = number of online CPUs
  std::string debug_file;          // explicit separate debug file ("" = search)
  std::vector<std::string> debug_directories = {"/usr/lib/debug"};
  bool search_debug_file = true;   // gdb-style lookup when the ELF has no DWARF
  bool inline_info = true;
  // Called now and then with (units done, units total); may be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Called with each non-fatal warning (a malformed CU skipped, ...).
  std::function<void(const std::string&)> warning;
};

struct ConvertStats {
  std::string debug_file_used;     // "" when DWARF came from the input itself
  uint64_t compile_units = 0;
  uint64_t skipped_units = 0;      // malformed CUs skipped with a warning
  uint64_t dwarf_functions = 0;
  uint64_t symbol_functions = 0;
  uint64_t line_rows = 0;
  uint64_t inline_nodes = 0;
  uint64_t functions_written = 0;
  bool used_dynsym = false;        // .symtab absent, .dynsym used instead
};

// Converts `elf_path` and returns the encoded GSYM bytes.
Expected<std::vector<uint8_t>> convert_elf(const std::string& elf_path,
                                           const ConvertOptions& options,
                                           ConvertStats* stats = nullptr);

// convert_elf() + atomic write (temp file + rename; no partial output).
Status convert_elf_to_file(const std::string& elf_path, const std::string& out_path,
                           const ConvertOptions& options, ConvertStats* stats = nullptr);

}  // namespace gsym
