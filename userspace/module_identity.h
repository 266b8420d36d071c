// userspace/module_identity.h - stage: an ELF file -> its GNU build ID and
// PT_LOAD segments (libelf). The segments turn a file offset into the
// unslid_addr a GSYM file is keyed by (see normalize.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gsym/expected.h"
#include "userspace/build_id.h"
#include "userspace/proc_maps.h"

namespace gsymprof {

struct LoadSegment {
  uint64_t file_offset = 0;  // p_offset
  uint64_t vaddr = 0;        // p_vaddr
  uint64_t file_size = 0;    // p_filesz
  uint64_t mem_size = 0;     // p_memsz
  bool executable = false;   // PF_X
  bool operator==(const LoadSegment&) const = default;
};

struct ModuleIdentity {
  BuildId build_id;                   // empty: the file has no GNU build ID
  std::vector<LoadSegment> segments;  // PT_LOAD, in program-header order
};

// Reads the identity from ELF bytes in memory (tests, fuzzing).
gsym::Expected<ModuleIdentity> read_module_identity(std::span<const uint8_t> elf_bytes);
// Reads the identity from an open file descriptor (not closed).
gsym::Expected<ModuleIdentity> read_module_identity_fd(int fd);

// The GNU build ID of the ELF file at `path` (empty: it has none). The error
// is exactly "file missing" when the path does not exist.
gsym::Expected<BuildId> read_elf_build_id(const std::string& path);

// Opens the file behind a mapping of process `pid`: first through
// /proc/PID/map_files/START-END (works for deleted files and other mount
// namespaces), then /proc/PID/root/PATH, accepted only if its device and
// inode still match the mapping. `proc_root` is "/proc" except in tests.
gsym::Expected<ModuleIdentity> load_module_identity(uint32_t pid, const MapEntry& mapping,
                                                    const std::string& proc_root = "/proc");

}  // namespace gsymprof
