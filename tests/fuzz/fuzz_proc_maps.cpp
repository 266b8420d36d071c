// libFuzzer target: /proc/PID/maps text -> MapEntry list. Any input must
// parse or fail cleanly; a parsed entry must satisfy the parser's promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "userspace/process/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto maps = gsymprof::parse_proc_maps(text);
  if (!maps) return 0;
  for (const gsymprof::MapEntry& m : *maps) {
    if (m.end < m.start || m.perms.size() != 4) std::abort();
    if (m.deleted && (m.inode == 0 || m.path.empty())) std::abort();
    if (m.file_backed() && m.path.front() == '[') std::abort();
  }
  return 0;
}
