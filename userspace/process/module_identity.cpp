#include "userspace/process/module_identity.h"

#include "userspace/process/vdso_file.h"

#include "gsym/convert/elf_handle.h"
#include "gsym/convert/elf_image.h"
#include "gsym/base/file_io.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

namespace gsymprof {
namespace {

// A sane limit on program headers; real files have about a dozen.
constexpr size_t kMaxProgramHeaders = 4096;

gsym::Error elf_error(const char* what) {
  return gsym::Error(std::string(what) + ": " + elf_errmsg(-1));
}

gsym::Expected<ModuleIdentity> read_identity(Elf* elf) {
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr)) return elf_error("bad ELF header");
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return elf_error("bad program headers");
  if (phnum > kMaxProgramHeaders) return gsym::Error("too many program headers");

  ModuleIdentity identity;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf, static_cast<int>(i), &phdr)) return elf_error("bad program header");
    if (phdr.p_type == PT_LOAD) {
      if (phdr.p_filesz > phdr.p_memsz || phdr.p_offset + phdr.p_filesz < phdr.p_offset ||
          phdr.p_vaddr + phdr.p_memsz < phdr.p_vaddr)
        return gsym::Error("PT_LOAD segment " + std::to_string(i) + " is malformed");
      identity.segments.push_back({phdr.p_offset, phdr.p_vaddr, phdr.p_filesz, phdr.p_memsz,
                                   (phdr.p_flags & PF_X) != 0});
    }
  }
  if (identity.segments.empty()) return gsym::Error("no PT_LOAD segments");
  // A symbol table that cannot be read only means no Python frames.
  if (auto python = read_python_symbols(elf); python) identity.python = *python;
  return identity;
}

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

gsym::Expected<ModuleIdentity> read_module_identity(std::span<const uint8_t> elf_bytes) {
  gsym::Expected<gsym::ElfHandle> elf = gsym::ElfHandle::from_memory(elf_bytes);
  if (!elf) return elf.error();
  gsym::Expected<ModuleIdentity> identity = read_identity(elf->get());
  if (!identity) return identity;
  if (gsym::Expected<BuildId> id = read_elf_identity(elf_bytes); id) identity->build_id = std::move(*id);
  return identity;
}

gsym::Expected<ModuleIdentity> read_module_identity_fd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return gsym::Error(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return gsym::Error("not a regular file");
  gsym::Expected<gsym::ElfHandle> elf = gsym::ElfHandle::open(fd, st, gsym::UntrustedRead::OnDemand);
  if (!elf) return elf.error();
  gsym::Expected<ModuleIdentity> identity = read_identity(elf->get());
  if (!identity) return identity;
  identity->file = FileStamp::of(st);
  // The one identity rule (build_id.h); a file too large to hash keeps an
  // empty identity, said where it is used ("no build ID").
  gsym::Expected<BuildId> id = read_elf_identity_fd(fd, "module");
  if (id) identity->build_id = std::move(*id);
  return identity;
}

namespace {

// Descriptors kept for symbolization, one per file; a bound well below
// RLIMIT_NOFILE leaves room for everything else.
struct KeptFiles {
  std::mutex mutex;
  std::map<std::string, std::string> by_stamp;  // stamp key -> /proc/self/fd/N
  size_t limit = 0;
};

KeptFiles& kept_files() {
  static KeptFiles kept;
  static std::once_flag once;
  std::call_once(once, [] {
    struct rlimit limit {};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
      if (limit.rlim_cur < limit.rlim_max && limit.rlim_max != RLIM_INFINITY) {
        limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 65536);
        ::setrlimit(RLIMIT_NOFILE, &limit);
        ::getrlimit(RLIMIT_NOFILE, &limit);
      }
      kept.limit = limit.rlim_cur > 512 ? static_cast<size_t>(limit.rlim_cur / 2) : 0;
    }
  });
  return kept;
}

}  // namespace

std::string keep_module_file_open(int fd, const FileStamp& stamp) {
  KeptFiles& kept = kept_files();
  std::lock_guard lock(kept.mutex);
  const std::string key = stamp.key();
  if (auto it = kept.by_stamp.find(key); it != kept.by_stamp.end()) return it->second;
  if (kept.by_stamp.size() >= kept.limit) return "";
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return "";
  std::string path = "/proc/self/fd/" + std::to_string(copy);
  kept.by_stamp.emplace(key, path);
  return path;
}

gsym::Error process_exited_error() {
  gsym::Error error(gsym::ErrorCode::NotFound, kProcessExitedError);
  error.sys_errno = ESRCH;
  return error;
}

ModuleErrorKind module_error_kind(const gsym::Error& error) {
  return error.code == gsym::ErrorCode::NotFound && error.sys_errno == ESRCH ? ModuleErrorKind::ProcessExited
                                                                              : ModuleErrorKind::Unreadable;
}

gsym::Expected<ModuleIdentity> load_module_identity(uint32_t pid, const MapEntry& mapping,
                                                    const std::string& proc_root, bool keep_open) {
  if (mapping.path == kVdsoPath) {
    const gsym::Expected<VdsoFile>& vdso = own_vdso_file();
    if (!vdso) return gsym::Error("vDSO: " + vdso.error().message);
    if (mapping.end - mapping.start != vdso->size)
      return gsym::Error("[vdso] is not the size of gsymprof's own vDSO (a process of another ABI?)");
    gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(vdso->path);
    if (!file) return file.error();
    auto identity = read_module_identity_fd(file->fd.get());
    // The vDSO copy is gsymprof's own, whoever maps the vDSO.
    if (identity) identity->local_file = vdso->path;
    return identity;
  }
  const std::string proc_pid = proc_root + "/" + std::to_string(pid);
  // map_files entries are magic links to the mapped file itself: followed.
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(map_files_path(proc_root, pid, mapping));
  // Another file at the same range: the process exited and its pid went to
  // another (a mapping event read late), which mapped its own file there.
  if (file && mapping.inode &&
      (file->status.st_ino != mapping.inode || major(file->status.st_dev) != mapping.dev_major ||
       minor(file->status.st_dev) != mapping.dev_minor))
    return process_exited_error();
  const bool through_map_files = static_cast<bool>(file);
  if (!file) {
    std::string first_error = "map_files: " + file.error().message;
    if (mapping.deleted) return gsym::Error("file deleted and " + first_error);
    gsym::FileDescriptor root(::open((proc_pid + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid()) {
      // The process's root is gone (ENOENT for a zombie's root link, or the
      // whole /proc/PID; ESRCH while it is being reaped): it ended before
      // its files could be opened.
      if (errno == ENOENT || errno == ESRCH) return process_exited_error();
      return gsym::Error(first_error + "; " + proc_pid + "/root: " + errno_text(errno));
    }
    file = gsym::open_regular_file_in_root(root.get(), mapping.path, mapping.path);
    if (!file) return gsym::Error(first_error + "; " + file.error().message);
    const struct stat& st = file->status;
    if (st.st_ino != mapping.inode || major(st.st_dev) != mapping.dev_major ||
        minor(st.st_dev) != mapping.dev_minor)
      return gsym::Error(mapping.path + " is not the file that was mapped (replaced since?)");
  }
  auto identity = read_module_identity_fd(file->fd.get());
  if (identity && keep_open) {
    identity->local_file = keep_module_file_open(file->fd.get(), identity->file);
    // Past the limit on kept files, map_files still reaches the very file
    // while the process lives (never the host's path, which may be another).
    if (identity->local_file.empty() && through_map_files)
      identity->local_file = map_files_path(proc_root, pid, mapping);
  }
  return identity;
}

FileStamp stamp_of_mapped_file(uint32_t pid, const MapEntry& mapping, uint64_t mapped_at_ns,
                               const std::string& proc_root) {
  FileStamp claimed;
  claimed.dev = makedev(mapping.dev_major, mapping.dev_minor);
  claimed.inode = mapping.inode;
  if (!mapping.file_backed()) return claimed;
  // The mapping's time on the file-time clock (CLOCK_REALTIME).
  timespec mono{}, real{};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  const int64_t offset = (static_cast<int64_t>(real.tv_sec) - mono.tv_sec) * 1000000000 +
                         (real.tv_nsec - mono.tv_nsec);
  const int64_t mapped_at = static_cast<int64_t>(mapped_at_ns) + offset;
  struct stat st {};
  // map_files links to the very file mapped; stat only, nothing is opened.
  bool found = ::stat(map_files_path(proc_root, pid, mapping).c_str(), &st) == 0;
  if (!found && !mapping.deleted && !mapping.path.empty() && mapping.path[0] == '/')
    found = ::stat(mapping.path.c_str(), &st) == 0;
  if (!found || !S_ISREG(st.st_mode)) return claimed;
  FileStamp now = FileStamp::of(st);
  if (now.dev != claimed.dev || now.inode != claimed.inode) return claimed;
  if (now.ctime_ns > mapped_at - kStampMarginNs) return claimed;
  return now;
}

}  // namespace gsymprof
