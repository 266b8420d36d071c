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

// Counts the objects in each section array in one quick pass over the bytes
// (strings and escapes tracked, nothing else), so that each section's vector
// is allocated once at its size: growing it by doubling would briefly hold
// both copies, up to twice the memory the capture needs. Only a hint:
// invalid JSON gives some count, capped by the fewest bytes an element takes.
class SectionCounter {
 public:
  // Reads `source` to its end; returns the bytes read.
  uint64_t scan(Source& source);
  // How many elements to reserve for `section` of a `total_bytes` input.
  uint64_t count(Section section, uint64_t total_bytes) const;

 private:
  void feed(const char* p, const char* end);
  bool in_string_ = false, escaped_ = false;
  uint64_t depth_ = 0;
  std::string key_;  // the last string at depth 1 (a key, when a value follows)
  int section_ = -1;
  uint64_t counts_[kSectionCount] = {};
};

}  // namespace gsymprof::capture_source
