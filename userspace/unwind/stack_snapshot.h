// userspace/unwind/stack_snapshot.h - the input of the CFI unwinder (cfi_unwinder.h):
// the user registers an x86-64 unwind starts from, a copy of the top of the
// user stack, and a way to find the module holding a runtime address.
//
// A RecordedSnapshot bundles all three with the module list, and serializes to
// a small binary file so that tests can replay an unwind without a live
// process. File layout (little-endian, version 1):
//   "GSPSNAP\0"  u32 version  u32 reserved(0)
//   u64 ip  u64 sp  u64 bp  u64 stack_start  u32 stack_size  u32 module_count
//   u32 mapping_count  u32 reserved(0)
//   stack_size bytes
//   module_count x { u64 load_bias  u16 build_id_size  u16 path_size
//                    build_id bytes  path bytes }
//   mapping_count x { u64 start  u64 end  u32 module_index  u32 reserved(0) }
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/expected.h"
#include "userspace/base/build_id.h"
#include "userspace/process/module_identity.h"
#include "userspace/sample/raw_sample.h"

namespace gsymprof {

// Owning counterpart of StackView.
struct StackSnapshot {
  UserRegisters regs;
  uint64_t stack_start = 0;
  std::vector<uint8_t> stack;
  StackView view() const { return {regs, stack_start, stack}; }
  bool operator==(const StackSnapshot&) const = default;
};

// Where the unwinder reads a module's CFI, and how to turn runtime addresses
// into the ELF's own (unslid) addresses.
struct UnwindModule {
  std::string elf_path;    // readable path of the ELF (e.g. /proc/PID/map_files/...)
  BuildId build_id;        // the file must carry it; empty = unknown, not checked
  uint64_t load_bias = 0;  // runtime_addr - unslid_addr
  // The file the module was identified from (unknown: not checked). The CFI
  // of a file others could have written is used for that file only, never
  // shared by build ID, and elf_path must open that very file.
  FileStamp file;
  bool operator==(const UnwindModule&) const = default;
};

// Finds the module whose executable mapping holds `runtime_addr`; nullptr when
// none does. The pointer must stay valid for the duration of one unwind.
using ModuleFinder = std::function<const UnwindModule*(uint64_t runtime_addr)>;

// One executable mapping [start, end) of a module in a recorded snapshot.
struct SnapshotMapping {
  uint64_t start = 0, end = 0;
  uint32_t module = 0;  // index into RecordedSnapshot::modules
  bool operator==(const SnapshotMapping&) const = default;
};

struct RecordedSnapshot {
  StackSnapshot snapshot;
  std::vector<UnwindModule> modules;
  std::vector<SnapshotMapping> mappings;  // sorted by start, non-overlapping

  // The module holding `runtime_addr`, or nullptr.
  const UnwindModule* find_module(uint64_t runtime_addr) const;
  ModuleFinder finder() const {
    return [this](uint64_t addr) { return find_module(addr); };
  }
  bool operator==(const RecordedSnapshot&) const = default;
};

// Limits enforced by parse (and by serialize, which refuses what parse would).
inline constexpr size_t kMaxSnapshotStack = 1 << 20;
inline constexpr size_t kMaxSnapshotModules = 4096;
inline constexpr size_t kMaxSnapshotMappings = 16384;
inline constexpr size_t kMaxSnapshotBuildId = 64;
inline constexpr size_t kMaxSnapshotPath = 4096;

// Encodes `snapshot`; fails when it breaks a limit above, when mappings are
// unsorted or overlapping, or when a mapping names a missing module.
gsym::Expected<std::vector<uint8_t>> serialize_snapshot(const RecordedSnapshot& snapshot);
// Decodes untrusted bytes; errors say what is wrong and at which byte offset.
gsym::Expected<RecordedSnapshot> parse_snapshot(std::span<const uint8_t> bytes);

gsym::Status write_snapshot_file(const std::string& path, const RecordedSnapshot& snapshot);
gsym::Expected<RecordedSnapshot> read_snapshot_file(const std::string& path);

}  // namespace gsymprof
