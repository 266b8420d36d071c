#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "gsym/base/file_io.h"
#include "userspace/http/http.h"

namespace gsymprof::http {

namespace {

// Why a directory on the module's path could let another user change what
// is loaded: "" when it cannot (owned by root or us, and writable by no
// one else, or sticky as /tmp is, where others cannot rename our entries).
std::string untrusted_directory(const struct stat& status) {
  if (status.st_uid != 0 && status.st_uid != ::geteuid())
    return "owned by uid " + std::to_string(status.st_uid);
  if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (status.st_mode & S_ISVTX) == 0)
    return "writable by group or others";
  return {};
}

// The directory `dir` (absolute, no symlinks: a realpath) opened component
// by component, each checked; the error says which one is not trusted.
gsym::Expected<gsym::FileDescriptor> open_trusted_directory(const std::string& dir) {
  gsym::FileDescriptor current(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string walked;
  size_t pos = 1;
  for (;;) {
    struct stat status;
    if (current.get() < 0 || ::fstat(current.get(), &status) != 0)
      return gsym::Error::from_errno(errno, (walked.empty() ? "/" : walked) + ": " + std::strerror(errno));
    if (std::string why = untrusted_directory(status); !why.empty())
      return gsym::Error(gsym::ErrorCode::Refused, (walked.empty() ? "/" : walked) + " is " + why);
    if (pos >= dir.size()) return current;
    size_t slash = dir.find('/', pos);
    if (slash == std::string::npos) slash = dir.size();
    const std::string component = dir.substr(pos, slash - pos);
    pos = slash + 1;
    if (component.empty()) continue;
    walked += "/" + component;
    current = gsym::FileDescriptor(
        ::openat(current.get(), component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
}

// load_module_from runs once per process in gsymprof (module()); tests
// load a few copies. The bound keeps the names short.
constexpr unsigned kMaxLoads = 256;

}  // namespace

gsym::Expected<const Module*> load_module_from(const std::string& dir) {
  char resolved[PATH_MAX];
  if (!::realpath(dir.c_str(), resolved)) return gsym::Error::from_errno(errno, dir + ": " + std::strerror(errno));
  auto directory = open_trusted_directory(resolved);
  if (!directory) return directory.error();
  const std::string path = std::string(resolved) + "/" + kModuleFile;
  auto file = gsym::open_regular_file_at(directory->get(), kModuleFile, gsym::Symlinks::RefuseFinal, path);
  if (!file) return file.error();
  if (!gsym::writable_only_by_us(file->status))
    return gsym::Error(gsym::ErrorCode::Refused,
                       path + ": owned by uid " + std::to_string(file->status.st_uid) +
                           " or writable by group or others: not loaded into a gsymprof of uid " +
                           std::to_string(::geteuid()));
  // Loaded from the descriptor checked, not by its name again. glibc answers
  // a name it has loaded before with that earlier object, whatever file the
  // descriptor holds now: a "./" more per load makes each load's name new.
  // (The same file loaded again is still known by its device and inode.)
  static std::atomic<unsigned> loads{0};
  const unsigned earlier_loads = loads++;
  if (earlier_loads >= kMaxLoads)
    return gsym::Error(path + ": not loaded: more than " + std::to_string(kMaxLoads) + " loads");
  std::string by_descriptor = "/proc/self/fd/";
  for (unsigned i = 0; i < earlier_loads; ++i) by_descriptor += "./";
  by_descriptor += std::to_string(file->fd.get());
  void* handle = ::dlopen(by_descriptor.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
  if (!handle) {
    const char* why = ::dlerror();
    return gsym::Error(path + ": cannot load: " + (why ? why : "unknown error"));
  }
  using EntryPoint = const Module* (*)();
  auto entry = reinterpret_cast<EntryPoint>(::dlsym(handle, kEntryPoint));
  const Module* module = entry ? entry() : nullptr;
  if (!module) return gsym::Error(path + ": has no " + kEntryPoint);
  if (!module->fingerprint || std::strcmp(module->fingerprint, kInterface) != 0)
    return gsym::Error(path + ": built from another version of gsymprof (interface " +
                       (module->fingerprint ? module->fingerprint : "?") + ", this gsymprof's " + kInterface +
                       "): install the two together");
  return module;
}

namespace {

gsym::Expected<const Module*> load() {
  char exe[PATH_MAX];
  const ssize_t length = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (length <= 0) return gsym::Error(std::string("cannot find gsymprof's own path: ") + std::strerror(errno));
  exe[length] = '\0';
  std::string dir(exe);
  dir.erase(dir.rfind('/') + 1);
  // Beside the executable (the build tree), then where `make install` puts it.
  const std::string candidates[] = {dir, dir + "../lib/gsymprof"};
  std::string tried;
  for (const std::string& candidate : candidates) {
    auto loaded = load_module_from(candidate);
    if (loaded) return loaded;
    if (loaded.error().code != gsym::ErrorCode::NotFound)
      return gsym::Error(std::string("HTTP: ") + loaded.error().message);
    tried += (tried.empty() ? "" : " nor ") + candidate;
  }
  return gsym::Error(gsym::ErrorCode::NotFound, std::string("HTTP needs ") + kModuleFile +
                                                    ", built and installed with gsymprof: not in " + tried);
}

}  // namespace

gsym::Expected<const Module*> module() {
  static const gsym::Expected<const Module*> loaded = load();
  return loaded;
}

}  // namespace gsymprof::http
