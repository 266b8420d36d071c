#include "userspace/base/pseudo_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gsym/base/file_io.h"

namespace gsymprof {

gsym::Expected<std::string> read_pseudo_file(const std::string& path, size_t max_bytes) {
  gsym::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    const int err = errno;
    return gsym::Error::from_errno(err, path + ": " + std::strerror(err));
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      return gsym::Error::from_errno(err, path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes)
      return gsym::Error(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace gsymprof
