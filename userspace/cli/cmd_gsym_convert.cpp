// userspace/cli/cmd_gsym_convert.cpp - `gsymprof gsym convert ELF [-o OUT]
// [--threads N] [--debug-file PATH] [--dwp PATH] [--gsym-version 1|2] [--profiler-names]`:
// ELF/DWARF -> GSYM with gsym::convert.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "gsym/convert/convert.h"
#include "userspace/cli/command_line.h"
#include "userspace/cli/commands.h"
#include "userspace/base/parse_number.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {

namespace {

constexpr const char* kAbout =
    "Converts an executable or shared library (its DWARF and symbol table) to a\n"
    "GSYM file, written atomically. When ELF has no DWARF, its separate debug\n"
    "file is found by build ID under /usr/lib/debug/.build-id/, then by\n"
    ".gnu_debuglink (checked by build ID or CRC). Split DWARF is read from the\n"
    "skeleton units' .dwo files (DW_AT_comp_dir/DW_AT_dwo_name, or beside ELF) or\n"
    "a .dwp package; a dwz alt file (.gnu_debugaltlink) by its build ID.\n";

bool parse_threads(const std::string& text, unsigned& out) {
  std::optional<unsigned> value = parse_unsigned<unsigned>(text);
  if (!value || *value == 0 || *value > 1024) return false;
  out = *value;
  return true;
}

// The conversion's one-line result on stderr: counts, sources, time.
void print_result(const std::string& input, const std::string& output,
                  const gsym::ConvertStats& stats, double seconds) {
  std::string source;
  if (!stats.debug_file_used.empty()) source = ", DWARF from " + stats.debug_file_used;
  if (!stats.alt_file_used.empty()) source += ", dwz alt file " + stats.alt_file_used;
  if (stats.split_units || stats.split_units_missing) {
    source += ", " + std::to_string(stats.split_units) + " split units from " +
              (stats.dwp_file_used.empty() ? "" : stats.dwp_file_used + (stats.dwo_files_read ? " and " : "")) +
              (stats.dwo_files_read || stats.dwp_file_used.empty()
                   ? std::to_string(stats.dwo_files_read) + " .dwo files"
                   : std::string());
    if (stats.split_units_missing) source += " (" + std::to_string(stats.split_units_missing) + " missing)";
  }
  if (stats.used_dynsym) source += ", symbols from .dynsym";
  if (stats.used_minidebuginfo) source += " and .gnu_debugdata";
  if (stats.plt_functions || stats.label_functions)
    source += ", " + std::to_string(stats.plt_functions) + " PLT stubs and " +
              std::to_string(stats.label_functions) + " code labels named";
  std::fprintf(stderr,
               "%s -> %s: %llu functions (%llu from DWARF, %llu from symbols), %llu units "
               "(%llu skipped)%s, %.2f s\n",
               escape_control(input).c_str(), escape_control(output).c_str(),
               static_cast<unsigned long long>(stats.functions_written),
               static_cast<unsigned long long>(stats.dwarf_functions),
               static_cast<unsigned long long>(stats.symbol_functions),
               static_cast<unsigned long long>(stats.compile_units),
               static_cast<unsigned long long>(stats.skipped_units), source.c_str(), seconds);
}

}  // namespace

int cmd_gsym_convert(int argc, char** argv) {
  std::string input, output;
  gsym::ConvertOptions options;
  CommandLine cli("gsym convert", kAbout);
  cli.section("arguments");
  cli.argument("ELF", "file", "the executable, shared library or debug file to convert", input);
  cli.section("options");
  cli.path("-o,--output", "OUT", "output path (default: ELF.gsym)", output);
  cli.value("--threads", "N", "compile units converted in parallel (default: CPUs)",
            [&options](const std::string& value) {
              if (!parse_threads(value, options.threads))
                throw UsageError("--threads needs a number from 1 to 1024");
            });
  cli.path("--debug-file", "PATH", "take the DWARF from PATH (build IDs must match)",
           options.debug_file);
  cli.path("--dwp", "PATH",
           "split DWARF package of the skeleton units (default: ELF.dwp beside ELF if present; "
           "units it lacks are read from their .dwo files)",
           options.dwp_file);
  cli.value("--gsym-version", "N",
            "GSYM format version: 1 (default; every LLVM reads it) or 2 (LLVM 23+)",
            [&options](const std::string& value) {
              if (value == "1")
                options.gsym_version = 1;
              else if (value == "2")
                options.gsym_version = 2;
              else
                throw UsageError("--gsym-version must be 1 or 2, not '" + value + "'");
            });
  cli.example("a program, for 'gsymprof symbolize --gsym-dir' on another machine",
              "gsymprof gsym convert ./myprog -o gsyms/myprog.gsym")
      .example("a stripped library, its DWARF from the debug file",
               "gsymprof gsym convert libfoo.so --debug-file libfoo.so.debug -o libfoo.gsym");
  bool profiler_names = false;
  cli.flag("--profiler-names",
           "also name PLT stubs (strlen@plt) and untyped code labels (ld.so's _start), as "
           "gsymprof's cache does; off: byte-identical to llvm-gsymutil",
           [&profiler_names] { profiler_names = true; });
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (output.empty()) output = input + ".gsym";
  options.plt_names = options.code_labels = profiler_names;

  const bool terminal = isatty(STDERR_FILENO);
  bool progress_shown = false;
  options.progress = [&](uint64_t done, uint64_t total) {
    // Only worth a line on a terminal, and only for inputs that take a while.
    if (!terminal || total < 256) return;
    std::fprintf(stderr, "\rconverting %s: %llu/%llu units", escape_control(input).c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
    progress_shown = true;
  };
  options.warning = [&](const std::string& message) {
    if (progress_shown) {
      std::fputs("\n", stderr);
      progress_shown = false;
    }
    std::fprintf(stderr, "gsymprof gsym convert: warning: %s\n", escape_control(message).c_str());
  };

  const auto start = std::chrono::steady_clock::now();
  gsym::ConvertStats stats;
  gsym::Status status = gsym::convert_elf_to_file(input, output, options, &stats);
  if (progress_shown) std::fputs("\n", stderr);
  if (!status) return cli.failure(status.error().message);
  print_result(input, output, stats,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace gsymprof
