// userspace/symbolize/gsym_locator.h - build ID -> GSYM reader.
//
// Input: a module's identity (build_id.h: a GNU build ID, else a Go build ID,
// else the SHA-256 of its file) and (optionally) a local ELF path.
// Output: a const gsym::Reader* whose header build ID equals the module's,
// or nullptr, plus a ModuleReport saying where it came from or why not.
//
// Sources, in order (first hit wins):
//   1. every --gsym-dir given to add_gsym_dir(), in the order given: each
//      regular file named *.gsym directly in the directory (NOT recursive:
//      a dir is a flat store, as with the cache), under any name, indexed by
//      the build ID in its GSYM header. Files with an empty build ID, or that
//      do not parse, FIFOs and devices are skipped with a note. Among files
//      with equal build IDs the first directory wins, then the bytewise-
//      smallest name. Files others could truncate are read, not mapped.
//   2. readers added in memory with add_gsym_bytes() (tests, conversions that
//      could not be cached);
//   3. the cache directory (LocatorOptions::cache_dir; gsym_cache.h):
//      <buildid-hex>.<gsym::kConverterVersion>.gsym (e.g. 1a2b.c5.gsym), or
//      go-<hex>.<version>.gsym / sha256-<hex>.<version>.gsym for the other
//      identity kinds,
//      private (0700, files 0600), owned by the effective user and writable
//      by nobody else, for reading as for writing; a refused cache is a note;
//   4. when LocatorOptions::convert_missing is set and a local ELF path is
//      given whose own identity (same rule, same kind) equals the module's:
//      gsym::convert_elf() (which finds a separate debug file itself), always
//      with the profiler names (ConvertOptions::plt_names, code_labels:
//      `strlen@plt`, ld.so's `_start`), whatever LocatorOptions::convert says,
//      so a cache file's name says what it holds.
//      With DEBUGINFOD_URLS set (debuginfod_client.h), debuginfod is asked
//      for what the local search lacks: the debug file of an ELF without
//      DWARF whose debug file is not installed, and the executable itself
//      when the local file is missing. A GSYM converted from symbols alone
//      is remembered as such (<buildid-hex>.<version>.symbols beside it) and
//      converted again, asking debuginfod, while debuginfod is configured.
// Trust: the local file is opened once (non-blocking, regular files only)
// and its owner decides. A file only root (or the effective user) could have
// written is the authority for its build ID: its conversion is cached (and a
// failed one remembered as <buildid-hex>.<converter version>.failed, its
// error and a last line "kind: CODE" (gsym::ErrorCode's name), until
// a DIR/.build-id/ debug file for it appears),
// and cache hits serve it. Any other file claims its build ID without proof:
// it skips the cache, and its conversion is kept in memory for that very
// file (dev, inode, size, mtime, ctime) only, so it can neither poison nor
// borrow the names of another file with the same build ID.
// A GSYM whose header build ID differs from the module's is never used.
// Modules identified by a Go build ID or a content hash are served only by
// their cache file and by conversions of a file with the same identity
// (a GSYM header holds a GNU build ID, which they lack, so --gsym-dir files
// and add_gsym_bytes() never match them; debuginfod is not asked).
// Outcomes (hits and misses) are memoized per run. Modules without any
// identity are never matched (nothing could prove a GSYM belongs to them).
//
// A conversion reads as its steps (gsym_locator.cpp, State::convert): the
// file to convert (its own, else debuginfod's) -> identity check -> a
// remembered failure -> debuginfod's debug file -> convert -> publish.
//
// Not thread-safe: one locator per symbolization run.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gsym/convert/convert.h"
#include "gsym/base/expected.h"
#include "gsym/reader/reader.h"
#include "userspace/symbolize/child_conversion.h"
#include "userspace/symbolize/progress.h"
#include "userspace/base/build_id.h"

namespace gsymprof {

// $GSYMPROF_CACHE when set and not empty, else /var/cache/gsymprof.
std::string default_cache_dir();

struct LocatorOptions {
  std::string cache_dir;        // "" = no cache (neither read nor written)
  bool convert_missing = true;  // convert local ELF files on a miss
  gsym::ConvertOptions convert; // for conversions (threads, debug dirs, ...)
  bool use_debuginfod = true;   // ask debuginfod when DEBUGINFOD_URLS is set
  ProgressFn progress;          // downloads report here (none: silent)
  // Convert in a child process (child_conversion.h) instead of in this one:
  // for a daemon (the agent), whose allocator would otherwise keep the
  // converter's transient heap (hundreds of MB for a large binary's DWARF).
  // One-shot commands convert in process.
  bool convert_in_child = false;
  ChildConversionOptions child;  // with convert_in_child: binary, timeout
  // With convert_in_child, inputs (the ELF, and its separate debug file when
  // it has no DWARF) smaller than this convert in process all the same: a
  // child costs an exec, more than their heap is worth, and a host's first
  // window has a hundred of them.
  uint64_t child_min_input_bytes = uint64_t{8} << 20;
  // 0: any. Inputs this size or larger are not converted by this locator
  // but left unresolved ("not converted yet"), nothing remembered: the
  // agent's pulls, whose client waits, leave them to the export thread.
  uint64_t max_convert_input_bytes = 0;
  // The readers' lookup indexes (gsym::Reader::Index): on for commands that
  // look up many addresses once; off for a daemon that keeps every module
  // of a host open to look up a few addresses of each per window, where the
  // indexes were most of its heap (60 MB on a busy host).
  bool lookup_indexes = true;
};

enum class GsymOrigin : uint8_t {
  None = 0,   // unresolved
  GsymDir,    // a file found in a --gsym-dir
  Memory,     // add_gsym_bytes()
  Cache,      // an existing cache file
  Converted,  // converted now (and cached unless `note` says otherwise)
};
const char* to_string(GsymOrigin origin);  // "none", "gsym-dir", "memory", "cache", "converted"

// Why a module has no symbols, for what a user can do about it.
enum class ModuleProblem : uint8_t {
  None = 0,          // resolved, or a reason not sorted below
  Stripped,          // the file has no function symbols, no DWARF and no debug file was found
  ProcessExited,     // never read: its processes exited first
  FileMissing,       // no GSYM for its identity and its file is gone
  IdentityMismatch,  // no GSYM, and the file at its path is another build now
  NoIdentity,        // nothing identifies the file, so no GSYM can be proven its own
  Other,             // anything else (a real error: see the reason)
};

// Per module: resolved (from where) or why not.
struct ModuleReport {
  std::string path;         // the module's path as captured
  BuildId build_id;         // the module's identity (may be empty)
  // false: the module's file was never read (CaptureModule::error), so it
  // has no identity at all; described "(not identified)", not "(no build ID)".
  bool identified = true;
  GsymOrigin origin = GsymOrigin::None;
  std::string gsym_path;    // the GSYM file used ("" for in-memory)
  // Why unresolved, "" when resolved. One of:
  //   "no build ID"
  //   "N samples of P processes that exited before their modules could be
  //   read" / "not identified while the process ran: ERROR" (symbolize.cpp)
  //   "no GSYM for build ID X" ("Go build ID X", "SHA-256 X": other kinds)
  //   "no GSYM for build ID X; file missing"
  //   "no GSYM for build ID X; file missing; debuginfod: ..." (when asked)
  //   "no GSYM for build ID X; build-ID mismatch (file has Y)"
  //   "no GSYM for build ID X; stripped: no function symbols, no DWARF, no debug file found"
//   "no GSYM for build ID X; conversion failed: ..."
  //   "no GSYM for build ID X; ..." (other local-file problems, e.g. not ELF)
  std::string reason;
  std::string note;         // non-fatal remark, e.g. "not cached: ..." ("" = none)
  ModuleProblem problem = ModuleProblem::None;  // unresolved: the kind of `reason`
  // Resolved from symbol tables alone (no DWARF: no inline frames, no lines,
  // local functions of a stripped file unnamed).
  bool symbols_only = false;
  // Frames in it that no symbol covers (printed FILE+0xOFFSET), counted per
  // frame of the unique stacks by symbolize().
  uint64_t unnamed_frames = 0;
  bool resolved() const { return origin != GsymOrigin::None; }
  bool operator==(const ModuleReport&) const = default;
};

// One line, no newline:
//   "/usr/bin/app (build ID 1a2b...): gsym-dir /gsyms/app.gsym"
//   "/usr/lib/libx.so (build ID 3c4d...): no symbols: no GSYM for build ID 3c4d...; file missing"
//   "/opt/y (no build ID): no symbols: no build ID"
//   "/usr/bin/go-app (Go build ID 6a...): converted /cache/go-6a....c5.gsym"
//   "/usr/lib/libc.so.6 (not identified): no symbols: 12 samples of 3 processes that exited before ..."
// A note, when present, is appended as " (NOTE)".
std::string describe(const ModuleReport& report);

class GsymLocator {
 public:
  explicit GsymLocator(LocatorOptions options = {});
  GsymLocator(GsymLocator&&) noexcept;
  GsymLocator& operator=(GsymLocator&&) noexcept;
  ~GsymLocator();

  // Indexes `dir` now (see above). Error (naming the dir) when it cannot be
  // opened or is not a directory; bad files in it are notes, not errors.
  gsym::Status add_gsym_dir(const std::string& dir);

  // Adds a GSYM held in memory, indexed by its header build ID (after the
  // --gsym-dirs). `name` appears in notes. Error when the bytes do not parse
  // or the build ID is empty.
  gsym::Status add_gsym_bytes(std::vector<uint8_t> bytes, const std::string& name);

  // The reader for the module with `build_id`, or nullptr; `report` is
  // filled either way (build_id, origin, gsym_path, reason, note; `path` is
  // left as the caller set it).
  // `local_elf_path` ("" = none) is only used for conversion. The pointer
  // stays valid for the locator's lifetime.
  const gsym::Reader* locate(const BuildId& build_id, const std::string& local_elf_path,
                             ModuleReport& report);

  // Non-fatal remarks from indexing, in order ("skipped DIR/x.gsym: ...").
  const std::vector<std::string>& notes() const;

  // Every mapped GSYM's pages leave the resident set (gsym::Reader::
  // release_pages): a daemon calls it after each burst of lookups, so its
  // RSS does not hold every file it once read.
  void release_pages();
  // Heap bytes of the GSYM readers opened so far (gsym::Reader::memory_bytes,
  // and GSYMs held in memory): a daemon makes a new locator past a budget.
  size_t reader_memory_bytes() const;

  // How many conversions were attempted (for tests of the miss cache).
  uint64_t conversions_attempted() const;

  // Threads per conversion from now on (LocatorOptions::convert.threads;
  // 0 = every CPU): 1 while conversions run beside a profiled workload.
  void set_conversion_threads(unsigned threads);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gsymprof
