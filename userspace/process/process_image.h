// userspace/process/process_image.h - stage: pid -> its mappings and modules.
//
// A process is snapshotted when it is FIRST seen (so a process that exits
// during the profile still symbolizes), read again when an address falls
// outside every known mapping (dlopen, mmap), and replaced by a new image
// when it execs. Modules are keyed by (device, inode) within a process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gsym/expected.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/proc_maps.h"

namespace gsymprof {

struct ProcessModule {
  std::string path;  // as in maps, " (deleted)" stripped
  bool deleted = false;
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  ModuleIdentity identity;
  std::string error;  // non-empty: the ELF could not be read, and why
};

struct ProcessImage {
  uint32_t pid = 0;
  std::vector<MapEntry> maps;         // sorted by start, non-overlapping
  std::vector<int32_t> map_module;    // per map: index into modules, -1 if none
  std::vector<ProcessModule> modules;
  std::string error;                  // non-empty: maps could not be read

  // The mapping holding `addr`, or -1.
  int32_t find_map(uint64_t addr) const;
  // Merges a fresh read of the maps: new entries replace the old ones they
  // overlap; old entries that vanished stay, since samples may still point
  // into them (dlclose). `load` reads the identity of a module not yet known.
  void merge(std::vector<MapEntry> fresh,
             const std::function<gsym::Expected<ModuleIdentity>(const MapEntry&)>& load);
};

// Where process information comes from; the default reads /proc.
// load_module is the one way a module is opened and identified, for every
// way a mapping is learnt (maps at first sight, mapping events later): the
// live one opens the file through the process's own view (map_files, then
// its root), keeps it open (ModuleIdentity::local_file) and returns its
// identity (build_id.h), or kProcessExitedError once the process is gone.
struct ProcSource {
  std::function<gsym::Expected<std::string>(uint32_t pid)> read_maps;
  std::function<gsym::Expected<ModuleIdentity>(uint32_t pid, const MapEntry&)> load_module;
  static ProcSource live(const std::string& proc_root = "/proc");
};

// All process images of a session. Image ids are stable indexes.
class ProcessTable {
 public:
  explicit ProcessTable(ProcSource source) : source_(std::move(source)) {}

  // The current image of `pid`, read now if the pid is new or has exec'd.
  uint32_t current_image(uint32_t pid);
  // The process exec'd: its next sample starts a new image.
  void note_exec(uint32_t pid);
  // Makes sure each address lies in a known executable mapping of image
  // `id`; reads the maps again (at most once per `min_interval` per image)
  // if one does not. Returns whether all addresses are covered afterwards.
  bool cover(uint32_t id, std::span<const uint64_t> lookup_addrs);
  // Re-reads every image that saw an uncovered address since its last read
  // (end of session, while the processes may still be alive).
  void refresh_stale();

  const ProcessImage& image(uint32_t id) const { return images_[id].image; }
  size_t image_count() const { return images_.size(); }
  uint64_t map_reads() const { return map_reads_; }

  std::chrono::milliseconds min_interval{50};

 private:
  struct Entry {
    ProcessImage image;
    std::chrono::steady_clock::time_point last_read;
    bool uncovered_since_read = false;
  };
  void read_into(Entry& entry);

  ProcSource source_;
  std::vector<Entry> images_;
  std::unordered_map<uint32_t, uint32_t> current_;  // pid -> image id
  uint64_t map_reads_ = 0;
};

}  // namespace gsymprof
