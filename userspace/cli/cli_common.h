// userspace/cli/cli_common.h - the pieces several commands share: the
// targeting flags (profile, record), the symbolizing flags and the GSYM
// locator (profile, symbolize), the output formats, and writing an output to
// stdout or a file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/cli/command_line.h"
#include "userspace/session/target_options.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

// -p, -F, -d, --call-graph and "-- CMD ARGS..." into `options`.
void add_target_flags(CommandLine& cli, TargetOptions& options);

// How `profile` and `symbolize` find GSYM files and print frames.
struct SymbolizeFlags {
  std::vector<std::string> gsym_dirs;
  SymbolizeOptions options;
};

// --gsym-dir, --no-inline, --pid-in-comm into `flags`.
void add_symbolize_flags(CommandLine& cli, SymbolizeFlags& flags);

// A locator searching `gsym_dirs` in order, then the cache (default_cache_dir).
// Error: a dir that cannot be indexed (the message names it).
gsym::Expected<GsymLocator> open_locator(const std::vector<std::string>& gsym_dirs);

// "  " + describe(report) on stderr.
void print_module_report(const ModuleReport& report);

// The unresolved modules whose problem has a remedy (ModuleProblem:
// stripped, exited first, file gone, file replaced), one line per kind:
// how many, their names, and what to do. `and_the_rest`: also
// print_module_report of every other unresolved module (real errors);
// `profile` prints only these, `symbolize` lists every module anyway.
void print_unresolved_modules(const std::vector<ModuleReport>& reports, bool and_the_rest);
// The resolved modules identified by a Go build ID or a content hash (the
// unresolved ones are listed with their reasons anyway): a count line, then
// print_module_report of each, so the summary says which identity served.
void print_fallback_identities(const std::vector<ModuleReport>& reports);

// The locator's notes, one "gsymprof: note: ..." line each on stderr.
void print_locator_notes(const GsymLocator& locator);

// Checked before sampling, so that a typo in -o costs no profile. Error:
// "PATH: directory DIR is not writable".
gsym::Status check_output_directory(const std::string& path);

// `text` to stdout ("" path) or written atomically to `path`.
gsym::Status write_output(std::string_view text, const std::string& path);

// --format of `profile` and `symbolize`.
enum class OutputFormat { Folded, Json, Pprof };
void add_format_flag(CommandLine& cli, OutputFormat& format);
// pprof is binary: not to a terminal. Error (a usage error) when `output_path`
// is "" and stdout is a terminal.
std::string check_format_destination(OutputFormat format, const std::string& output_path);

// `capture` symbolized and rendered in `format`, with what the summary says.
struct RenderedOutput {
  std::string bytes;                  // folded text, JSON, or gzipped pprof
  std::vector<ModuleReport> modules;  // every module a counted stack uses
  size_t unique_stacks = 0;           // stacks (folded, JSON) or samples (pprof) written
};
// `free_stacks`: drop the capture's stacks once they are no longer needed,
// before the output is built (they are the biggest part of a capture).
gsym::Expected<RenderedOutput> render(Capture& capture, GsymLocator& locator,
                                      const SymbolizeOptions& options, OutputFormat format,
                                      bool free_stacks);

}  // namespace gsymprof
