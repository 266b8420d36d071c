// userspace/process/module_identity.h - stage: an ELF file -> its GNU build ID and
// PT_LOAD segments (libelf). The segments turn a file offset into the
// unslid_addr a GSYM file is keyed by (see normalize.h).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/process/python_runtime.h"
#include "userspace/base/build_id.h"
#include "userspace/base/file_stamp.h"
#include "userspace/capture/capture.h"
#include "userspace/process/proc_maps.h"

namespace gsymprof {

struct LoadSegment {
  uint64_t file_offset = 0;  // p_offset
  uint64_t vaddr = 0;        // p_vaddr
  uint64_t file_size = 0;    // p_filesz
  uint64_t mem_size = 0;     // p_memsz
  bool executable = false;   // PF_X
  bool operator==(const LoadSegment&) const = default;
};

// What is known of one module file, read while the process lives: the one
// handle ProcSource::load_module returns for every way a mapping is learnt
// (maps read at first sight, later mapping events).
struct ModuleIdentity {
  // The file's identity by the rule in build_id.h: GNU build ID, else Go
  // build ID, else SHA-256 of the file (empty: the file was too large to hash).
  BuildId build_id;
  std::vector<LoadSegment> segments;  // PT_LOAD, in program-header order
  FileStamp file;                     // the file it was read from (unknown for bytes)
  // "/proc/self/fd/N": the very file, kept open for symbolization after the
  // process is gone (live profiles only; "" = not kept).
  std::string local_file;
  // A CPython runtime (the python executable or libpython): where its
  // _PyRuntime and eval loop are, and its version (python_runtime.h).
  std::optional<PythonSymbols> python;
};

// Reads the identity from ELF bytes in memory (tests, fuzzing).
gsym::Expected<ModuleIdentity> read_module_identity(std::span<const uint8_t> elf_bytes);
// Reads the identity from an open file descriptor (not closed).
gsym::Expected<ModuleIdentity> read_module_identity_fd(int fd);

// Keeps a duplicate of `fd` open for the rest of the run, one per file (by
// stamp), and returns "/proc/self/fd/N" for it; "" past the limit on kept
// files (then symbolization falls back to the module's path).
std::string keep_module_file_open(int fd, const FileStamp& stamp);

// Opens the file behind a mapping of process `pid`: first through
// /proc/PID/map_files/START-END (works for deleted files and other mount
// namespaces), then PATH resolved inside /proc/PID/root (symlinks cannot
// leave it), accepted only if its device and inode still match the mapping.
// Only regular files are read, never blocking (a FIFO put at the path).
// `proc_root` is "/proc" except in tests. The file is kept open
// (ModuleIdentity::local_file) when `keep_open` is set. When neither view
// exists any more the error is process_exited_error().
// The error of a module whose process exited before its files could be
// opened: NotFound with ESRCH ("no such process"), kProcessExitedError.
gsym::Error process_exited_error();
// ProcessExited for process_exited_error(), else Unreadable.
ModuleErrorKind module_error_kind(const gsym::Error& error);

gsym::Expected<ModuleIdentity> load_module_identity(uint32_t pid, const MapEntry& mapping,
                                                    const std::string& proc_root = "/proc",
                                                    bool keep_open = false);

// The stamp of the file a mapping event named (device and inode, mapped at
// `mapped_at_ns`, CLOCK_MONOTONIC), taken now through /proc/PID/map_files
// or, once the process is gone, at the path: the whole stamp only if the
// file is that device and inode and was last changed (ctime, which its owner
// cannot set) at least kStampMarginNs before it was mapped, so its contents
// now are those mapped; else device and inode alone, which match no file's
// full stamp (nothing is shared or opened by path on its word).
FileStamp stamp_of_mapped_file(uint32_t pid, const MapEntry& mapping, uint64_t mapped_at_ns,
                               const std::string& proc_root = "/proc");
// File timestamps come from a coarse clock (a jiffy, up to 10 ms behind).
inline constexpr int64_t kStampMarginNs = 20'000'000;

}  // namespace gsymprof
