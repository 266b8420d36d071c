// userspace/process/proc_maps.h - stage: the text of /proc/PID/maps -> MapEntry list.
// Pure (no I/O), so it is unit-tested on text fixtures and fuzzed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/base/build_id.h"

namespace gsymprof {

struct MapEntry {
  uint64_t start = 0, end = 0;  // runtime address range [start, end)
  uint64_t file_offset = 0;     // offset in the file of `start`
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;           // 0: anonymous or special mapping
  std::string perms;            // "r-xp"
  std::string path;             // "" for anonymous; "[heap]", "[vdso]", ...;
                                // " (deleted)" stripped (see `deleted`)
  bool deleted = false;         // the file was unlinked after it was mapped
  BuildId build_id;             // as a recording noted it (perf.data); /proc: empty

  bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
  // Backed by a file (as opposed to anonymous memory or [heap]/[vdso]/...).
  bool file_backed() const { return inode != 0 && !path.empty() && path[0] != '['; }
  bool contains(uint64_t addr) const { return addr >= start && addr < end; }
  bool operator==(const MapEntry&) const = default;
};

// A bound on one /proc/PID/maps: vm.max_map_count (65,530 by default)
// lines of at most a path's length; real ones are a few MB at most.
inline constexpr size_t kMaxProcMapsBytes = size_t{256} << 20;

// Parses the whole text. Entries keep the kernel's order (ascending start).
// Any malformed line is an error naming its 1-based line number.
gsym::Expected<std::vector<MapEntry>> parse_proc_maps(std::string_view text);

// Parses one line (without its '\n').
gsym::Expected<MapEntry> parse_proc_maps_line(std::string_view line);

// PROC_ROOT/PID/map_files/START-END: a link to the very file mapped, which
// opens also when it was deleted or lives in another mount namespace.
std::string map_files_path(const std::string& proc_root, uint32_t pid, const MapEntry& mapping);

}  // namespace gsymprof
