// userspace/cli/cmd_gsym_convert.cpp - `gsymprof gsym convert ELF [-o OUT]
// [--threads N] [--debug-file PATH]`: ELF/DWARF -> GSYM with gsym::convert.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "gsym/convert.h"
#include "userspace/cli/commands.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {

namespace {

constexpr const char* kConvertUsage =
    "usage: gsymprof gsym convert ELF [-o OUT] [--threads N] [--debug-file PATH]\n"
    "\n"
    "Converts an executable or shared library (its DWARF and symbol table) to a\n"
    "GSYM file, written atomically. When ELF has no DWARF, its separate debug\n"
    "file is found by build ID under /usr/lib/debug/.build-id/, then by\n"
    ".gnu_debuglink (checked by build ID or CRC).\n"
    "\n"
    "options:\n"
    "  -o, --output OUT    output path (default: ELF.gsym)\n"
    "  --threads N         compile units converted in parallel (default: CPUs)\n"
    "  --debug-file PATH   take the DWARF from PATH (build IDs must match)\n"
    "  -h, --help          this help\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "gsymprof gsym convert: %s\n%s", message.c_str(), kConvertUsage);
  return 2;
}

bool parse_threads(const char* text, unsigned& out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(text, &end, 10);
  if (errno || *end || v == 0 || v > 1024 || text[0] == '-') return false;
  out = static_cast<unsigned>(v);
  return true;
}

}  // namespace

int cmd_gsym_convert(int argc, char** argv) {
  std::string input, output;
  gsym::ConvertOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)flag;
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kConvertUsage, stdout);
      return 0;
    } else if (arg == "-o" || arg == "--output") {
      const char* v = value("-o");
      if (!v || !*v) return usage_error("-o needs a path");
      output = v;
    } else if (arg == "--threads") {
      if (!parse_threads(value("--threads"), options.threads))
        return usage_error("--threads needs a number from 1 to 1024");
    } else if (arg.starts_with("--threads=")) {
      if (!parse_threads(argv[i] + 10, options.threads))
        return usage_error("--threads needs a number from 1 to 1024");
    } else if (arg == "--debug-file") {
      const char* v = value("--debug-file");
      if (!v || !*v) return usage_error("--debug-file needs a path");
      options.debug_file = v;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + std::string(arg) + "'");
    } else if (input.empty()) {
      input = std::string(arg);
    } else {
      return usage_error("only one ELF file may be given");
    }
  }
  if (input.empty()) return usage_error("missing ELF file");
  if (output.empty()) output = input + ".gsym";

  const bool terminal = isatty(STDERR_FILENO);
  bool progress_shown = false;
  options.progress = [&](uint64_t done, uint64_t total) {
    // Only worth a line on a terminal, and only for inputs that take a while.
    if (!terminal || total < 256) return;
    std::fprintf(stderr, "\rconverting %s: %llu/%llu units", escape_control(input).c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
    progress_shown = true;
  };
  uint64_t warnings = 0;
  options.warning = [&](const std::string& message) {
    ++warnings;
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
  if (!status) {
    std::fprintf(stderr, "gsymprof gsym convert: %s\n", escape_control(status.error().message).c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string source;
  if (!stats.debug_file_used.empty()) source = ", DWARF from " + stats.debug_file_used;
  if (stats.used_dynsym) source += ", symbols from .dynsym";
  std::fprintf(stderr,
               "%s -> %s: %llu functions (%llu from DWARF, %llu from symbols), %llu units "
               "(%llu skipped)%s, %.2f s\n",
               escape_control(input).c_str(), escape_control(output).c_str(),
               static_cast<unsigned long long>(stats.functions_written),
               static_cast<unsigned long long>(stats.dwarf_functions),
               static_cast<unsigned long long>(stats.symbol_functions),
               static_cast<unsigned long long>(stats.compile_units),
               static_cast<unsigned long long>(stats.skipped_units), source.c_str(), seconds);
  (void)warnings;
  return 0;
}

}  // namespace gsymprof
