#include "userspace/base/private_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gsymprof {
namespace {

using gsym::FileDescriptor;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

gsym::Expected<gsym::FileDescriptor> open_private_dir(const std::string& dir, bool create) {
  auto refused = [&](std::string message, int err = 0) {
    gsym::Error e(gsym::ErrorCode::Refused, dir + ": " + std::move(message));
    e.sys_errno = err;
    return e;
  };
  auto refused_errno = [&](std::string what) {  // what + strerror(errno)
    const int err = errno;
    return refused(std::move(what) + errno_text(err), err);
  };
  if (dir.empty()) return gsym::Error(gsym::ErrorCode::Refused, "no directory");
  FileDescriptor current(::open(dir[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (current.get() < 0) return refused_errno("");
  size_t pos = 0;
  while (pos < dir.size()) {
    size_t slash = dir.find('/', pos);
    if (slash == std::string::npos) slash = dir.size();
    std::string component = dir.substr(pos, slash - pos);
    pos = slash + 1;
    if (component.empty() || component == ".") continue;
    const bool last = dir.find_first_not_of('/', pos) == std::string::npos;
    bool created = create && ::mkdirat(current.get(), component.c_str(), last ? 0700 : 0755) == 0;
    if (!create && ::faccessat(current.get(), component.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0 &&
        errno == ENOENT)
      return gsym::Error::from_errno(ENOENT, dir + ": " + component + ": " + errno_text(ENOENT));
    if (create && !created && errno != EEXIST) {
      const int err = errno;
      return refused("cannot create " + component + ": " + errno_text(err), err);
    }
    FileDescriptor next(::openat(current.get(), component.c_str(),
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      int err = errno;
      if (err == ELOOP || err == ENOTDIR) return refused(component + " is a symlink or not a directory", err);
      return refused(errno_text(err), err);
    }
    // Intermediate directories made here are like /var/cache: 0755 whatever
    // the umask.
    if (created && !last && ::fchmod(next.get(), 0755) != 0)
      return refused_errno("chmod " + component + ": ");
    current = std::move(next);
  }
  struct stat st;
  if (::fstat(current.get(), &st) != 0) return refused_errno("");
  if (st.st_uid != ::geteuid())
    return refused("owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                   std::to_string(::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return refused("writable by group or others");
  if ((st.st_mode & 07777) != 0700 && ::fchmod(current.get(), 0700) != 0)
    return refused_errno("chmod 0700: ");
  return current;
}

}  // namespace gsymprof
