#include "userspace/perf_data/profile_file.h"

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gsym/file_io.h"
#include "userspace/capture/capture_file.h"
#include "userspace/perf_data/perf_data_capture.h"
#include "userspace/perf_data/perf_data_reader.h"

namespace gsymprof {

gsym::Expected<Capture> read_profile_file(const std::string& path) {
  auto file = gsym::open_regular_file(path);
  if (!file) return file.error();
  uint8_t magic[8];
  const ssize_t got = pread(file->fd.get(), magic, sizeof(magic), 0);
  if (got != static_cast<ssize_t>(sizeof(magic)) || !looks_like_perf_data(magic))
    return read_capture_file(path);
  auto bytes = gsym::read_descriptor(file->fd.get(), kMaxPerfDataBytes, path);
  if (!bytes) return bytes.error();
  auto perf = PerfDataFile::parse(*bytes);
  if (!perf) return gsym::Error(path + ": " + perf.error().message);
  auto capture = capture_from_perf_data(*perf);
  if (!capture) return gsym::Error(path + ": " + capture.error().message);
  return capture;
}

}  // namespace gsymprof
