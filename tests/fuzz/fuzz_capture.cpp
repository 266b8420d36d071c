// Fuzzes the capture-file reader: any bytes give a capture or a one-line
// error, never a crash or hang; an accepted capture round-trips exactly
// (write -> read -> write gives the same bytes); and reading the bytes as a
// file (streamed, with passes that re-read it) gives the same verdict as
// reading them from memory.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/capture/capture_file.h"

namespace {

// The input as a file: a memfd, reused across inputs.
int input_file(const uint8_t* data, size_t size) {
  static int fd = memfd_create("fuzz_capture", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto capture = gsymprof::capture_from_json(text);

  const std::string path = "/proc/self/fd/" + std::to_string(input_file(data, size));
  auto from_file = gsymprof::read_capture_file(path);
  if (from_file.ok() != capture.ok()) std::abort();
  if (!capture && from_file.error().message != path + ": " + capture.error().message) std::abort();

  if (!capture) {
    const std::string& message = capture.error().message;
    if (message.empty() || message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const std::string written = gsymprof::capture_to_json(*capture);
  if (gsymprof::capture_to_json(*from_file) != written) std::abort();
  auto again = gsymprof::capture_from_json(written);
  if (!again) std::abort();
  if (gsymprof::capture_to_json(*again) != written) std::abort();
  return 0;
}
