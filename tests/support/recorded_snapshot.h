// tests/support/recorded_snapshot.h - a stack snapshot with its module list,
// and its small binary file format, so that tests can replay an unwind
// without a live process (tests/unit/unwind/cfi_unwinder_test.cpp,
// tests/tools/cfi_snapshot_tool.cpp, tests/fuzz/fuzz_stack_snapshot.cpp).
// Test-only: the profiler unwinds RawStackCopy samples, never these files.
//
// File layout (little-endian, version 1):
//   "GSPSNAP\0"  u32 version  u32 reserved(0)
//   u64 ip  u64 sp  u64 bp  u64 stack_start  u32 stack_size  u32 module_count
//   u32 mapping_count  u32 reserved(0)
//   stack_size bytes
//   module_count x { u64 load_bias  u16 build_id_size  u16 path_size
//                    build_id bytes  path bytes }
//   mapping_count x { u64 start  u64 end  u32 module_index  u32 reserved(0) }
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/events/events.h"
#include "userspace/unwind/stack_snapshot.h"

namespace gsymprof {

// Owning counterpart of StackView.
struct StackSnapshot {
  UserRegisters regs;
  uint64_t stack_start = 0;
  std::vector<uint8_t> stack;
  StackView view() const { return {regs, stack_start, stack}; }
  bool operator==(const StackSnapshot&) const = default;
};

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
