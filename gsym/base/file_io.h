// gsym/base/file_io.h - the one home for file access: opening files that anyone may
// have planted (no blocking on FIFOs, nothing but regular files), reading them
// whole with a size limit, and writing outputs that appear whole or not at all
// without ever writing through a path that somebody else controls.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"

namespace gsym {

// Owns a file descriptor; move-only.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  ~FileDescriptor();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// A regular file opened read-only, and what fstat said of that descriptor.
struct OpenFile {
  FileDescriptor fd;
  struct stat status {};
};

enum class Symlinks : uint8_t {
  Follow,          // any symlink on the way is followed
  RefuseFinal,     // O_NOFOLLOW: the last component must not be a symlink
};

// Owned by root or the effective user and writable by no group or other
// user: nobody else can have written its contents or can truncate it (so it
// may be mapped, and what is derived from it may be shared).
bool writable_only_by_us(const struct stat& status);

// Opens `path` with O_RDONLY | O_NONBLOCK | O_CLOEXEC (opening a FIFO never
// blocks), then checks the descriptor itself (no stat-then-open by path):
// anything but a regular file is refused, "PATH: not a regular file".
// O_NONBLOCK is cleared again before returning.
Expected<OpenFile> open_regular_file(const std::string& path, Symlinks symlinks = Symlinks::Follow);
// The same relative to the directory `dir_fd` (or AT_FDCWD); `label` names
// the file in errors ("" = no name: the caller adds it).
Expected<OpenFile> open_regular_file_at(int dir_fd, const std::string& name, Symlinks symlinks,
                                        const std::string& label);
// The same for `path` resolved inside the directory tree `root_fd` as if it
// were the root (absolute symlinks and ".." stay inside it: openat2
// RESOLVE_IN_ROOT), e.g. another mount namespace's /proc/PID/root.
Expected<OpenFile> open_regular_file_in_root(int root_fd, const std::string& path,
                                             const std::string& label);

// Errors of these functions are coded (expected.h): NotFound when the path
// does not exist (ENOENT, ENOTDIR: a miss to report as such, not a failure),
// Refused for what they will not open (a directory, a FIFO, a symlink not
// followed, a file over the limit), Io for any other failed call.

// Reads a whole regular file (opened as above); refuses files larger than
// `max_bytes` before reading them ("PATH: file too large (N bytes, limit L)").
Expected<std::vector<uint8_t>> read_file_bytes(const std::string& path, uint64_t max_bytes);
Expected<std::string> read_file_text(const std::string& path, uint64_t max_bytes);
// Reads all of `fd` (a regular file, from offset 0) with the same limit;
// `label` names it in errors ("" = no name: the caller adds it).
Expected<std::vector<uint8_t>> read_descriptor(int fd, uint64_t max_bytes, const std::string& label);

// Writes all of `bytes` to `fd`, again after a short write or EINTR. False:
// failed, errno set (EIO when the descriptor took nothing).
bool write_all(int fd, std::span<const uint8_t> bytes);
inline bool write_all(int fd, std::string_view text) {
  return write_all(fd, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// Writes `bytes` to `path`, whole or not at all:
//   "-", "/dev/stdout", "/dev/stderr", "/dev/fd/N", "/proc/self/fd/N": the
//     already-open descriptor (so `-o >(cmd)` works); "/dev/null": nothing.
//   anything else: a new file beside the target (O_CREAT | O_EXCL |
//     O_NOFOLLOW, mode `create_mode` & ~umask), written, fsync'ed and renamed
//     over the target. An existing symlink at `path` is replaced, never
//     written through; an existing directory, device, FIFO or socket is
//     refused. Symlinks in the directory part are followed only when owned
//     by root or the effective user. The temporary is removed on failure and by
//     remove_pending_temporary_files() (signal handlers).
Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                             mode_t create_mode = 0666);
Status write_file_atomically(const std::string& path, std::string_view text,
                             mode_t create_mode = 0666);
// The same, the contents written by `write_content` to the descriptor it is
// given (false: failed, errno set): a large output written in pieces as it
// is made need not exist whole in memory.
Status write_file_atomically_streamed(const std::string& path, const std::function<bool(int fd)>& write_content,
                                      mode_t create_mode = 0666);
// The same into the directory `dir_fd` (e.g. a cache opened without following
// symlinks); `label` names the directory in errors.
Status write_file_atomically_at(int dir_fd, const std::string& label, const std::string& name,
                                std::span<const uint8_t> bytes, mode_t create_mode);
// The same, the contents all of `source_fd` (a regular file or memfd, from
// offset 0), copied by the kernel (sendfile): a large file passes through
// no memory of this process.
Status write_file_atomically_at(int dir_fd, const std::string& label, const std::string& name, int source_fd,
                                mode_t create_mode);

// Unlinks every temporary file of a write still in progress. Async-signal-safe:
// for handlers of SIGINT/SIGTERM that then end the process.
void remove_pending_temporary_files() noexcept;

// Removes temporaries that an earlier, killed process left in `dir_fd` for
// `name` (ours by name pattern and owner, their process gone).
void remove_stale_temporary_files(int dir_fd, const std::string& name);

}  // namespace gsym
