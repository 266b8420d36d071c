// userspace/process/perf_map.h - names of JIT code from perf maps: the
// /tmp/perf-PID.map a JIT runtime writes (node --perf-basic-prof, Java
// agents, Python 3.12+ -X perf, LuaJIT), one "START SIZE NAME" line per
// compiled function, START and SIZE in hex; and from jitdump files
// (jitdump.h: node --perf-prof, Python -X perf_jit), which also give lines.
// Used at record time, so a capture carries the names its JIT frames need
// (Capture::jit_symbols).
//
// The files are written by the profiled process's user: untrusted. They are
// opened inside the process's own root (/proc/PID/root, so containers work,
// and nothing outside that root is ever followed), non-blocking, regular
// files only, owned by root or the process's user, at most kMaxPerfMapBytes
// (kMaxJitdumpBytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gsym/base/file_io.h"
#include "userspace/capture/capture.h"
#include "userspace/process/jitdump.h"

namespace gsymprof {

// Largest perf map read (node writes ~100 bytes per compiled function).
inline constexpr uint64_t kMaxPerfMapBytes = 256ull << 20;
// Longer names are cut to this many bytes.
inline constexpr size_t kMaxPerfMapNameBytes = 4096;

struct ParsedPerfMap {
  // Sorted by start, disjoint: where lines overlap, the later line wins (a
  // runtime that frees code and compiles new code at the same address
  // appends the new function's line).
  std::vector<JitSymbol> symbols;
  uint64_t bad_lines = 0;  // lines that do not parse, or hold an empty range
};

// Parses the text of a perf map. Pure; never fails: a bad line is skipped
// and counted (a runtime may be writing the last line as we read).
ParsedPerfMap parse_perf_map(std::string_view text);

// The symbol holding `address` in sorted, disjoint `symbols`, or nullptr.
const JitSymbol* find_jit_symbol(const std::vector<JitSymbol>& symbols, uint64_t address);

// Whether `path`'s last component is a jitdump's name (jit-*.dump): what a
// runtime maps so that perf, and gsymprof, find its dump.
bool is_jitdump_path(std::string_view path);

// The perf maps and jitdumps of the processes of a live session, read when
// first needed and again when an address is not covered and the file has
// changed since (a jitdump from where the last read stopped). Where both
// name an address the jitdump wins: it has the lines.
class PerfMaps {
 public:
  explicit PerfMaps(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  // The JIT symbol of `pid` holding runtime `address`, or nullptr. Opens the
  // process's root on first use (keeping it, so the map can be read after the
  // process exits: it usually stays in /tmp). `final`: the last chance (end
  // of the session), not rate-limited.
  const JitSymbol* find(uint32_t pid, uint64_t address, bool final = false);
  // The code of `pid`'s jitdump holding runtime `address` (nullptr: none),
  // read as find() reads; `moved_by` as JitCodeMap::find. Valid until the
  // next call of this object.
  const JitCode* find_code(uint32_t pid, uint64_t address, uint64_t& moved_by);

  // A recording's processes are gone: their maps are read from this host's
  // /tmp (as perf script reads them), accepted only if owned by root or by
  // `owner` (who made the recording), never through a symlink.
  void read_gone_processes_from_host(uint32_t owner) { host_owner_ = owner; }

  // The process exec'd: its old map's symbols are forgotten (the new image
  // writes its own map at the same path); its root stays open.
  void note_exec(uint32_t pid);

  // `pid` mapped `path` (in its own mount tree), a jit-*.dump: its jitdump
  // is read from there rather than from /tmp/jit-PID.dump.
  void note_jitdump_mapping(uint32_t pid, std::string_view path);

  // Whether a perf map or a jitdump was read for `pid`.
  bool has_map(uint32_t pid) const;
  // Why `pid`'s jitdump stopped being read ("" = it did not): one line.
  std::string jitdump_error(uint32_t pid) const;
  uint64_t reads() const { return reads_; }

  // Root directories kept open at most (one descriptor each).
  static constexpr size_t kMaxKeptRoots = 256;

 private:
  // A process's jitdump, read as far as it was written.
  struct Jitdump {
    std::string path;  // in the process's root ("" = /tmp/jit-PID.dump)
    uint64_t inode = 0;
    JitdumpParser parser;
    JitCodeMap code;
    std::vector<JitSymbol> symbols;  // code.symbols()
    bool found = false;
    std::string error;
  };
  struct Entry {
    gsym::FileDescriptor root;  // /proc/PID/root, opened while the process lived
    bool root_tried = false;
    std::optional<uint32_t> owner;  // the process's uid
    uint32_t ns_pid = 0;            // its pid in its own namespace (the file's name)
    bool found = false;             // a map was read
    bool final_read = false;        // the end-of-session read was made
    std::vector<JitSymbol> symbols;
    uint64_t size = 0, inode = 0;   // of the file last read
    int64_t mtime_ns = -1;
    int64_t last_try_ns = INT64_MIN / 2;
    Jitdump jitdump;
  };
  static constexpr int64_t kRetryIntervalNs = 100'000'000;
  // `pid`'s entry, its root, owner and own pid found on first use.
  Entry& entry_of(uint32_t pid);
  // Whether the files may be read again now (`final`: once more at the end).
  bool may_read_again(Entry& entry, bool final);
  void read(uint32_t pid, Entry& entry);
  void read_perf_map(int root, Entry& entry);
  void read_jitdump(int root, Entry& entry);

  std::string proc_root_;
  std::optional<uint32_t> host_owner_;  // read_gone_processes_from_host
  std::unordered_map<uint32_t, Entry> entries_;
  size_t kept_roots_ = 0;
  uint64_t reads_ = 0;
};

}  // namespace gsymprof
