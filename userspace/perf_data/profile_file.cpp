#include "userspace/perf_data/profile_file.h"

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gsym/file_io.h"
#include "userspace/capture/capture_file.h"
#include "userspace/perf_data/perf_data_capture.h"
#include "userspace/perf_data/perf_data_reader.h"

namespace gsymprof {
namespace {

bool starts_like_perf_data(int fd) {
  uint8_t magic[8];
  const ssize_t got = pread(fd, magic, sizeof(magic), 0);
  return got == static_cast<ssize_t>(sizeof(magic)) && looks_like_perf_data(magic);
}

}  // namespace

gsym::Expected<bool> is_perf_data_file(const std::string& path) {
  auto file = gsym::open_regular_file(path);
  if (!file) return file.error();
  return starts_like_perf_data(file->fd.get());
}

gsym::Expected<Capture> read_profile_file(const std::string& path,
                                          const ProfileFileOptions& options) {
  auto file = gsym::open_regular_file(path);
  if (!file) return file.error();
  if (!starts_like_perf_data(file->fd.get())) {
    if (!options.perf_event.empty())
      return gsym::Error(path + ": a gsymprof capture, not perf.data: it has no events to choose");
    return read_capture_file(path);
  }
  auto bytes = gsym::read_descriptor(file->fd.get(), kMaxPerfDataBytes, path);
  if (!bytes) return bytes.error();
  auto perf = PerfDataFile::parse(*bytes);
  if (!perf) return gsym::Error(path + ": " + perf.error().message);
  PerfCaptureOptions capture_options;
  capture_options.event = options.perf_event;
  auto capture = capture_from_perf_data(*perf, capture_options);
  if (!capture) return gsym::Error(path + ": " + capture.error().message);
  return capture;
}

}  // namespace gsymprof
