// userspace/symbolize/child_conversion.h - gsym::convert_elf in a child
// process, so that the converter's transient heap (the DWARF of a large
// binary: hundreds of MB) is the child's and goes with it, instead of
// staying in a long-running parent (the agent) whose allocator keeps it.
//
// The child is this program again (/proc/self/exe, the very binary running
// even when its path was replaced since), started with posix_spawn as
// `gsymprof __convert-child OPTIONS...` (no other command sees it). It
// inherits descriptors, never paths a user could swap:
//   3  the ELF to convert (read-only, the caller's own descriptor)
//   4  an empty memfd the child writes the GSYM bytes to
//   5  an empty memfd the child writes its report to
//   6  the explicit debug file, when ConvertOptions::debug_file names an
//      open descriptor (/proc/self/fd/N: debuginfod's download)
// The report is a list of fields "NAME SIZE\nBYTES\n": the error (code,
// errno, offset, message) when the conversion failed, else nothing of it;
// always the statistics the locator decides on (compile units, whether
// every input was private, the debug file used).
// The child runs at its parent thread's nice level (inherited), and is
// killed (SIGKILL) after `timeout`: a hostile ELF cannot hang the caller.
// A child that dies or times out is an error like a failed conversion.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/file_io.h"
#include "gsym/convert/convert.h"

namespace gsymprof {

// argv[1] of the child: the one command run_program runs before any other.
inline constexpr const char* kConversionChildCommand = "__convert-child";

struct ChildConversionOptions {
  std::string program = "/proc/self/exe";  // the binary run as the child
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

// The GSYM a child wrote, left in its memfd (ours alone once the child is
// gone): a caller copies it to the cache (GsymCache::publish) and checks it
// through a mapping without holding it all in its heap (a large binary's
// GSYM is tens of MB), or reads it when it keeps it in memory.
struct ChildGsym {
  gsym::FileDescriptor fd;
  uint64_t size = 0;
  gsym::Expected<std::vector<uint8_t>> read() const;
};

// Converts the ELF open at `elf_fd` as gsym::convert_elf(options) would, in
// a child process; `stats` (when given) receives compile_units,
// inputs_writable_only_by_us and debug_file_used.
gsym::Expected<ChildGsym> convert_elf_in_child(int elf_fd, const gsym::ConvertOptions& options,
                                               gsym::ConvertStats* stats, const ChildConversionOptions& child = {});

// The child's side: argv[0] is kConversionChildCommand. Exit status 0 when
// the report was written (whether the conversion succeeded or not).
int run_conversion_child(int argc, char** argv);

}  // namespace gsymprof
