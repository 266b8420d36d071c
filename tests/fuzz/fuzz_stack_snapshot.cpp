// Fuzzes the stack-snapshot parser (tests/support/recorded_snapshot.h) and
// the CFI unwinder: any bytes give a snapshot or an error, never a crash or
// hang; an accepted snapshot round-trips exactly; and its registers and
// stack bytes, unwound against this very binary's CFI (every module path
// replaced by /proc/self/exe, so input never names files to open), end within
// the depth limit with the sampled IP first. The IP, mappings and biases are
// taken relative to where this binary is loaded (ASLR), so inputs reach the
// same code every run.
#include <link.h>

#include <cstdint>
#include <cstdlib>

#include "tests/support/recorded_snapshot.h"
#include "userspace/unwind/cfi_unwinder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = gsymprof::parse_snapshot(std::span(data, size));
  if (!parsed) {
    if (parsed.error().message.empty()) std::abort();
    return 0;
  }
  auto bytes = gsymprof::serialize_snapshot(*parsed);
  if (!bytes || *bytes != std::vector<uint8_t>(data, data + size)) std::abort();

  static const uint64_t base = [] {
    uint64_t first = 0;  // the executable is the first object reported
    dl_iterate_phdr([](dl_phdr_info* info, size_t, void* out) {
      *static_cast<uint64_t*>(out) = info->dlpi_addr;
      return 1;
    }, &first);
    return first;
  }();
  for (gsymprof::UnwindModule& module : parsed->modules)
    module = {"/proc/self/exe", {}, module.load_bias + base, {}, {}};
  for (gsymprof::SnapshotMapping& m : parsed->mappings) {
    m.start += base;
    m.end += base;
  }
  for (size_t i = 0; i < parsed->mappings.size(); ++i) {  // shifted past 2^64: out of order
    const gsymprof::SnapshotMapping& m = parsed->mappings[i];
    if (m.start >= m.end || (i > 0 && m.start < parsed->mappings[i - 1].end)) return 0;
  }
  parsed->snapshot.regs.ip += base;
  static gsymprof::CfiUnwinder unwinder({.max_frames = 32});
  gsymprof::UnwindResult result;
  unwinder.unwind(parsed->snapshot.view(), parsed->finder(), result);
  if (result.ips.empty() || result.ips.size() > 32 || result.ips[0] != parsed->snapshot.regs.ip)
    std::abort();
  return 0;
}
