#include "userspace/vdso_file.h"

#include "gsym/atomic_file.h"
#include "userspace/proc_maps.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <sstream>
#include <mutex>
#include <string>

namespace gsymprof {

namespace {

// The [vdso] range of this process.
gsym::Expected<std::pair<uint64_t, uint64_t>> own_vdso_range() {
  std::ifstream in("/proc/self/maps");
  if (!in) return gsym::Error(std::string("/proc/self/maps: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  auto maps = parse_proc_maps(text.str());
  if (!maps) return gsym::Error("/proc/self/maps: " + maps.error().message);
  for (const MapEntry& m : *maps)
    if (m.path == kVdsoPath) return std::make_pair(m.start, m.end);
  return gsym::Error("this process has no [vdso] mapping");
}

struct TemporaryVdso {
  gsym::Expected<VdsoFile> file = gsym::Error("not made");
  ~TemporaryVdso() {
    if (file) ::unlink(file->path.c_str());
  }
};

gsym::Expected<VdsoFile> write_own_vdso() {
  const uint64_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return gsym::Error("the kernel gave this process no vDSO");
  auto range = own_vdso_range();
  if (!range) return range.error();
  if (range->first != base) return gsym::Error("[vdso] mapping does not start at AT_SYSINFO_EHDR");
  const uint64_t size = range->second - range->first;
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/gsymprof-vdso-XXXXXX";
  // mkstemp reserves a private name; the bytes then replace it atomically.
  int fd = ::mkstemp(path.data());
  if (fd < 0) return gsym::Error(path + ": " + std::strerror(errno));
  ::close(fd);
  const std::span<const uint8_t> image(reinterpret_cast<const uint8_t*>(base), size);
  if (gsym::Status written = gsym::write_file_atomically(path, image, 0600); !written) {
    ::unlink(path.c_str());
    return written.error();
  }
  return VdsoFile{path, size};
}

}  // namespace

const gsym::Expected<VdsoFile>& own_vdso_file() {
  static TemporaryVdso vdso;
  static std::once_flag once;
  std::call_once(once, [] { vdso.file = write_own_vdso(); });
  return vdso.file;
}

std::string openable_module_path(const std::string& module_path) {
  if (module_path != kVdsoPath) return module_path;
  const auto& vdso = own_vdso_file();
  return vdso ? vdso->path : std::string();
}

}  // namespace gsymprof
