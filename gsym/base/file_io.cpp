#include "gsym/base/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

namespace gsym {

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}
FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}
int FileDescriptor::release() { return std::exchange(fd_, -1); }

bool write_all(int fd, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

namespace {

// "LABEL: " ("" for an empty label: the caller names the file).
std::string label_prefix(const std::string& label) { return label.empty() ? "" : label + ": "; }

Error errno_error(const std::string& label, const char* what, int err) {
  return Error::from_errno(err, label_prefix(label) + what + ": " + std::strerror(err));
}

// "WHAT" + strerror(err), coded by errno.
Error errno_text_error(const std::string& what, int err) {
  return Error::from_errno(err, what + std::strerror(err));
}

Error refused(std::string message, int err = 0) {
  Error e(ErrorCode::Refused, std::move(message));
  e.sys_errno = err;
  return e;
}

// Checks what was opened and makes reads blocking again (a regular file
// never blocks, but libelf and friends should not see EAGAIN semantics).
// An empty label: messages without a "LABEL: " prefix.
Expected<OpenFile> check_opened(int raw_fd, const std::string& label) {
  const std::string prefix = label_prefix(label);
  if (raw_fd < 0) {
    const int err = errno;
    if (err == ELOOP) return refused(prefix + "is a symlink (not followed)", err);
    return Error::from_errno(err, prefix + "cannot open: " + std::strerror(err));
  }
  OpenFile file;
  file.fd = FileDescriptor(raw_fd);
  if (::fstat(raw_fd, &file.status) != 0) {
    const int err = errno;
    return Error::from_errno(err, prefix + "cannot stat: " + std::strerror(err));
  }
  if (S_ISDIR(file.status.st_mode)) return refused(prefix + "is a directory", EISDIR);
  if (!S_ISREG(file.status.st_mode)) return refused(prefix + "not a regular file");
  const int flags = ::fcntl(raw_fd, F_GETFL);
  if (flags < 0 || ::fcntl(raw_fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return errno_error(label, "fcntl", errno);
  return file;
}

constexpr int kReadFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

int symlink_flag(Symlinks symlinks) { return symlinks == Symlinks::RefuseFinal ? O_NOFOLLOW : 0; }

// All of `from` (from offset 0 to its end) into `to`, copied by the kernel.
bool copy_all(int from, int to) {
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::sendfile(to, from, &offset, size_t{1} << 30);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
  }
}

// "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: an inherited
// descriptor; -1 when `path` is none of them.
int inherited_descriptor(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (!path.starts_with(prefix) || path.size() == prefix.size()) continue;
    int fd = -1;
    const char* begin = path.data() + prefix.size();
    const char* end = path.data() + path.size();
    auto [ptr, ec] = std::from_chars(begin, end, fd);
    if (ec == std::errc() && ptr == end && fd >= 0) return fd;
  }
  return -1;
}

// ---- temporaries removable from a signal handler ----
struct PendingTemporary {
  std::atomic<bool> claimed{false};
  std::atomic<bool> ready{false};
  int dir_fd = -1;
  char name[NAME_MAX + 1] = {};
};
constexpr size_t kMaxPending = 32;
PendingTemporary g_pending[kMaxPending];
static_assert(std::atomic<bool>::is_always_lock_free);
// Another thread may be creating a temporary while a handler removes them:
// a creator counts itself in, creates and registers, and removes its own
// file if the process is ending by then; the handler marks the end first and
// waits (briefly) until no creator is between those steps. The creator holds
// signals off its own thread meanwhile: a handler run in the middle of it
// could not wait for it, and would miss a file not yet registered.
std::atomic<bool> g_ending{false};
std::atomic<int> g_creating{0};
static_assert(std::atomic<int>::is_always_lock_free);

// Registers `name` in `dir_fd` (duplicated); returns the slot or -1 when full
// (the write still works, it is only not removable by a signal handler).
int register_temporary(int dir_fd, const std::string& name) {
  if (name.size() > NAME_MAX) return -1;
  for (size_t i = 0; i < kMaxPending; ++i) {
    bool expected = false;
    if (!g_pending[i].claimed.compare_exchange_strong(expected, true)) continue;
    g_pending[i].dir_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    std::memcpy(g_pending[i].name, name.c_str(), name.size() + 1);
    g_pending[i].ready.store(g_pending[i].dir_fd >= 0, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot < 0) return;
  PendingTemporary& p = g_pending[slot];
  p.ready.store(false, std::memory_order_release);
  if (p.dir_fd >= 0) ::close(p.dir_fd);
  p.dir_fd = -1;
  p.claimed.store(false, std::memory_order_release);
}

constexpr std::string_view kTempMarker = ".gsymprof-tmp.";

// ".NAME.gsymprof-tmp." with NAME cut so the whole stays within NAME_MAX.
std::string temporary_prefix(const std::string& name) {
  return "." + name.substr(0, 160) + std::string(kTempMarker);
}

// Opens the directory `dir` for an output, one component at a time without
// following symlinks; a symlink on the way is followed only when it belongs
// to root or the effective user (the kernel's protected_symlinks, but in
// every directory): another user's link could point root's output anywhere.
Expected<FileDescriptor> open_output_directory(const std::string& dir) {
  std::vector<std::string> pending;  // components still to walk, last first
  auto push_path = [&](std::string_view path) {
    std::vector<std::string> parts;
    size_t pos = 0;
    while (pos <= path.size()) {
      size_t slash = path.find('/', pos);
      if (slash == std::string_view::npos) slash = path.size();
      if (slash > pos) parts.emplace_back(path.substr(pos, slash - pos));
      pos = slash + 1;
    }
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  FileDescriptor current(::open(dir.starts_with('/') ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!current.valid()) return errno_text_error("cannot open the output directory: ", errno);
  push_path(dir);
  int links = 0;
  while (!pending.empty()) {
    const std::string component = std::move(pending.back());
    pending.pop_back();
    if (component == ".") continue;
    FileDescriptor next(::openat(current.get(), component.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return errno_text_error("cannot open the output directory: ", errno);
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) return errno_text_error("cannot stat the output directory: ", errno);
    if (S_ISLNK(st.st_mode)) {
      if (st.st_uid != 0 && st.st_uid != ::geteuid())
        return refused(component + " is a symlink owned by uid " +
                       std::to_string(st.st_uid) + " (not followed for output)");
      if (++links > 40) return refused("too many symlinks in the output directory", ELOOP);
      char target[4096];
      const ssize_t n = ::readlinkat(next.get(), "", target, sizeof target);
      if (n <= 0 || static_cast<size_t>(n) >= sizeof target)
        return errno_text_error(component + ": cannot read symlink: ", errno);
      const std::string_view link(target, static_cast<size_t>(n));
      if (link.starts_with('/')) {
        current = FileDescriptor(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!current.valid()) return errno_text_error("cannot open /: ", errno);
      }
      push_path(link);
      continue;
    }
    if (!S_ISDIR(st.st_mode)) return Error::from_errno(ENOTDIR, component + " is not a directory");
    current = std::move(next);
  }
  // Readable if possible, so stale temporaries can be listed.
  FileDescriptor readable(::openat(current.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return readable.valid() ? std::move(readable) : std::move(current);
}

}  // namespace

bool writable_only_by_us(const struct stat& status) {
  return (status.st_uid == 0 || status.st_uid == ::geteuid()) &&
         (status.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

Expected<OpenFile> open_regular_file(const std::string& path, Symlinks symlinks) {
  return check_opened(::open(path.c_str(), kReadFlags | symlink_flag(symlinks)), path);
}

Expected<OpenFile> open_regular_file_at(int dir_fd, const std::string& name, Symlinks symlinks,
                                        const std::string& label) {
  return check_opened(::openat(dir_fd, name.c_str(), kReadFlags | symlink_flag(symlinks)), label);
}

Expected<OpenFile> open_regular_file_in_root(int root_fd, const std::string& path,
                                             const std::string& label) {
  open_how how{};
  how.flags = static_cast<uint64_t>(kReadFlags);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how));
  return check_opened(fd, label);
}

Expected<std::vector<uint8_t>> read_descriptor(int fd, uint64_t max_bytes, const std::string& label) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(label, "cannot stat", errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    return refused(label_prefix(label) + "file too large (" + std::to_string(size) + " bytes, limit " +
                   std::to_string(max_bytes) + ")", EFBIG);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  size_t done = 0;
  // pread up to the size fstat gave; a file that grows meanwhile is read to
  // that size, one that shrinks ends early (both: a changing file).
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(label, "read failed", errno);
    if (n == 0) return Error(ErrorCode::Io, label_prefix(label) + "file shrank while being read");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

Expected<std::vector<uint8_t>> read_file_bytes(const std::string& path, uint64_t max_bytes) {
  Expected<OpenFile> file = open_regular_file(path);
  if (!file) return file.error();
  return read_descriptor(file->fd.get(), max_bytes, path);
}

Expected<std::string> read_file_text(const std::string& path, uint64_t max_bytes) {
  Expected<std::vector<uint8_t>> bytes = read_file_bytes(path, max_bytes);
  if (!bytes) return bytes.error();
  return std::string(bytes->begin(), bytes->end());
}

namespace {

// write_file_atomically_at, its errors naming the file `target`.
// `write_content` writes the new file's contents to the descriptor it is
// given (false: failed, errno set).
Status write_named_file_atomically_at(int dir_fd, const std::string& target, const std::string& name,
                                      const std::function<bool(int)>& write_content, mode_t create_mode) {
  struct stat existing {};
  if (::fstatat(dir_fd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(existing.st_mode)) return refused(target + ": is a directory", EISDIR);
    if (!S_ISREG(existing.st_mode) && !S_ISLNK(existing.st_mode))
      return refused(target + ": not a regular file (refusing to replace it)");
  }
  static std::atomic<unsigned> counter{0};
  const std::string prefix = temporary_prefix(name) + std::to_string(::getpid()) + ".";
  std::string temp;
  FileDescriptor fd;
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  g_creating.fetch_add(1);
  for (int attempt = 0; attempt < 100 && !fd.valid() && !g_ending.load(); ++attempt) {
    temp = prefix + std::to_string(counter++);
    fd = FileDescriptor(::openat(dir_fd, temp.c_str(),
                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                                 create_mode));
    if (!fd.valid() && errno != EEXIST) break;
  }
  const int create_errno = errno;
  const int slot = fd.valid() ? register_temporary(dir_fd, temp) : -1;
  if (fd.valid() && g_ending.load()) {  // a handler may have passed its slot already
    ::unlinkat(dir_fd, temp.c_str(), 0);
    unregister_temporary(slot);
    g_creating.fetch_sub(1);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return Error(target + ": not written: the process is ending");
  }
  g_creating.fetch_sub(1);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!fd.valid()) return errno_error(target, "cannot create a temporary file", create_errno);
  auto fail = [&](const char* what) {
    const int err = errno;
    ::unlinkat(dir_fd, temp.c_str(), 0);
    unregister_temporary(slot);
    return Status(errno_error(target, what, err));
  };
  if (!write_content(fd.get())) return fail("write failed");
  if (::fsync(fd.get()) != 0) return fail("fsync failed");
  if (::close(fd.release()) != 0) return fail("close failed");
  if (::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0)
    return fail("cannot rename the temporary file");
  unregister_temporary(slot);
  remove_stale_temporary_files(dir_fd, name);
  return Status::success();
}

}  // namespace

Status write_file_atomically_at(int dir_fd, const std::string& label, const std::string& name,
                                std::span<const uint8_t> bytes, mode_t create_mode) {
  return write_named_file_atomically_at(
      dir_fd, label + "/" + name, name, [bytes](int fd) { return write_all(fd, bytes); }, create_mode);
}

Status write_file_atomically_at(int dir_fd, const std::string& label, const std::string& name, int source_fd,
                                mode_t create_mode) {
  return write_named_file_atomically_at(
      dir_fd, label + "/" + name, name, [source_fd](int fd) { return copy_all(source_fd, fd); }, create_mode);
}

Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                             mode_t create_mode) {
  return write_file_atomically_streamed(path, [bytes](int fd) { return write_all(fd, bytes); }, create_mode);
}

Status write_file_atomically_streamed(const std::string& path, const std::function<bool(int fd)>& write_content,
                                      mode_t create_mode) {
  if (path.empty()) return Error("empty output path");
  if (path == "/dev/null") return Status::success();
  if (const int fd = inherited_descriptor(path); fd >= 0) {
    if (fd == 1) std::fflush(stdout);
    if (fd == 2) std::fflush(stderr);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno_error(path, "not an open descriptor", errno);
    if (!write_content(fd)) return errno_error(path, "write failed", errno);
    return Status::success();
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return Error(path + ": not a file name");
  Expected<FileDescriptor> dir_fd = open_output_directory(dir);
  if (!dir_fd) return dir_fd.error().prefixed(path + ": ");
  // Errors name the path as given, not DIR/NAME.
  return write_named_file_atomically_at(dir_fd->get(), path, name, write_content, create_mode);
}

Status write_file_atomically(const std::string& path, std::string_view text, mode_t create_mode) {
  return write_file_atomically_streamed(path, [text](int fd) { return write_all(fd, text); }, create_mode);
}

void remove_pending_temporary_files() noexcept {
  g_ending.store(true);
  // Creators in other threads finish creating and registering (or see the
  // end and remove their own file): up to 100 ms, then remove what is known.
  for (int i = 0; i < 100 && g_creating.load() > 0; ++i) {
    struct timespec pause {0, 1000000};
    ::nanosleep(&pause, nullptr);
  }
  for (PendingTemporary& p : g_pending)
    if (p.ready.load(std::memory_order_acquire)) ::unlinkat(p.dir_fd, p.name, 0);
}

void remove_stale_temporary_files(int dir_fd, const std::string& name) {
  const int list_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (list_fd < 0) return;  // an O_PATH-only directory cannot be listed
  DIR* dir = ::fdopendir(list_fd);
  if (!dir) {
    ::close(list_fd);
    return;
  }
  const std::string prefix = temporary_prefix(name);
  std::vector<std::string> stale;
  while (dirent* entry = ::readdir(dir)) {
    std::string_view entry_name = entry->d_name;
    if (!entry_name.starts_with(prefix)) continue;
    std::string_view rest = entry_name.substr(prefix.size());
    int pid = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc() || ptr == rest.data() + rest.size() || *ptr != '.' || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    if (::fstatat(list_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    stale.emplace_back(entry_name);
  }
  for (const std::string& s : stale) ::unlinkat(list_fd, s.c_str(), 0);
  ::closedir(dir);
}

}  // namespace gsym
