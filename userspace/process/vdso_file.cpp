#include "userspace/process/vdso_file.h"

#include "gsym/base/file_io.h"
#include "userspace/base/pseudo_file.h"
#include "userspace/process/proc_maps.h"

#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

namespace gsymprof {

namespace {

// The [vdso] range of this process.
gsym::Expected<std::pair<uint64_t, uint64_t>> own_vdso_range() {
  gsym::Expected<std::string> text = read_pseudo_file("/proc/self/maps", kMaxProcMapsBytes);
  if (!text) return text.error();
  auto maps = parse_proc_maps(*text);
  if (!maps) return gsym::Error("/proc/self/maps: " + maps.error().message);
  for (const MapEntry& m : *maps)
    if (m.path == kVdsoPath) return std::make_pair(m.start, m.end);
  return gsym::Error("this process has no [vdso] mapping");
}

// The copy lives in a memfd: no file on any disk, nothing to remove or leak
// on any exit (SIGKILL included), and no directory anyone else could steer.
gsym::Expected<VdsoFile> write_own_vdso() {
  const uint64_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return gsym::Error("the kernel gave this process no vDSO");
  auto range = own_vdso_range();
  if (!range) return range.error();
  if (range->first != base) return gsym::Error("[vdso] mapping does not start at AT_SYSINFO_EHDR");
  const uint64_t size = range->second - range->first;
  const int fd = ::memfd_create("gsymprof-vdso", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return gsym::Error(std::string("memfd_create: ") + std::strerror(errno));
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const std::span<const uint8_t> image(reinterpret_cast<const uint8_t*>(base), size);
  if (gsym::Status written = gsym::write_file_atomically(path, image); !written) {
    ::close(fd);
    return written.error();
  }
  // Sealed: nothing can change the image behind the readers.
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return VdsoFile{path, size};
}

}  // namespace

const gsym::Expected<VdsoFile>& own_vdso_file() {
  static gsym::Expected<VdsoFile> vdso = write_own_vdso();  // thread-safe static init
  return vdso;
}

std::string openable_module_path(const std::string& module_path) {
  if (module_path != kVdsoPath) return module_path;
  const auto& vdso = own_vdso_file();
  return vdso ? vdso->path : std::string();
}

}  // namespace gsymprof
