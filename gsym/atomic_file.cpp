#include "gsym/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gsym {
namespace {

Error errno_error(const std::string& path, const char* what) {
  return Error(path + ": " + what + ": " + std::strerror(errno));
}

bool write_all(int fd, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                             mode_t mode) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return Error(path + ": is a directory");
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno_error(path, "cannot open");
    bool ok = write_all(fd, bytes);
    Error error = ok ? Error() : errno_error(path, "write failed");
    close(fd);
    if (!ok) return error;
    return Status::success();
  }

  std::string temp = path + ".tmp.XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) return errno_error(path, "cannot create a temporary file");
  auto fail = [&](const char* what) {
    Error error = errno_error(path, what);
    if (fd >= 0) close(fd);
    unlink(temp.c_str());
    return Status(error);
  };
  if (!write_all(fd, bytes)) return fail("write failed");
  if (fchmod(fd, mode) != 0) return fail("cannot set the file mode");
  if (fsync(fd) != 0) return fail("fsync failed");
  int rc = close(fd);
  fd = -1;
  if (rc != 0) return fail("close failed");
  if (rename(temp.c_str(), path.c_str()) != 0) return fail("cannot rename the temporary file");
  return Status::success();
}

}  // namespace gsym
