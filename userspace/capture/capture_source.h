// userspace/capture/capture_source.h - the bytes the capture reader parses:
// a text in memory or a file read through a small buffer, rewound for each
// pass over it, and the pre-scan that counts each section's elements.
//
// Internal to userspace/capture/ (capture_reader.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gsymprof::capture_source {

// Bytes for the parser: the whole text, or a buffer refilled from a file.
class Source {
 public:
  virtual ~Source() = default;
  const char* cur = nullptr;
  const char* lim = nullptr;
  // Makes [cur, lim) the next bytes; leaves it empty at the end of input.
  virtual void refill() = 0;
  virtual void rewind() = 0;
  // Why the input ended early, or "" if it did not.
  virtual std::string error() const { return ""; }
};

class TextSource final : public Source {
 public:
  explicit TextSource(std::string_view text) : text_(text) { rewind(); }
  void refill() override { cur = lim; }
  void rewind() override {
    cur = text_.data();
    lim = text_.data() + text_.size();
  }

 private:
  std::string_view text_;
};

// Reads `fd` with pread (so each pass rewinds by offset), failing once it
// has read more than `max_bytes`: the file may grow after its size was
// checked.
class FileSource final : public Source {
 public:
  FileSource(int fd, uint64_t max_bytes);
  void refill() override;
  void rewind() override {
    offset_ = 0;
    refill();
  }
  std::string error() const override;

 private:
  static constexpr size_t kBufferSize = 256 * 1024;
  bool failed() const { return read_errno_ != 0 || grew_too_large_; }
  int fd_;
  uint64_t max_bytes_;
  uint64_t offset_ = 0;
  int read_errno_ = 0;
  bool grew_too_large_ = false;
  std::unique_ptr<char[]> buffer_;
};

// What nlohmann's iterator input adapter reads through: compares equal to
// the end iterator once the source is exhausted.
class SourceIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  explicit SourceIterator(Source* source = nullptr) : source_(source) {}
  reference operator*() const { return *source_->cur; }
  SourceIterator& operator++() {
    if (++source_->cur == source_->lim) source_->refill();
    return *this;
  }
  bool operator==(const SourceIterator& other) const { return at_end() == other.at_end(); }
  bool operator!=(const SourceIterator& other) const { return !(*this == other); }

 private:
  bool at_end() const { return !source_ || source_->cur == source_->lim; }
  Source* source_;
};

// The top-level arrays the reader builds in dependency order: processes
// refer to modules, stacks to processes (and modules).
enum Section : uint8_t { kModulesSection, kProcessesSection, kStacksSection, kSectionCount };

// A stack with this many frames or more is a big stack: SectionCounter
// counts its frames, so that the reader allocates them once.
inline constexpr uint64_t kBigStackFrames = 4096;

// Counts the objects in each section array in one quick pass over the bytes
// (strings and escapes tracked, nothing else), so that each section's vector
// is allocated once at its size: growing it by doubling would briefly hold
// both copies, up to twice the memory the capture needs. Likewise the frames
// of big stacks: a Python frame ({"python":0}) is 13 bytes of text and 32
// in memory, so growing one huge stack's frames by doubling would cost 7
// times its text. Only a hint: invalid JSON gives some count, capped by the
// fewest bytes an element takes.
class SectionCounter {
 public:
  // Reads `source` to its end; returns the bytes read.
  uint64_t scan(Source& source);
  // How many elements to reserve for `section` of a `total_bytes` input.
  uint64_t count(Section section, uint64_t total_bytes) const;
  // How many frames to reserve for the stack at `index` of `stacks`: a big
  // stack's count, else 0.
  uint64_t big_stack_frames(uint64_t index) const;

 private:
  void feed(const char* p, const char* end);
  bool keyed_depth() const { return depth_ == 1 || (depth_ == 3 && section_ == kStacksSection); }
  bool in_string_ = false, escaped_ = false;
  uint64_t depth_ = 0;
  uint64_t position_ = 0;  // bytes fed
  // The last string at depth 1, or at depth 3 in `stacks` (a key, when a
  // value follows).
  std::string key_;
  int section_ = -1;
  uint64_t counts_[kSectionCount] = {};
  // The `frames` array being counted: where it started, its frames so far.
  bool in_frames_ = false;
  uint64_t frames_start_ = 0, frames_ = 0;
  // (index in `stacks`, frames) of big stacks, by index: a few, since each
  // takes at least kBigStackFrames * 12 bytes.
  std::vector<std::pair<uint64_t, uint64_t>> big_stacks_;
};

}  // namespace gsymprof::capture_source
