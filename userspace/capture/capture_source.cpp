#include "userspace/capture/capture_source.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "userspace/capture/capture_schema.h"

namespace gsymprof::capture_source {
namespace {

// The fewest bytes an element of each section takes in valid JSON (a minimal
// module, process, stack), which bounds how many there can be.
constexpr uint64_t kMinElementBytes[kSectionCount] = {68, 32, 58};
constexpr uint64_t kMinFrameBytes = 12;  // {"python":0}

int section_named(const std::string& key) {
  using namespace capture_schema;
  return key == field_name(kModules)     ? kModulesSection
         : key == field_name(kProcesses) ? kProcessesSection
         : key == field_name(kStacks)    ? kStacksSection
                                         : -1;
}

}  // namespace

FileSource::FileSource(int fd, uint64_t max_bytes)
    : fd_(fd), max_bytes_(max_bytes), buffer_(new char[kBufferSize]) {
  rewind();
}

void FileSource::refill() {
  cur = lim = buffer_.get();
  if (failed()) return;
  for (;;) {
    ssize_t n = ::pread(fd_, buffer_.get(), kBufferSize, static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_errno_ = errno;
    if (n <= 0) return;
    offset_ += static_cast<uint64_t>(n);
    // Checked while reading too: fstat's size was checked, but the file
    // may grow.
    if (offset_ > max_bytes_) {
      grew_too_large_ = true;
      return;
    }
    lim = buffer_.get() + n;
    return;
  }
}

std::string FileSource::error() const {
  if (read_errno_) return std::string("read failed: ") + std::strerror(read_errno_);
  if (grew_too_large_)
    return "capture too large: it grew past the limit of " + std::to_string(max_bytes_) +
           " bytes while being read";
  return "";
}

uint64_t SectionCounter::scan(Source& source) {
  uint64_t total_bytes = 0;
  for (; source.cur != source.lim; source.refill()) {
    feed(source.cur, source.lim);
    total_bytes += static_cast<uint64_t>(source.lim - source.cur);
    source.cur = source.lim;
  }
  return total_bytes;
}

uint64_t SectionCounter::count(Section section, uint64_t total_bytes) const {
  return std::min(counts_[section], total_bytes / kMinElementBytes[section] + 1);
}

uint64_t SectionCounter::big_stack_frames(uint64_t index) const {
  auto it = std::lower_bound(big_stacks_.begin(), big_stacks_.end(), std::make_pair(index, uint64_t{0}));
  return it != big_stacks_.end() && it->first == index ? it->second : 0;
}

void SectionCounter::feed(const char* p, const char* end) {
  for (; p != end; ++p, ++position_) {
    const char c = *p;
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      else if (keyed_depth() && key_.size() < 16) key_ += c;
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        if (keyed_depth()) key_.clear();
        break;
      case '{':
      case '[':
        if (depth_ == 1) {
          section_ = c == '[' ? section_named(key_) : -1;
        } else if (depth_ == 2 && c == '{' && section_ >= 0) {
          ++counts_[section_];
        } else if (depth_ == 3 && c == '[' && section_ == kStacksSection &&
                   key_ == capture_schema::field_name(capture_schema::kFrames)) {
          in_frames_ = true;
          frames_start_ = position_;
          frames_ = 0;
        } else if (depth_ == 4 && c == '{' && in_frames_) {
          ++frames_;
        }
        ++depth_;
        break;
      case '}':
      case ']':
        if (depth_ > 0) --depth_;
        if (depth_ == 3 && in_frames_) {
          in_frames_ = false;
          const uint64_t frames = std::min(frames_, (position_ - frames_start_) / kMinFrameBytes + 1);
          if (frames >= kBigStackFrames) big_stacks_.emplace_back(counts_[kStacksSection] - 1, frames);
        }
        break;
      default: break;
    }
  }
}

}  // namespace gsymprof::capture_source
