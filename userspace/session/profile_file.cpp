#include "userspace/session/profile_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gsym/base/file_io.h"
#include "userspace/capture/capture_file.h"
#include "userspace/perf_data/perf_data_capture.h"
#include "userspace/session/recorded_session.h"
#include "userspace/perf_data/perf_data_reader.h"

namespace gsymprof {
namespace {

// The file's bytes: mapped when nobody else can truncate it under us (that
// would be SIGBUS), else read. Mapping spares a large recording a zeroed
// buffer and a copy: about 40% of symbolize's time on an 80 MB file.
class FileBytes {
 public:
  static gsym::Expected<FileBytes> load(const gsym::OpenFile& file, const std::string& path) {
    FileBytes out;
    const uint64_t size = static_cast<uint64_t>(file.status.st_size);
    if (size > kMaxPerfDataBytes || !gsym::writable_only_by_us(file.status) || size == 0) {
      auto bytes = gsym::read_descriptor(file.fd.get(), kMaxPerfDataBytes, path);
      if (!bytes) return bytes.error();
      out.owned_ = std::move(*bytes);
      out.view_ = out.owned_;
      return out;
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
    if (p == MAP_FAILED) return gsym::Error(path + ": cannot map: " + std::strerror(errno));
    out.view_ = {static_cast<const uint8_t*>(p), static_cast<size_t>(size)};
    out.mapped_ = true;
    return out;
  }
  FileBytes(FileBytes&& other) noexcept
      : owned_(std::move(other.owned_)), view_(other.view_), mapped_(other.mapped_) {
    other.mapped_ = false;
  }
  FileBytes& operator=(FileBytes&&) = delete;
  ~FileBytes() {
    if (mapped_) ::munmap(const_cast<uint8_t*>(view_.data()), view_.size());
  }
  std::span<const uint8_t> bytes() const { return view_; }

 private:
  FileBytes() = default;
  std::vector<uint8_t> owned_;
  std::span<const uint8_t> view_;
  bool mapped_ = false;
};

bool starts_like_perf_data(int fd) {
  uint8_t magic[8];
  const ssize_t got = pread(fd, magic, sizeof(magic), 0);
  return got == static_cast<ssize_t>(sizeof(magic)) && looks_like_perf_data(magic);
}

}  // namespace

std::string profile_file_kind(std::string_view head) {
  if (looks_like_perf_data({reinterpret_cast<const uint8_t*>(head.data()), head.size()}))
    return "a perf.data file";
  if (looks_like_capture(head)) return "a gsymprof capture";
  return "";
}

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
  auto bytes = FileBytes::load(*file, path);
  if (!bytes) return bytes.error();
  auto perf = PerfDataFile::parse(bytes->bytes());
  if (!perf) return gsym::Error(path + ": " + perf.error().message);
  PerfCaptureOptions capture_options;
  capture_options.event = options.perf_event;
  capture_options.recorder_uid = file->status.st_uid;
  auto capture = capture_from_perf_data(*perf, capture_options);
  if (!capture) return gsym::Error(path + ": " + capture.error().message);
  return capture;
}

}  // namespace gsymprof
