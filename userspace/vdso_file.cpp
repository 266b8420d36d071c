#include "userspace/vdso_file.h"

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

namespace gsymprof {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// The [vdso] range of this process, from /proc/self/maps.
gsym::Expected<std::pair<uint64_t, uint64_t>> own_vdso_range() {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return gsym::Error("/proc/self/maps: " + errno_text(errno));
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < 6 || line.compare(line.size() - 6, 6, "[vdso]") != 0) continue;
    uint64_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64, &start, &end) == 2 && start < end)
      return std::make_pair(start, end);
  }
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
  int fd = ::mkstemp(path.data());
  if (fd < 0) return gsym::Error(path + ": " + errno_text(errno));
  const auto* bytes = reinterpret_cast<const uint8_t*>(base);
  uint64_t written = 0;
  while (written < size) {
    ssize_t n = ::write(fd, bytes + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = path + ": " + errno_text(n < 0 ? errno : EIO);
      ::close(fd);
      ::unlink(path.c_str());
      return gsym::Error(error);
    }
    written += static_cast<uint64_t>(n);
  }
  ::close(fd);
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
