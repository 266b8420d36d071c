// userspace/process/process_image.h - stage: pid -> its mappings and modules.
//
// Mappings are learnt from the kernel as they happen (side-band events, in
// order with the samples: note_mapping, note_fork, note_exec, note_exit); a
// process that existed before the session is read from /proc/PID/maps when
// first seen. Without the side-band (or after it lost events) an address
// outside every known mapping makes the maps be read again (dlopen, mmap).
// Each image is a version: a sample pins the version it was taken in, and a
// change that replaces a mapping a pinned version holds (dlopen at a reused
// address) starts a new version, so every sample is normalized against the
// mappings live when it was taken; exec and a new process at a reused pid
// start a new image. Modules are keyed by (device, inode) within a process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/proc_maps.h"

namespace gsymprof {

struct ProcessModule {
  std::string path;  // as in maps, " (deleted)" stripped
  bool deleted = false;
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  ModuleIdentity identity{};
  std::string error{};  // non-empty: the ELF could not be read, and why
  ModuleErrorKind error_kind = ModuleErrorKind::None;  // what kind of failure `error` is
  void set_error(const gsym::Error& failure) {
    error = failure.message;
    error_kind = module_error_kind(failure);
  }
};

struct ProcessImage {
  uint32_t pid = 0;
  std::vector<MapEntry> maps;         // sorted by start, non-overlapping
  std::vector<int32_t> map_module;    // per map: index into modules, -1 if none
  std::vector<ProcessModule> modules;
  std::string error;                  // non-empty: maps could not be read
  uint64_t mm = 0;                    // the kernel's address space id (side-band), 0 = unknown

  // The mapping holding `addr`, or -1.
  int32_t find_map(uint64_t addr) const;
  // Merges a fresh read of the maps: new entries replace the old ones they
  // overlap; old entries that vanished stay, since samples may still point
  // into them (dlclose). `load` reads the identity of a module not yet known.
  void merge(std::vector<MapEntry> fresh,
             const std::function<gsym::Expected<ModuleIdentity>(const MapEntry&)>& load);
  // Whether `entry` changes what an address of a known mapping means (it
  // overlaps one of another file, offset or permissions; a mapping that
  // merely grew over it does not).
  bool replaces_mapping(const MapEntry& entry) const;
  // Adds one mapping (a side-band event): it replaces those it overlaps;
  // `module` indexes modules, -1 for none. Costs O(log n) to find, plus the
  // move of the entries after it.
  void add_mapping(MapEntry entry, int32_t module);
  // The module of (device, inode), or -1.
  int32_t find_module(uint32_t dev_major, uint32_t dev_minor, uint64_t inode) const;
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
  // The file at `path` (a path the kernel reported for a mapping of a
  // process gone meanwhile), only if it is the very file mapped: device,
  // inode, size, mtime and ctime equal to `stamp`. Optional.
  std::function<gsym::Expected<ModuleIdentity>(const std::string& path, const FileStamp& stamp)>
      load_file;
  // The stamp of the file a mapping event named, mapped at `mapped_at_ns`
  // (CLOCK_MONOTONIC): see stamp_of_mapped_file. Optional: without it a
  // mapping's stamp is its device and inode alone.
  std::function<FileStamp(uint32_t pid, const MapEntry&, uint64_t mapped_at_ns)> stamp_mapping;
  // Copies the process's memory at `addr` into `out`: the bytes read (fewer
  // at an unmapped page), 0 when it cannot. Optional (a recording has none).
  std::function<size_t(uint32_t pid, uint64_t addr, std::span<uint8_t> out)> read_memory;
  static ProcSource live(const std::string& proc_root = "/proc");
};

// Two stamps name the same file with the same contents (FileStamp::trusted
// aside: it says who may write the file, not which file it is).
bool same_file_contents(const FileStamp& a, const FileStamp& b);

// All process images of a session. Image ids are stable indexes.
class ProcessTable {
 public:
  explicit ProcessTable(ProcSource source) : source_(std::move(source)) {}

  // The current image of `pid`, read now if the pid is new or has exec'd,
  // for a sample: the image is pinned (a later change makes a new version).
  uint32_t current_image(uint32_t pid);

  // `pid` exec'd and no side-band says what it maps: its next sample reads
  // /proc again (a new image), never the pre-exec mappings.
  void forget_image(uint32_t pid) { current_.erase(pid); }

  // ---- Side-band events, in the order the kernel sent them ----
  // The side-band is on: images it keeps up to date are complete, so an
  // uncovered address re-reads /proc only once `lost_events` (side-band
  // events the kernel could not send) is non-zero.
  void use_sideband(std::function<uint64_t()> lost_events) { sideband_lost_ = std::move(lost_events); }
  // `pid` exec'd into address space `mm`: a new, empty image; the new
  // program's mappings follow as note_mapping.
  void note_exec(uint32_t pid, uint64_t mm);
  // `parent` forked `child`: the child starts with a copy of the parent's image.
  void note_fork(uint32_t parent, uint32_t child, uint64_t child_mm);
  // `pid` exited. Its image stays current for the samples of its exit; a
  // process that reuses the pid starts anew at its note_fork.
  void note_exit(uint32_t pid);
  // `pid` mapped executable memory in address space `mm`; `stamp` (when
  // known) identifies the file's contents, `path_complete` says whether
  // entry.path is the whole path. The file is opened now, through
  // /proc/PID/map_files while the process lives, else from a module seen
  // before with the same stamp, else at entry.path if the stamp matches.
  // `elf_loader`: the kernel's ELF loader mapped it at exec, and with it
  // the file's other code segments (added from its program headers).
  // The stamp note_mapping takes for `entry`, mapped at `mapped_at_ns`.
  FileStamp stamp_of_mapping(uint32_t pid, const MapEntry& entry, uint64_t mapped_at_ns) const;
  void note_mapping(uint32_t pid, uint64_t mm, MapEntry entry, const FileStamp& stamp,
                    bool path_complete, bool elf_loader = false);
  // Makes sure each address lies in a known executable mapping of image
  // `id`; reads the maps again (at most once per `min_interval` per image)
  // if one does not. Returns whether all addresses are covered afterwards.
  bool cover(uint32_t id, std::span<const uint64_t> lookup_addrs);
  // Re-reads every image that saw an uncovered address since its last read
  // (end of session, while the processes may still be alive).
  void refresh_stale();

  const ProcessImage& image(uint32_t id) const { return images_[id].image; }
  // Copies the code of image `id` at `addr` (an executable mapping of it)
  // into `out` while its process runs that image: the bytes read, 0 when
  // the process exited, exec'd, its pid was reused, or the source reads no
  // memory. Never past the mapping's end.
  size_t read_code(uint32_t id, uint64_t addr, std::span<uint8_t> out) const;
  // Copies any memory of image `id`'s process (an interpreter's objects on
  // its heap) under the same rule: only while it runs that image.
  size_t read_memory(uint32_t id, uint64_t addr, std::span<uint8_t> out) const;
  // Between the agent's windows, when nothing refers to an image id: keeps
  // only the current images of processes that have not exited (ids are
  // renumbered), and forgets the side-band's file identities once there are
  // more than `max_stamped_modules`, so memory follows the live processes,
  // not the uptime.
  void compact(size_t max_stamped_modules);
  uint64_t map_reads() const { return map_reads_; }
  size_t image_count() const { return images_.size(); }  // versions included, exited ones until compact()
  uint64_t image_versions() const { return versions_; }  // made by a replaced mapping

  std::chrono::milliseconds min_interval{50};

 private:
  struct Entry {
    ProcessImage image;
    std::chrono::steady_clock::time_point last_read;
    bool uncovered_since_read = false;
    bool pinned = false;  // a sample refers to this version
    bool exited = false;  // the side-band said the process exited
  };
  void read_into(Entry& entry);
  // Whether image `id`'s process still runs it and its memory can be read.
  bool runs_image(uint32_t id) const;
  uint32_t add_image(Entry entry);
  // The current image of `pid` for a side-band event (not pinned): read
  // from /proc if the process predates what the side-band told.
  uint32_t image_for_event(uint32_t pid, uint64_t mm);
  bool may_reread() const { return !sideband_lost_ || sideband_lost_() != 0; }
  gsym::Expected<ModuleIdentity> load_mapped_module(uint32_t pid, const MapEntry& entry,
                                                   const FileStamp& stamp, bool path_complete);

  ProcSource source_;
  std::vector<Entry> images_;
  std::unordered_map<uint32_t, uint32_t> current_;  // pid -> image id
  // Identities of files opened for side-band mappings, by stamp key: a
  // short-lived process maps the files its predecessors mapped.
  std::unordered_map<std::string, ProcessModule> modules_by_stamp_;
  std::function<uint64_t()> sideband_lost_;
  uint64_t map_reads_ = 0, versions_ = 0;
};

}  // namespace gsymprof
