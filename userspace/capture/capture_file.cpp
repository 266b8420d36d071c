#include "userspace/capture/capture_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <tuple>

#include <nlohmann/json.hpp>

#include "gsym/file_io.h"
#include "gsym/hex.h"

namespace gsymprof {

using nlohmann::json;

namespace {

// A capture is five levels deep; anything deeper is not a capture. The SAX
// parser below never recurses, so this only bounds the container stack.
constexpr size_t kMaxNesting = 16;

// `lost` has a dozen reasons; each costs a map node (~80 bytes) for as little
// as 6 bytes of text, so their number is bounded to keep memory proportional.
constexpr size_t kMaxLostReasons = 1024;

// A value from the input, shown in an error message: JSON-quoted (so no
// control character can break the one-line message) and cut to 40 bytes.
std::string shown_value(std::string_view value) {
  std::string shown(value.substr(0, 40));
  std::string out = json(shown).dump(-1, ' ', false, json::error_handler_t::replace);
  return value.size() > 40 ? out + "..." : out;
}

std::string too_large(uint64_t size, uint64_t limit) {
  return "capture too large: " + std::to_string(size) + " bytes (limit " + std::to_string(limit) + ")";
}

// ---------------------------------------------------------------- reading --
//
// The document is streamed through nlohmann's SAX parser into the Capture,
// validated on the way, so memory is the Capture itself plus one read buffer
// (a DOM costs ~10x the text). A quick byte scan first counts each section's
// elements so that no vector grows by copying. Sections are built in document
// order: a section that refers to one not yet read (processes before
// modules, stacks before processes) is skipped and read by a further pass
// over the input, so any field order works, at the cost of re-reading (the
// writer's order needs one pass).

// Bytes for the parser: the whole text, or a buffer refilled from a file.
class Source {
 public:
  virtual ~Source() = default;
  const char* cur = nullptr;
  const char* lim = nullptr;
  // Makes [cur, lim) the next bytes; leaves it empty at the end of input.
  virtual void refill() = 0;
  virtual void rewind() = 0;
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

class FileSource final : public Source {
 public:
  FileSource(int fd, uint64_t max_bytes) : fd_(fd), max_bytes_(max_bytes), buffer_(new char[kBufferSize]) {
    rewind();
  }
  void refill() override {
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
  void rewind() override {
    offset_ = 0;
    refill();
  }
  bool failed() const { return read_errno_ != 0 || grew_too_large_; }
  // Why the input ended early, or "" if it did not.
  std::string error() const {
    if (read_errno_) return std::string("read failed: ") + std::strerror(read_errno_);
    if (grew_too_large_)
      return "capture too large: it grew past the limit of " + std::to_string(max_bytes_) +
             " bytes while being read";
    return "";
  }

 private:
  static constexpr size_t kBufferSize = 256 * 1024;
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

// Sections, which later ones refer to by index.
enum Section : uint8_t { kModulesSection, kProcessesSection, kStacksSection, kSectionCount };

// The fewest bytes an element of each section takes in valid JSON (a minimal
// module, process, stack), which bounds how many there can be.
constexpr uint64_t kMinElementBytes[kSectionCount] = {68, 32, 58};

// Counts the objects in each top-level section array in one quick pass over
// the bytes (strings and escapes tracked, nothing else), so that each
// section's vector is allocated once at its size: growing it by doubling
// would briefly hold both copies, up to twice the memory the capture needs.
// Only a hint: invalid JSON gives some count, capped by kMinElementBytes.
class SectionCounter {
 public:
  void feed(const char* p, const char* end) {
    for (; p != end; ++p) {
      const char c = *p;
      if (in_string_) {
        if (escaped_) escaped_ = false;
        else if (c == '\\') escaped_ = true;
        else if (c == '"') in_string_ = false;
        else if (depth_ == 1 && key_.size() < 16) key_ += c;
        continue;
      }
      switch (c) {
        case '"':
          in_string_ = true;
          if (depth_ == 1) key_.clear();
          break;
        case '{':
        case '[':
          if (depth_ == 1) section_ = c == '[' ? section_of(key_) : -1;
          else if (depth_ == 2 && c == '{' && section_ >= 0) ++counts_[section_];
          ++depth_;
          break;
        case '}':
        case ']':
          if (depth_ > 0) --depth_;
          break;
        default: break;
      }
    }
  }
  uint64_t count(Section section, uint64_t total_bytes) const {
    return std::min(counts_[section], total_bytes / kMinElementBytes[section] + 1);
  }

 private:
  static int section_of(const std::string& key) {
    return key == "modules" ? kModulesSection : key == "processes" ? kProcessesSection
                                              : key == "stacks"    ? kStacksSection
                                                                   : -1;
  }
  bool in_string_ = false, escaped_ = false;
  uint64_t depth_ = 0;
  std::string key_;  // the last string at depth 1 (a key, when a value follows)
  int section_ = -1;
  uint64_t counts_[kSectionCount] = {};
};

// What a JSON container or field is, for the SAX handler.
enum class Node : uint8_t {
  Root, Lost, Modules, Module, Mappings, Mapping, Processes, Process, ProcessModules,
  Stacks, Stack, Frames, Frame, Kernel, KernelSymbols, KernelSymbol, JitSymbols, JitSymbol,
  Skip,  // not interpreted (unknown field, section of another pass, after an error)
};

bool is_array(Node node) {
  return node == Node::Modules || node == Node::Mappings || node == Node::Processes ||
         node == Node::ProcessModules || node == Node::Stacks || node == Node::Frames ||
         node == Node::KernelSymbols || node == Node::JitSymbols;
}

enum Field : uint8_t {
  kNoField,
  kFormat, kVersion, kHost, kKernelRelease, kFrequencyHz, kStartTime, kDuration, kCallGraph,
  kSamples, kLost, kModules, kProcesses, kStacks,
  kPath, kBuildId, kLoadBias, kMappings, kError,
  kStart, kEnd, kFileOffset, kPerms,
  kPid, kComm, kCount, kTruncated, kFrames,
  kModule, kUnresolved, kAddress,
  kKernel, kSymbols, kName, kTid,  // version 2
  kJitSymbols, kJit,               // version 2, JIT frames
  kBuildIdKind,                    // version 3
  kElement,    // an array element
  kLostEntry,  // a value in `lost`
  kFieldCount
};
static_assert(kFieldCount <= 65, "seen bits are a uint64_t indexed by Field - 1");

constexpr const char* kFieldNames[kFieldCount] = {
    "", "format", "version", "host", "kernel_release", "frequency_hz", "start_time_unix_ns",
    "duration_ns", "call_graph", "samples", "lost", "modules", "processes", "stacks",
    "path", "build_id", "load_bias", "mappings", "error",
    "start", "end", "file_offset", "perms",
    "pid", "comm", "count", "truncated", "frames",
    "module", "unresolved", "address", "kernel", "symbols", "name", "tid", "jit_symbols", "jit",
    "build_id_kind", "", ""};

// Each object's fields, in the order missing ones are reported.
constexpr Field kRootFields[] = {kFormat, kVersion, kHost, kKernelRelease, kFrequencyHz,
                                 kStartTime, kDuration, kCallGraph, kSamples, kLost,
                                 kModules, kProcesses, kStacks, kKernel, kJitSymbols};
constexpr Field kModuleFields[] = {kPath, kBuildId, kBuildIdKind, kLoadBias, kError, kMappings};
constexpr Field kMappingFields[] = {kStart, kEnd, kFileOffset, kPerms};
constexpr Field kProcessFields[] = {kPid, kComm, kModules};
constexpr Field kStackFields[] = {kPid, kComm, kCount, kTruncated, kFrames, kTid};
constexpr Field kFrameFields[] = {kAddress, kModule, kUnresolved, kKernel, kJit};  // only address is required
constexpr Field kKernelFields[] = {kBuildId, kError, kSymbols};
constexpr Field kKernelSymbolFields[] = {kStart, kEnd, kName, kModule};
constexpr Field kJitSymbolFields[] = {kStart, kEnd, kName};
constexpr Field kSectionFields[] = {kModules, kProcesses, kStacks};   // by Section

std::span<const Field> fields_of(Node node) {
  switch (node) {
    case Node::Root: return kRootFields;
    case Node::Module: return kModuleFields;
    case Node::Mapping: return kMappingFields;
    case Node::Process: return kProcessFields;
    case Node::Stack: return kStackFields;
    case Node::Frame: return kFrameFields;
    case Node::Kernel: return kKernelFields;
    case Node::KernelSymbol: return kKernelSymbolFields;
    case Node::JitSymbol: return kJitSymbolFields;
    default: return {};
  }
}

// Fields a version-1 capture has not: never reported missing (a version-2
// writer writes them all).
bool is_optional(Node node, Field field) {
  // jit_symbols: also absent from version-2 captures of the first writers.
  // build_id_kind: absent (versions 1 and 2) means "gnu".
  return (node == Node::Root && (field == kKernel || field == kJitSymbols)) ||
         (node == Node::Stack && field == kTid) || (node == Node::Module && field == kBuildIdKind);
}

uint64_t bit(Field field) { return uint64_t{1} << (field - 1); }

// What a value must be, and for a container what it holds.
enum class Want : uint8_t { Skip, String, Unsigned, U32, Hex, Bool, Object, Array };
struct Slot {
  Node parent = Node::Skip;
  Field field = kNoField;
  Want want = Want::Skip;
  Node child = Node::Skip;
};

Slot slot_for(Node parent, Field field) {
  auto s = [&](Want want, Node child = Node::Skip) { return Slot{parent, field, want, child}; };
  switch (parent) {
    case Node::Root:
      switch (field) {
        case kFormat: case kHost: case kKernelRelease: case kCallGraph: return s(Want::String);
        case kVersion: case kStartTime: case kDuration: case kSamples: return s(Want::Unsigned);
        case kFrequencyHz: return s(Want::U32);
        case kLost: return s(Want::Object, Node::Lost);
        case kModules: return s(Want::Array, Node::Modules);
        case kProcesses: return s(Want::Array, Node::Processes);
        case kStacks: return s(Want::Array, Node::Stacks);
        case kKernel: return s(Want::Object, Node::Kernel);
        case kJitSymbols: return s(Want::Array, Node::JitSymbols);
        default: return {};
      }
    case Node::Kernel:
      switch (field) {
        case kBuildId: case kError: return s(Want::String);
        case kSymbols: return s(Want::Array, Node::KernelSymbols);
        default: return {};
      }
    case Node::KernelSymbols: return s(Want::Object, Node::KernelSymbol);
    case Node::KernelSymbol:
      switch (field) {
        case kStart: case kEnd: return s(Want::Hex);
        case kName: case kModule: return s(Want::String);
        default: return {};
      }
    case Node::JitSymbols: return s(Want::Object, Node::JitSymbol);
    case Node::JitSymbol:
      switch (field) {
        case kStart: case kEnd: return s(Want::Hex);
        case kName: return s(Want::String);
        default: return {};
      }
    case Node::Lost: return s(Want::Unsigned);
    case Node::Modules: return s(Want::Object, Node::Module);
    case Node::Module:
      switch (field) {
        case kPath: case kBuildId: case kBuildIdKind: case kError: return s(Want::String);
        case kLoadBias: return s(Want::Hex);
        case kMappings: return s(Want::Array, Node::Mappings);
        default: return {};
      }
    case Node::Mappings: return s(Want::Object, Node::Mapping);
    case Node::Mapping:
      if (field == kPerms) return s(Want::String);
      return field == kNoField ? Slot{} : s(Want::Hex);
    case Node::Processes: return s(Want::Object, Node::Process);
    case Node::Process:
      switch (field) {
        case kPid: return s(Want::U32);
        case kComm: return s(Want::String);
        case kModules: return s(Want::Array, Node::ProcessModules);
        default: return {};
      }
    case Node::ProcessModules: return s(Want::U32);
    case Node::Stacks: return s(Want::Object, Node::Stack);
    case Node::Stack:
      switch (field) {
        case kPid: case kTid: return s(Want::U32);
        case kCount: return s(Want::Unsigned);
        case kComm: return s(Want::String);
        case kTruncated: return s(Want::Bool);
        case kFrames: return s(Want::Array, Node::Frames);
        default: return {};
      }
    case Node::Frames: return s(Want::Object, Node::Frame);
    case Node::Frame:
      switch (field) {
        case kModule: return s(Want::U32);
        case kUnresolved: return s(Want::String);
        case kAddress: return s(Want::Hex);
        case kKernel: return s(Want::Bool);
        case kJit: return s(Want::U32);
        default: return {};
      }
    case Node::Skip: return {};
  }
  return {};
}

const char* wanted(Want want) {
  switch (want) {
    case Want::String: case Want::Hex: return "a string";
    case Want::Unsigned: case Want::U32: return "an unsigned integer";
    case Want::Bool: return "a boolean";
    case Want::Object: return "an object";
    case Want::Array: return "an array";
    case Want::Skip: break;
  }
  return "nothing";
}

bool parse_hex_u64(std::string_view text, uint64_t* out, bool* bad_digit) {
  *bad_digit = false;
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || text[1] != 'x') return false;
  uint64_t value = 0;
  for (size_t i = 2; i < text.size(); ++i) {
    char ch = text[i];
    const int digit = gsym::hex_digit_value(ch);
    if (digit < 0) {
      *bad_digit = true;
      return false;
    }
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  *out = value;
  return true;
}

bool is_hex_text(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return gsym::hex_digit_value(c) >= 0;
  });
}

// Which error is reported when there are several: the DOM reader checked the
// top-level fields in this order, each one whole, so the first one failing in
// this order is reported (within a section: the first in document order).
enum Rank : uint8_t {
  kRankFormat, kRankVersion, kRankHost, kRankKernelRelease, kRankFrequencyHz, kRankStartTime,
  kRankDuration, kRankCallGraph, kRankSamples, kRankCallGraphEmpty, kRankLost, kRankModules,
  kRankProcesses, kRankStacks, kRankCount
};

Rank rank_of(Field root_field) {
  switch (root_field) {
    case kFormat: return kRankFormat;
    case kVersion: return kRankVersion;
    case kHost: return kRankHost;
    case kKernelRelease: return kRankKernelRelease;
    case kFrequencyHz: return kRankFrequencyHz;
    case kStartTime: return kRankStartTime;
    case kDuration: return kRankDuration;
    case kCallGraph: return kRankCallGraph;
    case kSamples: return kRankSamples;
    case kLost: return kRankLost;
    case kModules: return kRankModules;
    case kProcesses: return kRankProcesses;
    default: return kRankStacks;
  }
}

Rank rank_of(Section section) {
  return section == kModulesSection ? kRankModules
         : section == kProcessesSection ? kRankProcesses
                                        : kRankStacks;
}

// The SAX handler (nlohmann's json_sax interface): builds the Capture while
// the parser reads, one pass at a time. Errors are kept by precedence, as the
// DOM reader reported them: JSON syntax, nesting, top level not an object,
// then by Rank. After an error no section is built any more, but the rest is
// still parsed (a syntax error or a header field later on may outrank it)
// and costs no memory.
class CaptureBuilder {
 public:
  explicit CaptureBuilder(const SectionCounter& counts, uint64_t total_bytes)
      : counts_(counts), total_bytes_(total_bytes) {
    levels_.reserve(kMaxNesting);
  }

  void begin_pass(int pass) {
    pass_ = pass;
    levels_.clear();
    progress_ = false;
  }
  // The error to report, or "" if none.
  std::string error() const {
    for (const std::string* e : {&syntax_error_, &nesting_error_, &root_error_})
      if (!e->empty()) return *e;
    return best_rank_ < kRankCount ? errors_[best_rank_] : "";
  }
  // Whether the JSON itself failed (no further pass can change the verdict).
  bool fatal() const { return !syntax_error_.empty() || !nesting_error_.empty() || !root_error_.empty(); }
  // Whether a section not read yet (it came before one it refers to) could
  // still hold an error that outranks the one found.
  bool outranked_section_pending() const {
    for (int s = 0; s < kSectionCount; ++s)
      if ((root_seen_ & bit(kSectionFields[s])) && !built_[s] && rank_of(Section(s)) < best_rank_)
        return true;
    return false;
  }
  bool complete() const {
    return std::all_of(std::begin(built_), std::end(built_), [](bool b) { return b; });
  }
  bool made_progress() const { return progress_; }
  // Checks that need the whole capture.
  std::string finish() {
    if (total_ != c_.samples)
      return "samples: " + std::to_string(c_.samples) + " does not equal the sum of stack counts (" +
             std::to_string(total_) + ")";
    // JIT frames against jit_symbols, wherever that came in the document.
    for (size_t s = 0; s < c_.stacks.size(); ++s)
      for (size_t f = 0; f < c_.stacks[s].frames.size(); ++f) {
        const CaptureFrame& frame = c_.stacks[s].frames[f];
        if (frame.jit < 0) continue;
        const std::string where = "stacks[" + std::to_string(s) + "].frames[" + std::to_string(f) + "].jit";
        if (static_cast<size_t>(frame.jit) >= c_.jit_symbols.size())
          return where + ": JIT symbol index " + std::to_string(frame.jit) + " out of range (" +
                 std::to_string(c_.jit_symbols.size()) + " JIT symbols)";
        // A return address may be the symbol's end (a call as its last instruction).
        const JitSymbol& symbol = c_.jit_symbols[static_cast<size_t>(frame.jit)];
        if (frame.address < symbol.start || frame.address > symbol.end)
          return where + ": the frame's address is outside JIT symbol " + std::to_string(frame.jit);
      }
    return "";
  }
  Capture take() { return std::move(c_); }

  // ---- json_sax interface ----
  bool null() { return scalar_mismatch(next_slot(), "null"); }
  bool boolean(bool value) {
    Slot slot = next_slot();
    if (slot.want != Want::Bool) return scalar_mismatch(slot, "a boolean");
    if (slot.parent == Node::Frame) {
      if (!value) return fail(value_path(), "must be true when present");
      frames_.back().kernel = true;
    } else {
      c_.stacks.back().truncated = value;
    }
    return true;
  }
  bool number_integer(json::number_integer_t) {
    // nlohmann gives non-negative integers to number_unsigned.
    Slot slot = next_slot();
    if (slot.want == Want::Unsigned || slot.want == Want::U32)
      return fail(value_path(), "expected an unsigned integer, got a negative one");
    return scalar_mismatch(slot, "an integer");
  }
  bool number_unsigned(json::number_unsigned_t value) {
    Slot slot = next_slot();
    if (slot.want != Want::Unsigned && slot.want != Want::U32) return scalar_mismatch(slot, "an integer");
    if (slot.want == Want::U32 && value > std::numeric_limits<uint32_t>::max())
      return fail(value_path(), "value " + std::to_string(value) + " does not fit in 32 bits");
    return store_unsigned(slot, value);
  }
  bool number_float(json::number_float_t, const std::string&) {
    return scalar_mismatch(next_slot(), "a non-integer number");
  }
  bool string(std::string& value) {
    Slot slot = next_slot();
    if (slot.want == Want::Hex) {
      uint64_t number = 0;
      bool bad_digit = false;
      if (!parse_hex_u64(value, &number, &bad_digit))
        return fail(value_path(),
                    bad_digit ? "invalid hex digit in " + shown_value(value)
                              : "expected a hex string \"0x...\" of at most 16 digits");
      return store_hex(slot, number);
    }
    if (slot.want != Want::String) return scalar_mismatch(slot, "a string");
    return store_string(slot, value);
  }
  bool binary(json::binary_t&) { return scalar_mismatch(next_slot(), "an unsupported value"); }
  bool start_object(std::size_t) { return start_container(Want::Object, "an object"); }
  bool start_array(std::size_t) { return start_container(Want::Array, "an array"); }
  bool key(std::string& name);
  bool end_object() { return end_container(); }
  bool end_array() { return end_container(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    auto pos = what.find("] ");
    syntax_error_ = "not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2));
    return false;
  }

 private:
  struct Level {
    Node node;
    Field field = kNoField;  // objects: the field whose value comes next
    uint64_t seen = 0;       // objects: fields seen, bit(field)
    uint64_t count = 0;      // arrays: elements begun
  };

  Capture c_;
  const SectionCounter& counts_;
  uint64_t total_bytes_;
  std::vector<Level> levels_;
  int pass_ = 1;
  bool progress_ = false;  // this pass read a section or found an error
  uint64_t root_seen_ = 0;  // top-level fields present (pass 1)
  std::string syntax_error_, nesting_error_, root_error_;
  std::string errors_[kRankCount];  // the first of each rank
  Rank best_rank_ = kRankCount;     // the lowest rank with an error
  std::string lost_error_key_;      // whose entry errors_[kRankLost] is about
  bool built_[kSectionCount] = {};
  uint64_t total_ = 0;                                  // sum of stack counts
  std::vector<std::pair<uint32_t, uint32_t>> pid_index_;  // (pid, process index), sorted
  std::string lost_key_;                                // the `lost` entry being read
  // The stack being read: its process (once its pid is read), whether its
  // frames still need checking against that process, its frames so far (a
  // reused buffer, so each stack's vector is allocated once at its size).
  const CaptureProcess* stack_process_ = nullptr;
  bool frames_unchecked_ = false;
  BuildId::Kind module_kind_ = BuildId::Kind::Gnu;  // the open module's build_id_kind
  std::vector<CaptureFrame> frames_;

  // ---- paths for error messages, built only on error ----
  std::string path_of(size_t depth) const {
    std::string path;
    for (size_t i = 0; i < depth; ++i) {
      const Level& level = levels_[i];
      if (is_array(level.node)) {
        path += "[" + std::to_string(level.count - 1) + "]";
      } else if (level.node == Node::Lost) {
        path += "." + shown_value(lost_key_);
      } else {
        if (!path.empty()) path += ".";
        path += kFieldNames[level.field];
      }
    }
    return path;
  }
  std::string value_path() const { return path_of(levels_.size()); }
  std::string container_path() const { return path_of(levels_.size() - 1); }
  static std::string join(const std::string& where, Field field) {
    return where.empty() ? kFieldNames[field] : where + "." + kFieldNames[field];
  }

  // Records an error (the first of its rank); always returns true so that
  // parsing goes on for errors of higher precedence.
  bool fail(Rank rank, const std::string& where, const std::string& what) {
    std::string& error = errors_[rank];
    if (rank == kRankLost) {
      // The DOM reader went through `lost` in key order.
      const std::string key = levels_.size() >= 2 && levels_[1].node == Node::Lost ? lost_key_ : "";
      if (!error.empty() && key >= lost_error_key_) return true;
      lost_error_key_ = key;
      error.clear();
    }
    if (error.empty()) error = where + ": " + what;
    best_rank_ = std::min(best_rank_, rank);
    progress_ = true;
    return true;
  }
  // An error in the top-level field being read.
  bool fail(const std::string& where, const std::string& what) {
    return fail(levels_.empty() ? kRankStacks : rank_of(levels_[0].field), where, what);
  }
  // After an error only what may outrank it is still read (and the rest of
  // `lost`, whose errors rank by key).
  bool still_read(Node parent, Field field) const {
    if (levels_.empty()) return false;
    Rank rank = rank_of(parent == Node::Root ? field : levels_[0].field);
    return rank < best_rank_ || (rank == kRankLost && best_rank_ == kRankLost);
  }

  bool scalar_mismatch(const Slot& slot, const char* got) {
    if (slot.want == Want::Skip) return true;
    if (slot.parent == Node::Skip && slot.child == Node::Root) {  // the top-level value
      if (root_error_.empty()) root_error_ = "capture: expected a JSON object at top level";
      return true;
    }
    return fail(value_path(), std::string("expected ") + wanted(slot.want) + ", got " + got);
  }

  // The slot of the value that starts now (counts array elements).
  Slot next_slot() {
    if (levels_.empty()) return Slot{Node::Skip, kNoField, Want::Object, Node::Root};
    Level& top = levels_.back();
    if (top.node == Node::Skip) return {};
    Field field = top.field;
    if (is_array(top.node)) {
      ++top.count;
      field = kElement;
    } else if (top.node == Node::Lost) {
      field = kLostEntry;
    }
    if (!still_read(top.node, field)) return {};
    return slot_for(top.node, field);
  }

  bool start_container(Want kind, const char* got) {
    if (levels_.size() >= kMaxNesting) {
      nesting_error_ = "not a capture: JSON nested deeper than " + std::to_string(kMaxNesting) + " levels";
      return false;  // stops the parser: nothing outranks this but syntax
    }
    Slot slot = next_slot();
    if (slot.want != kind) {
      scalar_mismatch(slot, got);
      levels_.push_back({Node::Skip});
      return true;
    }
    begin(slot.child);
    levels_.push_back({slot.child});
    return true;
  }

  // Sets up the element a container starts.
  void begin(Node node) {
    switch (node) {
      case Node::Modules: c_.modules.reserve(counts_.count(kModulesSection, total_bytes_)); break;
      case Node::Processes: c_.processes.reserve(counts_.count(kProcessesSection, total_bytes_)); break;
      case Node::Stacks: c_.stacks.reserve(counts_.count(kStacksSection, total_bytes_)); break;
      case Node::Module:
        c_.modules.emplace_back();
        module_kind_ = BuildId::Kind::Gnu;
        break;
      case Node::Mapping: c_.modules.back().mappings.emplace_back(); break;
      case Node::Process: c_.processes.emplace_back(); break;
      case Node::Stack:
        c_.stacks.emplace_back();
        stack_process_ = nullptr;
        frames_unchecked_ = false;
        break;
      case Node::Frames:
        frames_.clear();
        // Without the stack's pid its frames are checked at the stack's end.
        if (!stack_process_) frames_unchecked_ = true;
        break;
      case Node::Frame: frames_.emplace_back(); break;
      case Node::KernelSymbol: c_.kernel.symbols.emplace_back(); break;
      case Node::JitSymbol: c_.jit_symbols.emplace_back(); break;
      default: break;
    }
  }

  bool end_container() {
    Level level = levels_.back();
    if (level.node == Node::Root ||
        (level.node != Node::Skip && still_read(levels_[0].node, levels_[0].field)))
      end(level);
    levels_.pop_back();
    return true;
  }

  void end(const Level& level);
  bool missing_fields(const Level& level);
  bool store_string(const Slot& slot, std::string& value);
  bool store_unsigned(const Slot& slot, uint64_t value);
  bool store_hex(const Slot& slot, uint64_t value);
  bool check_frame_module(uint32_t index, const std::string& where);
  void add_process_module(std::vector<uint32_t>& modules, uint32_t index);
  void index_processes();

  // Whether a section's value is read in this pass; false defers it to the
  // next pass (it refers to a section not read yet) or skips it (read before).
  bool read_section(Section section) {
    if (built_[section]) return false;
    return section == kModulesSection ||
           (built_[kModulesSection] && (section == kProcessesSection || built_[kProcessesSection]));
  }
};

bool CaptureBuilder::key(std::string& name) {
  if (levels_.empty()) return true;
  Level& top = levels_.back();
  top.field = kNoField;
  if (top.node == Node::Skip) return true;
  if (top.node == Node::Lost) {
    lost_key_ = std::move(name);
    if (lost_key_.empty()) return fail("lost", "empty reason name");
    if (c_.lost.count(lost_key_)) return fail(value_path(), "duplicate field");
    if (c_.lost.size() >= kMaxLostReasons)
      return fail("lost", "more than " + std::to_string(kMaxLostReasons) + " reasons");
    return true;
  }
  Field field = kNoField;
  for (Field f : fields_of(top.node))
    if (name == kFieldNames[f]) field = f;
  if (field == kNoField) return true;  // unknown fields are ignored
  const bool is_section =
      top.node == Node::Root && (field == kModules || field == kProcesses || field == kStacks);
  const Section section = field == kModules ? kModulesSection
                          : field == kProcesses ? kProcessesSection
                                                : kStacksSection;
  if (top.node == Node::Root && pass_ > 1) {
    // Later passes read only what earlier ones deferred.
    if (is_section && still_read(Node::Root, field) && read_section(section)) top.field = field;
    return true;
  }
  // Top-level fields are noted even when skipped, so that none is reported
  // missing.
  if (top.node != Node::Root && !still_read(top.node, field)) return true;
  if (top.seen & bit(field)) {
    // Rejected rather than "last one wins": a reader that streams cannot
    // take back what the first one built.
    top.field = field;
    return fail(value_path(), "duplicate field");
  }
  top.seen |= bit(field);
  if (!still_read(top.node, field) || (is_section && !read_section(section))) return true;
  top.field = field;
  return true;
}

bool CaptureBuilder::missing_fields(const Level& level) {
  for (Field f : fields_of(level.node)) {
    if (level.node == Node::Frame && f != kAddress) break;
    if (!(level.seen & bit(f)) && !is_optional(level.node, f)) {
      fail(join(container_path(), f), "missing field");
      return true;
    }
  }
  return false;
}

void CaptureBuilder::end(const Level& level) {
  switch (level.node) {
    case Node::Root:
      if (pass_ > 1) return;
      root_seen_ = level.seen;
      for (Field f : kRootFields)
        if (!(level.seen & bit(f)) && !is_optional(Node::Root, f))
          fail(rank_of(f), kFieldNames[f], "missing field");
      return;
    case Node::Module: {
      if (missing_fields(level)) return;
      CaptureModule& m = c_.modules.back();
      m.build_id = BuildId(m.build_id.bytes(), module_kind_);
      return;
    }
    case Node::Mapping: {
      if (missing_fields(level)) return;
      const ModuleMapping& m = c_.modules.back().mappings.back();
      if (m.start >= m.end) fail(container_path(), "start is not below end");
      return;
    }
    case Node::Process: missing_fields(level); return;
    case Node::ProcessModules: {
      std::vector<uint32_t>& modules = c_.processes.back().modules;
      std::sort(modules.begin(), modules.end());
      modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
      modules.shrink_to_fit();
      return;
    }
    case Node::Frame: {
      if (missing_fields(level)) return;
      const int kinds = ((level.seen & bit(kModule)) != 0) + ((level.seen & bit(kUnresolved)) != 0) +
                        ((level.seen & bit(kKernel)) != 0);
      if (kinds != 1) {
        fail(container_path(),
             "a frame needs exactly one of \"module\", \"unresolved\" and \"kernel\"");
        return;
      }
      if ((level.seen & bit(kJit)) && frames_.back().reason != UnresolvedReason::AnonymousMapping)
        fail(join(container_path(), kJit), "only a frame with \"unresolved\": \"anonymous-mapping\" is JIT code");
      return;
    }
    case Node::JitSymbol: {
      if (missing_fields(level)) return;
      const JitSymbol& j = c_.jit_symbols.back();
      if (j.start >= j.end) fail(container_path(), "start is not below end");
      return;
    }
    case Node::JitSymbols: {
      // Canonical: sorted by (start, end, name), each once.
      const std::vector<JitSymbol>& symbols = c_.jit_symbols;
      for (size_t i = 1; i < symbols.size(); ++i)
        if (!(symbols[i - 1] < symbols[i])) {
          fail(container_path() + "[" + std::to_string(i) + "]",
               "not after the symbol before it (sorted by start, end, name; no repeats)");
          return;
        }
      return;
    }
    case Node::Kernel: missing_fields(level); return;
    case Node::KernelSymbol: {
      if (missing_fields(level)) return;
      const KernelSymbol& k = c_.kernel.symbols.back();
      if (k.start >= k.end) fail(container_path(), "start is not below end");
      return;
    }
    case Node::KernelSymbols: {
      // Sorted and disjoint, so a lookup finds the one symbol holding an
      // address (the writer writes them so).
      const std::vector<KernelSymbol>& symbols = c_.kernel.symbols;
      for (size_t i = 1; i < symbols.size(); ++i)
        if (symbols[i].start < symbols[i - 1].end) {
          fail(container_path() + "[" + std::to_string(i) + "]",
               "overlaps or precedes the symbol before it");
          return;
        }
      return;
    }
    case Node::Frames: c_.stacks.back().frames.assign(frames_.begin(), frames_.end()); return;
    case Node::Stack: {
      if (missing_fields(level)) return;
      if (frames_unchecked_) {
        const std::vector<CaptureFrame>& frames = c_.stacks.back().frames;
        const std::string where = container_path();
        for (size_t j = 0; j < frames.size(); ++j)
          if (frames[j].module >= 0 &&
              !check_frame_module(static_cast<uint32_t>(frames[j].module),
                                  where + ".frames[" + std::to_string(j) + "].module"))
            return;
      }
      return;
    }
    case Node::Modules:
      if (c_.modules.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail("modules", "too many modules");
        return;
      }
      built_[kModulesSection] = progress_ = true;
      return;
    case Node::Processes:
      index_processes();
      if (still_read(Node::Root, kProcesses)) built_[kProcessesSection] = progress_ = true;
      return;
    case Node::Stacks: built_[kStacksSection] = progress_ = true; return;
    default: return;
  }
}

// Sorted (pid, index) for the stacks' lookups; a duplicate pid is reported
// at its second occurrence, the first such in document order.
void CaptureBuilder::index_processes() {
  pid_index_.clear();
  pid_index_.reserve(c_.processes.size());
  for (size_t i = 0; i < c_.processes.size(); ++i)
    pid_index_.emplace_back(c_.processes[i].pid, static_cast<uint32_t>(i));
  std::sort(pid_index_.begin(), pid_index_.end());
  std::optional<uint32_t> duplicate;
  for (size_t i = 1; i < pid_index_.size(); ++i)
    if (pid_index_[i].first == pid_index_[i - 1].first && (!duplicate || pid_index_[i].second < *duplicate))
      duplicate = pid_index_[i].second;
  if (duplicate)
    fail(container_path() + "[" + std::to_string(*duplicate) + "].pid",
         "duplicate process " + std::to_string(c_.processes[*duplicate].pid));
}

bool CaptureBuilder::check_frame_module(uint32_t index, const std::string& where) {
  if (!stack_process_ ||
      std::binary_search(stack_process_->modules.begin(), stack_process_->modules.end(), index))
    return true;
  fail(where, "module " + std::to_string(index) + " is not a module of the stack's process");
  return false;
}

// Process module lists are sets (kept sorted and unique); duplicates are
// dropped as they come so that "[0,0,0,...]" cannot take 4 bytes per 2 of text.
void CaptureBuilder::add_process_module(std::vector<uint32_t>& modules, uint32_t index) {
  if (modules.size() == modules.capacity() && modules.size() >= 256) {
    std::sort(modules.begin(), modules.end());
    modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
    // Room for at least as many again before the next sort.
    if (modules.size() > modules.capacity() / 2) modules.reserve(modules.capacity() * 2);
  }
  modules.push_back(index);
}

bool CaptureBuilder::store_string(const Slot& slot, std::string& value) {
  switch (slot.parent) {
    case Node::Root:
      switch (slot.field) {
        case kFormat:
          if (value != kCaptureFormatName)
            return fail("format", "not a gsymprof capture (format is " + shown_value(value) + ")");
          return true;
        case kHost: c_.host = std::move(value); return true;
        case kKernelRelease: c_.kernel_release = std::move(value); return true;
        case kCallGraph:
          // Checked after `samples` by the DOM reader.
          if (value.empty()) return fail(kRankCallGraphEmpty, "call_graph", "must not be empty");
          c_.call_graph = std::move(value);
          return true;
        default: return true;
      }
    case Node::Module: {
      CaptureModule& m = c_.modules.back();
      switch (slot.field) {
        case kPath: m.path = std::move(value); return true;
        case kError: m.error = std::move(value); return true;
        case kBuildId: {
          // Checked before decoding, so a huge string is never decoded.
          if (value.size() % 2 != 0 || !is_hex_text(value))
            return fail(value_path(), "not an even-length hex string");
          if (value.size() > 2 * kMaxModuleIdBytes)
            return fail(value_path(), "longer than " + std::to_string(kMaxModuleIdBytes) + " bytes");
          m.build_id = *BuildId::from_hex(value);
          return true;
        }
        case kBuildIdKind:
          if (!parse_kind_name(value, &module_kind_))
            return fail(value_path(), "unknown build ID kind " + shown_value(value) +
                                          " (known: gnu, go, sha256)");
          return true;
        default: return true;
      }
    }
    case Node::Mapping: c_.modules.back().mappings.back().perms = std::move(value); return true;
    case Node::Process: c_.processes.back().comm = std::move(value); return true;
    case Node::Kernel:
      if (slot.field == kError) {
        c_.kernel.error = std::move(value);
        return true;
      }
      if (value.size() % 2 != 0 || !is_hex_text(value))
        return fail(value_path(), "not an even-length hex string");
      if (value.size() > 128) return fail(value_path(), "longer than 64 bytes");
      c_.kernel.build_id = *BuildId::from_hex(value);
      return true;
    case Node::KernelSymbol:
      (slot.field == kName ? c_.kernel.symbols.back().name : c_.kernel.symbols.back().module) =
          std::move(value);
      return true;
    case Node::JitSymbol: c_.jit_symbols.back().name = std::move(value); return true;
    case Node::Stack: c_.stacks.back().comm = std::move(value); return true;
    case Node::Frame: {
      CaptureFrame& frame = frames_.back();
      if (!parse_unresolved_reason(value, &frame.reason) || frame.reason == UnresolvedReason::None) {
        frame.reason = UnresolvedReason::None;
        return fail(value_path(), "unknown reason " + shown_value(value));
      }
      return true;
    }
    default: return true;
  }
}

bool CaptureBuilder::store_unsigned(const Slot& slot, uint64_t value) {
  switch (slot.parent) {
    case Node::Root:
      switch (slot.field) {
        case kVersion:
          if (value < static_cast<uint64_t>(kOldestCaptureFormatVersion) ||
              value > static_cast<uint64_t>(kCaptureFormatVersion))
            return fail("version", "unsupported capture version " + std::to_string(value) +
                                       " (this gsymprof reads versions " +
                                       std::to_string(kOldestCaptureFormatVersion) + " to " +
                                       std::to_string(kCaptureFormatVersion) + ")");
          return true;
        case kFrequencyHz: c_.frequency_hz = static_cast<uint32_t>(value); return true;
        case kStartTime: c_.start_time_unix_ns = value; return true;
        case kDuration: c_.duration_ns = value; return true;
        case kSamples: c_.samples = value; return true;
        default: return true;
      }
    case Node::Lost: c_.lost.emplace(std::move(lost_key_), value); return true;
    case Node::Process: c_.processes.back().pid = static_cast<uint32_t>(value); return true;
    case Node::ProcessModules:
      if (value >= c_.modules.size())
        return fail(value_path(), "module index " + std::to_string(value) + " out of range (" +
                                      std::to_string(c_.modules.size()) + " modules)");
      add_process_module(c_.processes.back().modules, static_cast<uint32_t>(value));
      return true;
    case Node::Stack: {
      CaptureStack& stack = c_.stacks.back();
      if (slot.field == kCount) {
        if (value == 0) return fail(value_path(), "must be at least 1");
        if (total_ > std::numeric_limits<uint64_t>::max() - value)
          return fail(value_path(), "sample counts overflow 64 bits");
        total_ += value;
        stack.count = value;
        return true;
      }
      if (slot.field == kTid) {
        stack.tid = static_cast<uint32_t>(value);
        return true;
      }
      stack.pid = static_cast<uint32_t>(value);
      auto it = std::lower_bound(pid_index_.begin(), pid_index_.end(), std::make_pair(stack.pid, uint32_t{0}));
      if (it == pid_index_.end() || it->first != stack.pid)
        return fail(value_path(), "process " + std::to_string(stack.pid) + " is not in \"processes\"");
      stack_process_ = &c_.processes[it->second];
      return true;
    }
    case Node::Frame: {
      if (slot.field == kJit) {
        // Its range is checked once the whole capture is read (finish()).
        frames_.back().jit = static_cast<int32_t>(std::min<uint64_t>(value, INT32_MAX));
        return true;
      }
      if (value >= c_.modules.size())
        return fail(value_path(), "module index " + std::to_string(value) + " out of range (" +
                                      std::to_string(c_.modules.size()) + " modules)");
      if (!frames_unchecked_ && !check_frame_module(static_cast<uint32_t>(value), value_path()))
        return true;
      frames_.back().module = static_cast<int32_t>(value);
      return true;
    }
    default: return true;
  }
}

bool CaptureBuilder::store_hex(const Slot& slot, uint64_t value) {
  if (slot.parent == Node::Module) {
    c_.modules.back().load_bias = value;
  } else if (slot.parent == Node::Mapping) {
    ModuleMapping& m = c_.modules.back().mappings.back();
    (slot.field == kStart ? m.start : slot.field == kEnd ? m.end : m.file_offset) = value;
  } else if (slot.parent == Node::Frame) {
    frames_.back().address = value;
  } else if (slot.parent == Node::KernelSymbol) {
    KernelSymbol& k = c_.kernel.symbols.back();
    (slot.field == kStart ? k.start : k.end) = value;
  } else if (slot.parent == Node::JitSymbol) {
    JitSymbol& j = c_.jit_symbols.back();
    (slot.field == kStart ? j.start : j.end) = value;
  }
  return true;
}

// Runs passes over `source` until every section is read or an error is found.
// `source_error` says why the input ended early ("" = it did not).
template <class SourceError>
gsym::Expected<Capture> parse_capture(Source& source, SourceError&& source_error) {
  SectionCounter counts;
  uint64_t total_bytes = 0;
  for (; source.cur != source.lim; source.refill()) {
    counts.feed(source.cur, source.lim);
    total_bytes += static_cast<uint64_t>(source.lim - source.cur);
    source.cur = source.lim;
  }
  if (std::string e = source_error(); !e.empty()) return gsym::Error(e);
  source.rewind();
  CaptureBuilder builder(counts, total_bytes);
  for (int pass = 1;; ++pass) {
    if (pass > 1) source.rewind();
    builder.begin_pass(pass);
    json::sax_parse(SourceIterator(&source), SourceIterator(), &builder);
    if (std::string e = source_error(); !e.empty()) return gsym::Error(e);
    std::string e = builder.error();
    if (builder.fatal() || (!e.empty() && !builder.outranked_section_pending())) return gsym::Error(e);
    if (e.empty() && builder.complete()) break;
    // Each pass reads one more section or finds an error, so this only
    // guards against a file that changed between passes.
    if (!builder.made_progress())
      return gsym::Error(e.empty() ? "capture: sections refer to each other" : e);
  }
  if (std::string e = builder.finish(); !e.empty()) return gsym::Error(e);
  return builder.take();
}

// ---------------------------------------------------------------- writing --

// Appends `text` as a JSON string exactly as nlohmann's dump writes it (bytes
// that are not UTF-8 become U+FFFD); plain ASCII, nearly everything, is
// copied directly.
void put_string(std::string& out, std::string_view text) {
  bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    out += '"';
    out += text;
    out += '"';
  } else {
    out += json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

void put_u64(std::string& out, uint64_t value) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  (void)ec;
  out.append(buffer, end);
}

void put_hex(std::string& out, uint64_t value) {
  char buffer[24];
  buffer[0] = '0';
  buffer[1] = 'x';
  auto [end, ec] = std::to_chars(buffer + 2, buffer + sizeof buffer, value, 16);
  (void)ec;
  out.append(buffer, end);
}

}  // namespace

namespace {

// Writers of capture_to_json's lines, byte for byte as nlohmann's compact
// dump of each value.

void put_key(std::string& out, const char* name) {
  out += '"';
  out += name;
  out += "\": ";
}

// A header line: "NAME": VALUE,
void put_string_line(std::string& out, const char* name, std::string_view text) {
  put_key(out, name);
  put_string(out, text);
  out += ",\n";
}
void put_number_line(std::string& out, const char* name, uint64_t value) {
  put_key(out, name);
  put_u64(out, value);
  out += ",\n";
}

void put_header(std::string& out, const Capture& c) {
  put_string_line(out, "format", kCaptureFormatName);
  put_number_line(out, "version", kCaptureFormatVersion);
  put_string_line(out, "host", c.host);
  put_string_line(out, "kernel_release", c.kernel_release);
  put_number_line(out, "frequency_hz", c.frequency_hz);
  put_number_line(out, "start_time_unix_ns", c.start_time_unix_ns);
  put_number_line(out, "duration_ns", c.duration_ns);
  put_string_line(out, "call_graph", c.call_graph);
  put_number_line(out, "samples", c.samples);
  put_key(out, "lost");
  out += '{';
  bool first = true;
  for (const auto& [reason, count] : c.lost) {  // std::map: sorted
    if (!first) out += ',';
    first = false;
    put_string(out, reason);
    out += ':';
    put_u64(out, count);
  }
  out += "},\n";
}

void put_module(std::string& out, const CaptureModule& m) {
  out += "{\"path\":";
  put_string(out, m.path);
  out += ",\"build_id\":";
  put_string(out, m.build_id.hex());
  out += ",\"build_id_kind\":";
  put_string(out, kind_name(m.build_id.kind()));
  out += ",\"load_bias\":\"";
  put_hex(out, m.load_bias);
  out += "\",\"mappings\":[";
  for (size_t j = 0; j < m.mappings.size(); ++j) {
    const ModuleMapping& map = m.mappings[j];
    out += j ? ",{\"start\":\"" : "{\"start\":\"";
    put_hex(out, map.start);
    out += "\",\"end\":\"";
    put_hex(out, map.end);
    out += "\",\"file_offset\":\"";
    put_hex(out, map.file_offset);
    out += "\",\"perms\":";
    put_string(out, map.perms);
    out += '}';
  }
  out += "],\"error\":";
  put_string(out, m.error);
  out += '}';
}

// The fields a process and a stack start with: {"pid":N,"comm":"..."
void put_pid_and_comm(std::string& out, uint32_t pid, std::string_view comm) {
  out += "{\"pid\":";
  put_u64(out, pid);
  out += ",\"comm\":";
  put_string(out, comm);
}

void put_process(std::string& out, const CaptureProcess& p) {
  put_pid_and_comm(out, p.pid, p.comm);
  out += ",\"modules\":[";
  for (size_t j = 0; j < p.modules.size(); ++j) {
    if (j) out += ',';
    put_u64(out, p.modules[j]);
  }
  out += "]}";
}

void put_stack(std::string& out, const CaptureStack& s) {
  out += "{\"pid\":";
  put_u64(out, s.pid);
  out += ",\"tid\":";
  put_u64(out, s.tid);
  out += ",\"comm\":";
  put_string(out, s.comm);
  out += ",\"count\":";
  put_u64(out, s.count);
  out += s.truncated ? ",\"truncated\":true,\"frames\":[" : ",\"truncated\":false,\"frames\":[";
  for (size_t j = 0; j < s.frames.size(); ++j) {
    const CaptureFrame& f = s.frames[j];
    if (j) out += ',';
    if (f.kernel) {
      out += "{\"kernel\":true";
    } else if (f.module >= 0) {
      out += "{\"module\":";
      put_u64(out, static_cast<uint64_t>(f.module));
    } else {
      out += "{\"unresolved\":";
      put_string(out, unresolved_reason_name(f.reason));
    }
    out += ",\"address\":\"";
    put_hex(out, f.address);
    out += '"';
    if (f.jit >= 0) {
      out += ",\"jit\":";
      put_u64(out, static_cast<uint64_t>(f.jit));
    }
    out += '}';
  }
  out += "]}";
}

// "NAME": [\n  ITEM,\n  ITEM\n] and a comma unless `last`.
template <typename Item>
void put_list(std::string& out, const char* name, const std::vector<Item>& items, bool last,
              void (*put_item)(std::string&, const Item&)) {
  put_key(out, name);
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    put_item(out, items[i]);
  }
  out += items.empty() ? "]" : "\n]";
  out += last ? "\n" : ",\n";
}

// The fields a JIT and a kernel symbol start with: {"start":..,"end":..,"name":..
void put_symbol_range(std::string& out, uint64_t start, uint64_t end, std::string_view name) {
  out += "{\"start\":\"";
  put_hex(out, start);
  out += "\",\"end\":\"";
  put_hex(out, end);
  out += "\",\"name\":";
  put_string(out, name);
}

void put_jit_symbol(std::string& out, const JitSymbol& j) {
  put_symbol_range(out, j.start, j.end, j.name);
  out += '}';
}

void put_kernel_symbol(std::string& out, const KernelSymbol& k) {
  put_symbol_range(out, k.start, k.end, k.name);
  out += ",\"module\":";
  put_string(out, k.module);
  out += '}';
}

// "kernel": {"build_id":"...","error":"...","symbols":[\n  SYMBOL,\n  SYMBOL\n]},
void put_kernel(std::string& out, const CaptureKernel& kernel) {
  put_key(out, "kernel");
  out += "{\"build_id\":";
  put_string(out, kernel.build_id.hex());
  out += ",\"error\":";
  put_string(out, kernel.error);
  out += ",\"symbols\":[";
  for (size_t i = 0; i < kernel.symbols.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    put_kernel_symbol(out, kernel.symbols[i]);
  }
  out += kernel.symbols.empty() ? "]},\n" : "\n]},\n";
}

}  // namespace

std::string capture_to_json(const Capture& input) {
  Capture c = input;
  canonicalize(c);
  // Header fields one per line, then one module / process / stack per line:
  // readable, diffable, and far smaller than fully indented JSON. Written
  // straight into the text (no JSON tree of the whole capture), in the
  // documented field order, byte for byte as nlohmann's compact dump.
  std::string out = "{\n";
  put_header(out, c);
  put_kernel(out, c.kernel);
  put_list(out, "jit_symbols", c.jit_symbols, false, put_jit_symbol);
  put_list(out, "modules", c.modules, false, put_module);
  put_list(out, "processes", c.processes, false, put_process);
  put_list(out, "stacks", c.stacks, true, put_stack);
  out += "}\n";
  return out;
}

gsym::Expected<Capture> capture_from_json(std::string_view text, uint64_t max_bytes) {
  if (text.size() > max_bytes) return gsym::Error(too_large(text.size(), max_bytes));
  TextSource source(text);
  return parse_capture(source, [] { return std::string(); });
}

gsym::Status write_capture_file(const Capture& capture, const std::string& path) {
  return gsym::write_file_atomically(path, capture_to_json(capture));
}

gsym::Expected<Capture> read_capture_file(const std::string& path, uint64_t max_bytes) {
  // Opened without blocking (a FIFO planted at the path cannot hang us) and
  // refused unless a regular file; then streamed, never held whole.
  auto file = gsym::open_regular_file(path);
  if (!file) return file.error();
  const uint64_t size = static_cast<uint64_t>(file->status.st_size);
  if (size > max_bytes) return gsym::Error(path + ": " + too_large(size, max_bytes));
  FileSource source(file->fd.get(), max_bytes);
  auto capture = parse_capture(source, [&] { return source.error(); });
  if (!capture) return gsym::Error(path + ": " + capture.error().message);
  return capture;
}

}  // namespace gsymprof
