#include "userspace/atomic_write.h"

#include "gsym/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gsymprof {
namespace {

gsym::Error errno_error(const std::string& path, const char* what) {
  return gsym::Error(path + ": " + what + ": " + std::strerror(errno));
}

mode_t current_umask() {
  // umask can only be read by setting it; restore immediately. Single-threaded
  // at the points where output is written.
  mode_t mask = umask(022);
  umask(mask);
  return mask;
}

}  // namespace

gsym::Status write_file_atomically(const std::string& path, std::string_view bytes) {
  return gsym::write_file_atomically(
      path, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
      0666 & ~current_umask());
}

gsym::Expected<std::string> read_whole_file(const std::string& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error(path, "cannot open");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    gsym::Error error = errno_error(path, "cannot stat");
    close(fd);
    return error;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return gsym::Error(path + ": is a directory");
  }
  std::string data;
  char buffer[65536];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      gsym::Error error = errno_error(path, "read failed");
      close(fd);
      return error;
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > max_bytes) {
      close(fd);
      return gsym::Error(path + ": file too large (over " + std::to_string(max_bytes) +
                         " bytes)");
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

}  // namespace gsymprof
