// userspace/cli/cli_common.h - the pieces several commands share: the
// targeting flags (profile, record), the symbolizing flags and the GSYM
// locator (profile, symbolize), the output formats, and writing an output to
// stdout or a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/report/run_summary.h"
#include "userspace/cli/command_line.h"
#include "userspace/output/flamegraph.h"
#include "userspace/session/profile_session.h"
#include "userspace/session/target_options.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

// -p/--pid, -F/--freq, -d/--duration, --call-graph, --max-depth,
// --user-callchains and "-- CMD ARGS..." into `options`.
void add_target_flags(CommandLine& cli, TargetOptions& options);
// Runs the one-shot session (profile, record) with the terminal's start
// line, live line and end, and the kernel's notices first.
gsym::Expected<Capture> sample_with_progress(SessionOptions& session, SessionStats& stats);

// The same for the agent: no -d (it runs until SIGTERM) and no -- CMD.
void add_agent_target_flags(CommandLine& cli, TargetOptions& options);

// How `profile` and `symbolize` find GSYM files and print frames.
struct SymbolizeFlags {
  std::vector<std::string> gsym_dirs;
  SymbolizeOptions options;
};

// --gsym-dir, --no-inline, --pid-in-comm into `flags`.
void add_symbolize_flags(CommandLine& cli, SymbolizeFlags& flags);

// A locator searching `gsym_dirs` in order, then the cache (default_cache_dir).
// Error: a dir that cannot be indexed (the message names it).
// Who uses it: a command, once (conversions in process, lookup indexes
// built), or the agent, for days (LocatorOptions::convert_in_child, no
// lookup_indexes: its memory stays that of what it names), or one of the
// agent's pulls, whose client waits (only quick conversions, in process;
// no debuginfod).
enum class LocatorUse : uint8_t { Command, Daemon, Pull };
gsym::Expected<GsymLocator> open_locator(const std::vector<std::string>& gsym_dirs,
                                         LocatorUse use = LocatorUse::Command);

// The locator's notes, one "gsymprof: note: ..." line each on stderr.
void print_locator_notes(const GsymLocator& locator);

// Checked before sampling, so that a typo in -o costs no profile. Error:
// "PATH: directory DIR does not exist" ("... is not a directory", "... is
// not writable").
gsym::Status check_output_directory(const std::string& path);

// `text` to stdout ("" path) or written atomically to `path`.
gsym::Status write_output(std::string_view text, const std::string& path);

// --format of `profile` and `symbolize`.
enum class OutputFormat { Folded, Json, Pprof, Speedscope };
void add_format_flag(CommandLine& cli, OutputFormat& format);
// What a file of `format` holds, as the summary names it ("folded stacks").
const char* format_contents(OutputFormat format);
// pprof is binary: not to a terminal. Error (a usage error) when `output_path`
// is "" and stdout is a terminal.
std::string check_format_destination(OutputFormat format, const std::string& output_path);

// --svg FILE and --title TITLE (profile, symbolize): a flame graph of the
// folded stacks beside the output.
struct SvgFlags {
  std::string path;
  std::string title;
  bool title_given = false;  // --title: kept whatever the capture measures
};
// The flame graph's look for a capture measuring `clock`: off the CPU and
// wall-clock graphs count nanoseconds, are titled as such (unless --title)
// and drawn in blues, as flamegraph.pl draws off-CPU time.
FlamegraphOptions svg_options(const SvgFlags& flags, ProfileClock clock);
void add_svg_flags(CommandLine& cli, SvgFlags& flags);
// The usage error of --svg with a --format other than folded ("" = fine).
std::string check_svg_format(const SvgFlags& flags, OutputFormat format);

// --stats FILE: names it among the files written and writes the summary's
// facts to it as JSON (nothing when `path` is empty).
gsym::Status write_stats_file(RunSummary& summary, const std::string& path);

// --stats FILE (the summary's facts as JSON: run_summary.h) and -v/--verbose
// (every summary line, zero counters and internals too).
void add_summary_flags(CommandLine& cli, std::string& stats_path, bool& verbose);

// `capture` symbolized and rendered in `format`, with what the summary says.
struct RenderedOutput {
  std::string bytes;                  // folded text, JSON, gzipped pprof or speedscope JSON
  std::vector<ModuleReport> modules;  // every module a counted stack uses
  size_t unique_stacks = 0;           // stacks (folded, JSON) or samples (pprof, speedscope) written
};
// `free_stacks`: drop the capture's stacks once they are no longer needed,
// before the output is built (they are the biggest part of a capture).
gsym::Expected<RenderedOutput> render(Capture& capture, GsymLocator& locator,
                                      const SymbolizeOptions& options, OutputFormat format,
                                      bool free_stacks);

}  // namespace gsymprof
