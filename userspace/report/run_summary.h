// userspace/report/run_summary.h - stage: the end-of-run summary of profile,
// record and symbolize. Its facts are gathered once (RunSummary) and shown
// twice: as "gsymprof: ..." lines on stderr, only those that are non-zero or
// call for action (-v/--verbose adds the rest: zero counters, the ring
// buffer), and as the --stats JSON, every fact under a stable key, for
// scripts and CI.
//
//   gsymprof: 4991 samples taken, 4991 recorded, 0 lost, 1 process, 3 modules,
//             785 unique stacks (5.00 s at 999 Hz, stopped: duration)      [one line]
//   gsymprof: lost by reason / truncated stacks / ...       (loss_summary.h)
//   gsymprof: shallow stacks: ... --call-graph dwarf        (hints: why, and what to do)
//   gsymprof: modules with unnamed frames: 1 of 3           (then one line per kind, with the remedy)
//   gsymprof: wrote out.folded (folded stacks), flame.svg (flame graph)
//   gsymprof: make exited 2                                 (-- CMD only)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "userspace/capture/capture.h"
#include "userspace/report/loss_summary.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof {

struct SessionStats;  // profile_session.h: symbolize never includes the live session

// Stacks with at most this many user frames are shallow: under frame
// pointers, the mark of code built without them.
inline constexpr size_t kShallowUserFrames = 3;

struct WrittenFile {
  std::string path;
  std::string what;  // "folded stacks", "flame graph", "capture", "statistics", ...
};

// Samples per module (basename), most first.
struct ModuleSamples {
  std::string module;
  uint64_t samples = 0;
};

// A line of advice: what the numbers mean and what to do.
struct Hint {
  std::string key;      // stable: "shallow_stacks", "no_cfi", "kernel_thread"
  std::string message;  // one line, without the "gsymprof: " prefix
};

struct RunSummary {
  std::string command;  // "profile", "record", "symbolize"
  // From the capture (summarize_run):
  uint64_t samples = 0;  // recorded
  size_t processes = 0, modules = 0;
  size_t unique_stacks = 0;  // the capture's; profile and symbolize set the symbolized count
  double duration_s = 0;
  uint32_t frequency_hz = 0;
  std::string call_graph;
  std::string clock = "cpu";  // clock_name: "cpu", "off-cpu", "wall"
  // Off the CPU (--off-cpu, --wall): waits with a stack of their own and
  // their time, and those summed without one (short, or runnable).
  uint64_t waits = 0, off_cpu_ns = 0, summed_waits = 0, summed_ns = 0;
  size_t jit_symbols = 0;  // perf-map entries that named frames
  // Runtimes gsymprof would name better with a flag of theirs, with the
  // pids seen (runtime_hints: node, java, python3.12+).
  std::map<std::string, std::vector<uint32_t>> runtimes_to_flag;
  LossSummary losses;
  // Samples with a user stack, those of at most kShallowUserFrames frames,
  // and the modules those shallow stacks end in (their outermost frame in
  // a module).
  uint64_t user_samples = 0, shallow_samples = 0;
  std::vector<ModuleSamples> shallow_ends;
  // Truncated stacks by the module of their outermost frame (where the
  // unwinder stopped), counted when it stopped for lack of CFI.
  std::vector<ModuleSamples> no_cfi_ends;
  // From a live session (profile, record; the caller's, kept alive while
  // the summary is used), and whether it sampled kernel stacks (false:
  // --user-callchains).
  const SessionStats* session = nullptr;
  bool kernel_stacks = true;
  // From symbolization (profile, symbolize): one report per module.
  bool symbolized = false;
  std::vector<ModuleReport> module_reports;
  // Every file written, in order.
  std::vector<WrittenFile> files;
};

// The capture's facts. Call it before the capture's stacks are freed.
RunSummary summarize_run(std::string command, const Capture& capture);

// Whether a module leaves some frames unnamed: unresolved, or resolved from
// symbol tables alone with frames no symbol covers.
bool leaves_frames_unnamed(const ModuleReport& report);

// The hints `summary` calls for, in the order printed.
std::vector<Hint> summary_hints(const RunSummary& summary);

// The summary lines on stderr, from the totals line to the module lines
// (not the files written: print_files_written).
void print_run_summary(const RunSummary& summary, bool verbose);

// "gsymprof: wrote PATH (WHAT), ...", when anything was written. When
// nothing was and folded stacks went to stdout, a terminal, it says what
// those lines are and how to get a flame graph instead.
void print_files_written(const RunSummary& summary, bool folded_to_stdout);

// Every fact of `summary` as one JSON object (format "gsymprof-stats",
// version 1), ending in a newline; the keys are documented in README.md
// ("--stats").
std::string run_summary_json(const RunSummary& summary);

// "  " + describe(report) on stderr.
void print_module_report(const ModuleReport& report);
// The unresolved modules whose problem has a remedy (ModuleProblem:
// stripped, exited first, file gone, file replaced), one line per kind:
// how many, their names, and what to do. `and_the_rest`: also
// print_module_report of every other unresolved module (real errors);
// `profile` prints only these, `symbolize` lists every module anyway.
void print_unresolved_modules(const std::vector<ModuleReport>& reports, bool and_the_rest);

}  // namespace gsymprof
