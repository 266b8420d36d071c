// The capture reader: capture_from_json and read_capture_file.
//
// The document is streamed through nlohmann's SAX parser into the Capture,
// validated on the way, so memory is the Capture itself plus one read buffer
// (a DOM costs ~10x the text). A quick byte scan first counts each section's
// elements so that no vector grows by copying (capture_source.h). Sections
// are built in document order: a section that refers to one not yet read
// (processes before modules, stacks before processes) is skipped and read by
// a further pass over the input, so any field order works, at the cost of
// re-reading (the writer's order needs one pass).
//
// The first error stops the reader, so the one reported is the first in
// document order. An error is found where the reader can tell: a value's at
// the value; one about a whole object (a missing field, start not below end,
// a frame's kinds) at the object's end; a check that needs something later
// in the document (a frame's module before its stack's pid, a JIT frame
// before jit_symbols, a Python frame before python_frames) where that is
// read, and at the end for what the whole capture decides (samples against
// the stack counts). A section deferred to a later pass is checked after
// the rest of the document.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gsym/base/file_io.h"
#include "gsym/base/hex.h"
#include "userspace/capture/capture_file.h"
#include "userspace/capture/capture_schema.h"
#include "userspace/capture/capture_source.h"

namespace gsymprof {
namespace {

using namespace capture_schema;
using namespace capture_source;
using nlohmann::json;

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

bool parse_hex_u64(std::string_view text, uint64_t* out, bool* bad_digit) {
  *bad_digit = false;
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || text[1] != 'x') return false;
  uint64_t value = 0;
  for (size_t i = 2; i < text.size(); ++i) {
    const int digit = gsym::hex_digit_value(text[i]);
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
  return std::all_of(text.begin(), text.end(), [](char c) { return gsym::hex_digit_value(c) >= 0; });
}

uint64_t bit(Field field) { return uint64_t{1} << (field - 1); }

std::optional<Section> section_of(Field root_field) {
  switch (root_field) {
    case kModules: return kModulesSection;
    case kProcesses: return kProcessesSection;
    case kStacks: return kStacksSection;
    default: return std::nullopt;
  }
}

// The SAX handler (nlohmann's json_sax interface): builds the Capture while
// the parser reads, one pass at a time. Every handler returns false after
// an error, which stops the parser there.
class CaptureBuilder {
 public:
  CaptureBuilder(const SectionCounter& counts, uint64_t total_bytes)
      : counts_(counts), total_bytes_(total_bytes) {
    levels_.reserve(kMaxNesting);
  }

  void begin_pass(int pass) {
    pass_ = pass;
    levels_.clear();
    progress_ = false;
  }
  // The error found, or "" if none.
  const std::string& error() const { return error_; }
  bool complete() const {
    return std::all_of(std::begin(built_), std::end(built_), [](bool b) { return b; });
  }
  // Whether this pass read a section.
  bool made_progress() const { return progress_; }
  // Checks that need the whole capture; false with error() set.
  bool finish();
  Capture take() { return std::move(c_); }

  // ---- json_sax interface ----
  bool null() { return mismatch(next_slot(), "null"); }
  bool boolean(bool value);
  bool number_integer(json::number_integer_t);
  bool number_unsigned(json::number_unsigned_t value);
  bool number_float(json::number_float_t, const std::string&) {
    return mismatch(next_slot(), "a non-integer number");
  }
  bool string(std::string& value);
  bool binary(json::binary_t&) { return mismatch(next_slot(), "an unsupported value"); }
  bool start_object(std::size_t) { return start_container(Want::Object, "an object"); }
  bool start_array(std::size_t) { return start_container(Want::Array, "an array"); }
  bool key(std::string& name);
  bool end_object() { return end_container(); }
  bool end_array() { return end_container(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    auto pos = what.find("] ");
    return report("not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }

 private:
  struct Level {
    Node node;
    Field field = kNoField;  // objects: the field whose value comes next
    uint64_t seen = 0;       // objects: fields seen, bit(field)
    uint64_t count = 0;      // arrays: elements begun
  };

  // ---- errors: paths built only on error ----
  std::string path_of(size_t depth) const;
  std::string value_path() const { return path_of(levels_.size()); }
  std::string container_path() const { return path_of(levels_.size() - 1); }
  static std::string join(const std::string& where, Field field) {
    return where.empty() ? field_name(field) : where + "." + field_name(field);
  }
  bool report(std::string message);
  bool fail(const std::string& where, const std::string& what) { return report(where + ": " + what); }
  bool mismatch(const Slot& slot, const char* got);
  bool report_duplicate_pid();

  // ---- containers ----
  Slot next_slot();
  bool start_container(Want kind, const char* got);
  void begin(Node node);
  bool end_container();
  bool end(const Level& level);
  bool check_required(const Level& level);
  bool end_frame(const Level& level);
  bool end_processes();
  bool end_jit_symbols();
  bool end_python_frames();
  bool read_section(Section section) const;
  bool lost_key(std::string& name, Node counters);
  static bool is_counters(Node node) { return node == Node::Lost || node == Node::Truncations; }
  std::map<std::string, uint64_t>& counters_of(Node node) {
    return node == Node::Lost ? c_.lost : c_.truncations;
  }

  // ---- values ----
  bool store_hex(const Slot& slot, const std::string& text);
  bool store_root_string(Field field, std::string& value);
  bool store_module_string(Field field, std::string& value);
  bool store_identity(std::string_view hex, size_t max_bytes, BuildId* out);
  bool store_frame_reason(const std::string& value);
  bool store_root_number(Field field, uint64_t value);
  bool store_stack_number(Field field, uint64_t value);
  bool store_frame_number(Field field, uint64_t value);
  bool store_time_delta(uint64_t delta);
  void add_process_module(uint32_t index);
  bool check_frame_module(uint32_t index, const std::string& where);
  bool check_jit(const CaptureFrame& frame, const std::string& where);
  bool check_python(const CaptureFrame& frame, const std::string& where);
  bool check_named_frames(Field kind);

  Capture c_;
  const SectionCounter& counts_;
  uint64_t total_bytes_;
  std::vector<Level> levels_;
  int pass_ = 1;
  uint64_t version_ = 0;
  bool progress_ = false;
  std::string error_;
  bool built_[kSectionCount] = {};
  bool jit_symbols_read_ = false;
  bool python_frames_read_ = false;
  uint64_t total_ = 0;                                    // sum of stack counts
  std::vector<std::pair<uint32_t, uint32_t>> pid_index_;  // (pid, process index), sorted once read
  std::string lost_key_;                                  // the `lost` entry being read
  // The stack being read: its process (once its pid is read) and its frames
  // so far (a reused buffer, so each stack's vector is allocated once at its
  // size; a big stack's is reserved at its size and becomes the stack's).
  const CaptureProcess* stack_process_ = nullptr;
  std::vector<CaptureFrame> frames_;
  // The stack's sample times so far, decoded (a reused buffer, as frames_).
  std::vector<uint64_t> times_;
  BuildId::Kind module_kind_ = BuildId::Kind::Gnu;  // the open module's build_id_kind
};

// ---------------------------------------------------------------- errors --

std::string CaptureBuilder::path_of(size_t depth) const {
  std::string path;
  for (size_t i = 0; i < depth; ++i) {
    const Level& level = levels_[i];
    if (is_array(level.node)) {
      path += "[" + std::to_string(level.count - 1) + "]";
    } else if (is_counters(level.node)) {
      path += "." + shown_value(lost_key_);
    } else {
      if (!path.empty()) path += ".";
      path += field_name(level.field);
    }
  }
  return path;
}

// Records the error and stops the parser. A repeated pid is only found by
// sorting, at the end of `processes`; while in that section, one read
// before this error comes first.
bool CaptureBuilder::report(std::string message) {
  const bool in_processes = levels_.size() >= 2 && levels_[1].node == Node::Processes;
  if (!in_processes || !report_duplicate_pid()) error_ = std::move(message);
  return false;
}

bool CaptureBuilder::mismatch(const Slot& slot, const char* got) {
  if (slot.want == Want::Skip) return true;
  if (slot.child == Node::Root) return report("capture: expected a JSON object at top level");
  return fail(value_path(), std::string("expected ") + wanted(slot.want) + ", got " + got);
}

// Sorts the (pid, index) pairs read so far (as the stacks' lookups need
// them); a pid read twice is reported at its second occurrence, the first
// such in document order.
bool CaptureBuilder::report_duplicate_pid() {
  std::sort(pid_index_.begin(), pid_index_.end());
  std::optional<uint32_t> duplicate;
  for (size_t i = 1; i < pid_index_.size(); ++i)
    if (pid_index_[i].first == pid_index_[i - 1].first && (!duplicate || pid_index_[i].second < *duplicate))
      duplicate = pid_index_[i].second;
  if (!duplicate) return false;
  error_ = "processes[" + std::to_string(*duplicate) + "].pid: duplicate process " +
           std::to_string(c_.processes[*duplicate].pid);
  return true;
}

// ------------------------------------------------------------ containers --

// The slot of the value that starts now (counts array elements).
Slot CaptureBuilder::next_slot() {
  if (levels_.empty()) return kDocument;
  Level& top = levels_.back();
  if (top.node == Node::Skip) return {};
  if (is_counters(top.node)) return slot_for(top.node, kLostEntry);
  const Slot element = slot_for(top.node, kElement);
  if (element.want == Want::Skip) return slot_for(top.node, top.field);
  ++top.count;
  return element;
}

bool CaptureBuilder::start_container(Want kind, const char* got) {
  // Bounded anywhere, also in fields nobody reads.
  if (levels_.size() >= kMaxNesting)
    return report("not a capture: JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
  const Slot slot = next_slot();
  if (slot.want == Want::Skip) {
    levels_.push_back({Node::Skip});
    return true;
  }
  if (slot.want != kind) return mismatch(slot, got);
  begin(slot.child);
  levels_.push_back({slot.child});
  return true;
}

// Sets up the element a container starts.
void CaptureBuilder::begin(Node node) {
  switch (node) {
    case Node::Modules: c_.modules.reserve(counts_.count(kModulesSection, total_bytes_)); break;
    case Node::Processes:
      c_.processes.reserve(counts_.count(kProcessesSection, total_bytes_));
      pid_index_.reserve(c_.processes.capacity());
      break;
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
      break;
    case Node::Frames:
      frames_.clear();
      // A big stack's frames are allocated once, at their number.
      if (const uint64_t big = counts_.big_stack_frames(c_.stacks.size() - 1); big > frames_.capacity()) {
        frames_ = {};
        frames_.reserve(big);
      }
      break;
    case Node::Times: times_.clear(); break;
    case Node::Frame: frames_.emplace_back(); break;
    case Node::KernelSymbol: c_.kernel.symbols.emplace_back(); break;
    case Node::JitSymbol: c_.jit_symbols.emplace_back(); break;
    case Node::PythonFrame: c_.python_frames.emplace_back(); break;
    default: break;
  }
}

bool CaptureBuilder::end_container() {
  const bool ok = levels_.back().node == Node::Skip || end(levels_.back());
  levels_.pop_back();
  return ok;
}

// Checks and completes the container that ends.
bool CaptureBuilder::end(const Level& level) {
  if (level.node == Node::Root && pass_ > 1) return true;  // checked by pass 1
  if (!check_required(level)) return false;
  switch (level.node) {
    case Node::Module: {
      CaptureModule& m = c_.modules.back();
      m.build_id = BuildId(m.build_id.bytes(), module_kind_);
      // Before version 4 the message was all there was; this one meant the
      // process had exited.
      if (m.error_kind == ModuleErrorKind::None && !m.error.empty())
        m.error_kind = m.error == kProcessExitedError ? ModuleErrorKind::ProcessExited : ModuleErrorKind::Unreadable;
      return true;
    }
    case Node::Stack: {
      const CaptureStack& stack = c_.stacks.back();
      if (stack.off_cpu == OffCpuReason::None && (stack.off_cpu_ns != 0 || stack.short_waits))
        return fail(container_path(), "off_cpu_ns or short_waits without off_cpu");
      if ((level.seen & bit(kTimes)) && stack.times_us.size() != stack.count)
        return fail(join(container_path(), kTimes), std::to_string(stack.times_us.size()) +
                                                        " sample times for a count of " +
                                                        std::to_string(stack.count));
      return true;
    }
    case Node::Mapping: {
      const ModuleMapping& m = c_.modules.back().mappings.back();
      return m.start < m.end || fail(container_path(), "start is not below end");
    }
    case Node::ProcessModules: {
      std::vector<uint32_t>& modules = c_.processes.back().modules;
      std::sort(modules.begin(), modules.end());
      modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
      modules.shrink_to_fit();
      return true;
    }
    case Node::Frame: return end_frame(level);
    case Node::Frames: {
      // A big stack takes the buffer itself (a copy would double it); the
      // next stacks grow a new one. Others are copied: the buffer stays.
      std::vector<CaptureFrame>& frames = c_.stacks.back().frames;
      if (frames_.size() >= kBigStackFrames) {
        frames = std::move(frames_);
        frames_ = {};
      } else {
        frames.assign(frames_.begin(), frames_.end());
      }
      return true;
    }
    case Node::Times: c_.stacks.back().times_us.assign(times_.begin(), times_.end()); return true;
    case Node::KernelSymbol: {
      // Sorted and disjoint, so a lookup finds the one symbol holding an
      // address (the writer writes them so).
      const std::vector<KernelSymbol>& symbols = c_.kernel.symbols;
      if (symbols.back().start >= symbols.back().end) return fail(container_path(), "start is not below end");
      if (symbols.size() > 1 && symbols.back().start < symbols[symbols.size() - 2].end)
        return fail(container_path(), "overlaps or precedes the symbol before it");
      return true;
    }
    case Node::JitSymbol: {
      // Canonical: sorted by (start, end, name), each once.
      const std::vector<JitSymbol>& symbols = c_.jit_symbols;
      if (symbols.back().start >= symbols.back().end) return fail(container_path(), "start is not below end");
      if (symbols.size() > 1 && !(symbols[symbols.size() - 2] < symbols.back()))
        return fail(container_path(), "not after the symbol before it (sorted by start, end, name; no repeats)");
      return true;
    }
    case Node::JitSymbols: return end_jit_symbols();
    case Node::PythonFrame: {
      // Canonical: sorted by (qualname, file, line), each once.
      const std::vector<PythonFrame>& frames = c_.python_frames;
      if (frames.size() > 1 && !(frames[frames.size() - 2] < frames.back()))
        return fail(container_path(), "not after the frame before it (sorted by qualname, file, line; no repeats)");
      return true;
    }
    case Node::PythonFrames: return end_python_frames();
    case Node::Modules:
      if (c_.modules.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        return fail("modules", "too many modules");
      built_[kModulesSection] = progress_ = true;
      return true;
    case Node::Processes: return end_processes();
    case Node::Stacks: built_[kStacksSection] = progress_ = true; return true;
    default: return true;
  }
}

// The first required field missing, in documented order.
bool CaptureBuilder::check_required(const Level& level) {
  for (const Slot& slot : fields_of(level.node))
    if (slot.required && slot.field < kElement && !(level.seen & bit(slot.field)))
      return fail(join(container_path(), slot.field), "missing field");
  return true;
}

bool CaptureBuilder::end_frame(const Level& level) {
  if (level.seen & bit(kPython)) {
    // Named by its python_frames entry alone: nothing of native code.
    const uint64_t native = bit(kModule) | bit(kUnresolved) | bit(kKernel) | bit(kJit) | bit(kAddress);
    if (level.seen & native)
      return fail(join(container_path(), kPython),
                  "a Python frame has no \"module\", \"unresolved\", \"kernel\", \"jit\" or \"address\"");
    return !python_frames_read_ || check_python(frames_.back(), join(container_path(), kPython));
  }
  if (!(level.seen & bit(kAddress))) return fail(join(container_path(), kAddress), "missing field");
  const int kinds = ((level.seen & bit(kModule)) != 0) + ((level.seen & bit(kUnresolved)) != 0) +
                    ((level.seen & bit(kKernel)) != 0);
  if (kinds != 1)
    return fail(container_path(), "a frame needs exactly one of \"module\", \"unresolved\" and \"kernel\"");
  const CaptureFrame& frame = frames_.back();
  if (frame.jit < 0) return true;
  if (frame.reason != UnresolvedReason::AnonymousMapping)
    return fail(join(container_path(), kJit), "only a frame with \"unresolved\": \"anonymous-mapping\" is JIT code");
  return !jit_symbols_read_ || check_jit(frame, join(container_path(), kJit));
}

bool CaptureBuilder::end_processes() {
  if (report_duplicate_pid()) return false;
  built_[kProcessesSection] = progress_ = true;
  return true;
}

// JIT frames of the stacks read before jit_symbols; later ones are checked
// at their end.
bool CaptureBuilder::end_jit_symbols() {
  jit_symbols_read_ = true;
  return check_named_frames(kJit);
}

// Python frames of the stacks read before python_frames, as for JIT frames.
bool CaptureBuilder::end_python_frames() {
  python_frames_read_ = true;
  return check_named_frames(kPython);
}

// Whether a section's value is read in this pass; false defers it to the
// next pass (it refers to a section not read yet) or skips it (read before).
bool CaptureBuilder::read_section(Section section) const {
  if (built_[section]) return false;
  return section == kModulesSection ||
         (built_[kModulesSection] && (section == kProcessesSection || built_[kProcessesSection]));
}

bool CaptureBuilder::key(std::string& name) {
  if (levels_.empty()) return true;
  Level& top = levels_.back();
  top.field = kNoField;
  if (top.node == Node::Skip) return true;
  if (is_counters(top.node)) return lost_key(name, top.node);
  const Field field = field_named(top.node, name);
  if (field == kNoField) return true;  // unknown fields are ignored
  const std::optional<Section> section = top.node == Node::Root ? section_of(field) : std::nullopt;
  if (top.node == Node::Root && pass_ > 1) {
    // Later passes read only the sections earlier ones deferred.
    if (section && read_section(*section)) top.field = field;
    return true;
  }
  if (top.seen & bit(field)) {
    // Rejected rather than "last one wins": a reader that streams cannot
    // take back what the first one built.
    top.field = field;
    return fail(value_path(), "duplicate field");
  }
  // Noted also when deferred, so that no section is reported missing.
  top.seen |= bit(field);
  if (!section || read_section(*section)) top.field = field;
  return true;
}

bool CaptureBuilder::lost_key(std::string& name, Node counters) {
  lost_key_ = std::move(name);
  const std::map<std::string, uint64_t>& map = counters_of(counters);
  const char* what = counters == Node::Lost ? "lost" : "truncations";
  if (lost_key_.empty()) return fail(what, "empty reason name");
  if (map.count(lost_key_)) return fail(value_path(), "duplicate field");
  if (map.size() >= kMaxLostReasons)
    return fail(what, "more than " + std::to_string(kMaxLostReasons) + " reasons");
  return true;
}

// ---------------------------------------------------------------- values --

bool CaptureBuilder::boolean(bool value) {
  const Slot slot = next_slot();
  if (slot.want != Want::Bool) return mismatch(slot, "a boolean");
  if (slot.parent == Node::Frame) {
    if (!value) return fail(value_path(), "must be true when present");
    frames_.back().kernel = true;
  } else if (slot.field == kShortWaits) {
    c_.stacks.back().short_waits = value;
  } else {
    c_.stacks.back().truncated = value;
  }
  return true;
}

bool CaptureBuilder::number_integer(json::number_integer_t) {
  // nlohmann gives non-negative integers to number_unsigned.
  const Slot slot = next_slot();
  if (slot.want == Want::Unsigned || slot.want == Want::U32)
    return fail(value_path(), "expected an unsigned integer, got a negative one");
  return mismatch(slot, "an integer");
}

bool CaptureBuilder::number_unsigned(json::number_unsigned_t value) {
  const Slot slot = next_slot();
  if (slot.want != Want::Unsigned && slot.want != Want::U32) return mismatch(slot, "an integer");
  if (slot.want == Want::U32 && value > std::numeric_limits<uint32_t>::max())
    return fail(value_path(), "value " + std::to_string(value) + " does not fit in 32 bits");
  switch (slot.parent) {
    case Node::Root: return store_root_number(slot.field, value);
    case Node::Lost:
    case Node::Truncations: counters_of(slot.parent).emplace(std::move(lost_key_), value); return true;
    case Node::Process:
      c_.processes.back().pid = static_cast<uint32_t>(value);
      pid_index_.emplace_back(static_cast<uint32_t>(value), static_cast<uint32_t>(c_.processes.size() - 1));
      return true;
    case Node::ProcessModules:
      if (value >= c_.modules.size())
        return fail(value_path(), "module index " + std::to_string(value) + " out of range (" +
                                      std::to_string(c_.modules.size()) + " modules)");
      add_process_module(static_cast<uint32_t>(value));
      return true;
    case Node::Stack: return store_stack_number(slot.field, value);
    case Node::Frame: return store_frame_number(slot.field, value);
    case Node::PythonFrame: c_.python_frames.back().line = static_cast<uint32_t>(value); return true;
    case Node::Times: return store_time_delta(value);
    default: return true;
  }
}

bool CaptureBuilder::string(std::string& value) {
  const Slot slot = next_slot();
  if (slot.want == Want::Hex) return store_hex(slot, value);
  if (slot.want != Want::String) return mismatch(slot, "a string");
  switch (slot.parent) {
    case Node::Root: return store_root_string(slot.field, value);
    case Node::Module: return store_module_string(slot.field, value);
    case Node::Mapping: c_.modules.back().mappings.back().perms = std::move(value); return true;
    case Node::Process: c_.processes.back().comm = std::move(value); return true;
    case Node::Kernel:
      if (slot.field == kError) {
        c_.kernel.error = std::move(value);
        return true;
      }
      return store_identity(value, kMaxKernelIdBytes, &c_.kernel.build_id);
    case Node::KernelSymbol:
      (slot.field == kName ? c_.kernel.symbols.back().name : c_.kernel.symbols.back().module) =
          std::move(value);
      return true;
    case Node::JitSymbol: c_.jit_symbols.back().name = std::move(value); return true;
    case Node::PythonFrame:
      (slot.field == kQualname ? c_.python_frames.back().qualname : c_.python_frames.back().file) =
          std::move(value);
      return true;
    case Node::Stack:
      if (slot.field == kOffCpu) {
        CaptureStack& stack = c_.stacks.back();
        if (!parse_off_cpu_reason(value, &stack.off_cpu) || stack.off_cpu == OffCpuReason::None)
          return fail(value_path(), "unknown off-CPU reason " + shown_value(value));
        return true;
      }
      c_.stacks.back().comm = std::move(value);
      return true;
    case Node::Frame: return store_frame_reason(value);
    default: return true;
  }
}

bool CaptureBuilder::store_hex(const Slot& slot, const std::string& text) {
  uint64_t value = 0;
  bool bad_digit = false;
  if (!parse_hex_u64(text, &value, &bad_digit))
    return fail(value_path(), bad_digit ? "invalid hex digit in " + shown_value(text)
                                        : "expected a hex string \"0x...\" of at most 16 digits");
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

bool CaptureBuilder::store_root_string(Field field, std::string& value) {
  switch (field) {
    case kFormat:
      if (value != kFormatName)
        return fail(field_name(kFormat), "not a gsymprof capture (format is " + shown_value(value) + ")");
      return true;
    case kHost: c_.host = std::move(value); return true;
    case kKernelRelease: c_.kernel_release = std::move(value); return true;
    case kCallGraph:
      if (value.empty()) return fail(field_name(kCallGraph), "must not be empty");
      if (!parse_call_graph(value, &c_.call_graph))
        return fail(field_name(kCallGraph), "unknown call graph " + shown_value(value) + " (known: fp, dwarf, none)");
      return true;
    case kClock:
      if (!parse_clock(value, &c_.clock))
        return fail(field_name(kClock), "unknown clock " + shown_value(value) + " (known: cpu, off-cpu, wall)");
      return true;
    default: return true;
  }
}

bool CaptureBuilder::store_module_string(Field field, std::string& value) {
  CaptureModule& m = c_.modules.back();
  switch (field) {
    case kPath: m.path = std::move(value); return true;
    case kError: m.error = std::move(value); return true;
    case kErrorKind:
      if (!parse_module_error_kind(value, &m.error_kind))
        return fail(value_path(), "unknown error kind " + shown_value(value) +
                                      " (known: none, process-exited, unreadable)");
      return true;
    case kBuildId: return store_identity(value, kMaxModuleIdBytes, &m.build_id);
    case kBuildIdKind:
      // Applied at the module's end, whatever the field order.
      if (!parse_kind_name(value, &module_kind_))
        return fail(value_path(), "unknown build ID kind " + shown_value(value) + " (known: gnu, go, sha256)");
      return true;
    default: return true;
  }
}

// A build ID's hex text, checked before decoding, so a huge string is never
// decoded.
bool CaptureBuilder::store_identity(std::string_view hex, size_t max_bytes, BuildId* out) {
  if (hex.size() % 2 != 0 || !is_hex_text(hex)) return fail(value_path(), "not an even-length hex string");
  if (hex.size() > 2 * max_bytes) return fail(value_path(), "longer than " + std::to_string(max_bytes) + " bytes");
  *out = *BuildId::from_hex(hex);
  return true;
}

bool CaptureBuilder::store_frame_reason(const std::string& value) {
  CaptureFrame& frame = frames_.back();
  if (!parse_unresolved_reason(value, &frame.reason) || frame.reason == UnresolvedReason::None) {
    frame.reason = UnresolvedReason::None;
    return fail(value_path(), "unknown reason " + shown_value(value));
  }
  return true;
}

bool CaptureBuilder::store_root_number(Field field, uint64_t value) {
  switch (field) {
    case kVersion:
      version_ = value;
      if (value < static_cast<uint64_t>(kOldestFormatVersion) || value > static_cast<uint64_t>(kFormatVersion))
        return fail(field_name(kVersion), "unsupported capture version " + std::to_string(value) +
                                              " (this gsymprof reads versions " +
                                              std::to_string(kOldestFormatVersion) + " to " +
                                              std::to_string(kFormatVersion) + ")");
      return true;
    case kFrequencyHz: c_.frequency_hz = static_cast<uint32_t>(value); return true;
    case kStartTime: c_.start_time_unix_ns = value; return true;
    case kDuration: c_.duration_ns = value; return true;
    case kSamples: c_.samples = value; return true;
    default: return true;
  }
}

bool CaptureBuilder::store_stack_number(Field field, uint64_t value) {
  CaptureStack& stack = c_.stacks.back();
  if (field == kCount) {
    if (value == 0) return fail(value_path(), "must be at least 1");
    if (total_ > std::numeric_limits<uint64_t>::max() - value)
      return fail(value_path(), "sample counts overflow 64 bits");
    total_ += value;
    stack.count = value;
    return true;
  }
  if (field == kTid) {
    stack.tid = static_cast<uint32_t>(value);
    return true;
  }
  if (field == kOffCpuNs) {
    stack.off_cpu_ns = value;
    return true;
  }
  stack.pid = static_cast<uint32_t>(value);
  auto it = std::lower_bound(pid_index_.begin(), pid_index_.end(), std::make_pair(stack.pid, uint32_t{0}));
  if (it == pid_index_.end() || it->first != stack.pid)
    return fail(value_path(), "process " + std::to_string(stack.pid) + " is not in \"processes\"");
  stack_process_ = &c_.processes[it->second];
  // Frames read before the pid are checked now.
  const std::string where = container_path();
  for (size_t j = 0; j < stack.frames.size(); ++j)
    if (stack.frames[j].module >= 0 &&
        !check_frame_module(static_cast<uint32_t>(stack.frames[j].module),
                            where + ".frames[" + std::to_string(j) + "].module"))
      return false;
  return true;
}

bool CaptureBuilder::store_frame_number(Field field, uint64_t value) {
  if (field == kJit) {
    // Its symbol is checked at the frame's end, or once jit_symbols is read.
    frames_.back().jit = static_cast<int32_t>(std::min<uint64_t>(value, INT32_MAX));
    return true;
  }
  if (field == kPython) {
    // Likewise against python_frames.
    frames_.back().python = static_cast<int32_t>(std::min<uint64_t>(value, INT32_MAX));
    return true;
  }
  if (value >= c_.modules.size())
    return fail(value_path(), "module index " + std::to_string(value) + " out of range (" +
                                  std::to_string(c_.modules.size()) + " modules)");
  if (stack_process_ && !check_frame_module(static_cast<uint32_t>(value), value_path())) return false;
  frames_.back().module = static_cast<int32_t>(value);
  return true;
}

// A sample time: the first is an offset, each later one a delta from the one
// before, so they are sorted by construction. Bounded by the stack's count
// when it came first (the writer's order); else checked at the stack's end.
bool CaptureBuilder::store_time_delta(uint64_t delta) {
  const uint64_t count = c_.stacks.back().count;  // 0: not read yet
  if (count != 0 && times_.size() >= count)
    return fail(value_path(), "more sample times than the stack's count (" + std::to_string(count) + ")");
  const uint64_t previous = times_.empty() ? 0 : times_.back();
  if (delta > std::numeric_limits<uint64_t>::max() - previous)
    return fail(value_path(), "sample time overflows 64 bits");
  times_.push_back(previous + delta);
  return true;
}

// Process module lists are sets (kept sorted and unique); duplicates are
// dropped as they come so that "[0,0,0,...]" cannot take 4 bytes per 2 of text.
void CaptureBuilder::add_process_module(uint32_t index) {
  std::vector<uint32_t>& modules = c_.processes.back().modules;
  if (modules.size() == modules.capacity() && modules.size() >= 256) {
    std::sort(modules.begin(), modules.end());
    modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
    // Room for at least as many again before the next sort.
    if (modules.size() > modules.capacity() / 2) modules.reserve(modules.capacity() * 2);
  }
  modules.push_back(index);
}

bool CaptureBuilder::check_frame_module(uint32_t index, const std::string& where) {
  if (std::binary_search(stack_process_->modules.begin(), stack_process_->modules.end(), index)) return true;
  return fail(where, "module " + std::to_string(index) + " is not a module of the stack's process");
}

// A JIT frame against jit_symbols. A return address may be the symbol's end
// (a call as its last instruction).
bool CaptureBuilder::check_jit(const CaptureFrame& frame, const std::string& where) {
  const size_t index = static_cast<size_t>(frame.jit);
  if (index >= c_.jit_symbols.size())
    return fail(where, "JIT symbol index " + std::to_string(frame.jit) + " out of range (" +
                           std::to_string(c_.jit_symbols.size()) + " JIT symbols)");
  const JitSymbol& symbol = c_.jit_symbols[index];
  if (frame.address < symbol.start || frame.address > symbol.end)
    return fail(where, "the frame's address is outside JIT symbol " + std::to_string(frame.jit));
  return true;
}

bool CaptureBuilder::check_python(const CaptureFrame& frame, const std::string& where) {
  if (static_cast<size_t>(frame.python) < c_.python_frames.size()) return true;
  return fail(where, "Python frame index " + std::to_string(frame.python) + " out of range (" +
                         std::to_string(c_.python_frames.size()) + " Python frames)");
}

// Every frame of `kind` (kJit or kPython) of the stacks read so far.
bool CaptureBuilder::check_named_frames(Field kind) {
  for (size_t s = 0; s < c_.stacks.size(); ++s)
    for (size_t f = 0; f < c_.stacks[s].frames.size(); ++f) {
      const CaptureFrame& frame = c_.stacks[s].frames[f];
      if ((kind == kJit ? frame.jit : frame.python) < 0) continue;
      const std::string where =
          "stacks[" + std::to_string(s) + "].frames[" + std::to_string(f) + "]." + field_name(kind);
      if (!(kind == kJit ? check_jit(frame, where) : check_python(frame, where))) return false;
    }
  return true;
}

bool CaptureBuilder::finish() {
  if (total_ != c_.samples)
    return fail(field_name(kSamples), std::to_string(c_.samples) +
                                          " does not equal the sum of stack counts (" +
                                          std::to_string(total_) + ")");
  // Before version 4, the unwinder's truncations were "unwind_" entries of
  // `lost` (they were never lost: their samples are in the stacks).
  if (version_ < 4) {
    for (auto it = c_.lost.begin(); it != c_.lost.end();) {
      if (it->first.starts_with("unwind_")) {
        c_.truncations.insert(*it);
        it = c_.lost.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Without jit_symbols (python_frames), any JIT (Python) frame's index is
  // out of range.
  return (jit_symbols_read_ || check_named_frames(kJit)) && (python_frames_read_ || check_named_frames(kPython));
}

// ----------------------------------------------------------------- passes --

// Runs passes over `source` until every section is read or an error is found.
gsym::Expected<Capture> parse_capture(Source& source) {
  SectionCounter counts;
  const uint64_t total_bytes = counts.scan(source);
  if (std::string e = source.error(); !e.empty()) return gsym::Error(e);
  CaptureBuilder builder(counts, total_bytes);
  for (int pass = 1; !builder.complete(); ++pass) {
    source.rewind();
    builder.begin_pass(pass);
    json::sax_parse(SourceIterator(&source), SourceIterator(), &builder);
    if (std::string e = source.error(); !e.empty()) return gsym::Error(e);
    if (!builder.error().empty()) return gsym::Error(builder.error());
    // Each pass reads one more section or finds an error, so this only
    // guards against a file that changed between passes.
    if (!builder.made_progress()) return gsym::Error("capture: sections refer to each other");
  }
  if (!builder.finish()) return gsym::Error(builder.error());
  return builder.take();
}

}  // namespace

gsym::Expected<Capture> capture_from_json(std::string_view text, uint64_t max_bytes) {
  if (text.size() > max_bytes) return gsym::Error(too_large(text.size(), max_bytes));
  TextSource source(text);
  return parse_capture(source);
}

bool looks_like_capture(std::string_view head) {
  // A JSON object whose "format" (the writer's first key) names ours.
  const size_t start = head.find_first_not_of(" \t\r\n");
  constexpr size_t kLookedAt = 256;
  return start != std::string_view::npos && head[start] == '{' &&
         head.substr(start, kLookedAt).find(std::string("\"") + kFormatName + "\"") != std::string_view::npos;
}

gsym::Expected<Capture> read_capture_file(const std::string& path, uint64_t max_bytes) {
  // Opened without blocking (a FIFO planted at the path cannot hang us) and
  // refused unless a regular file; then streamed, never held whole.
  auto file = gsym::open_regular_file(path);
  if (!file) return file.error();
  const uint64_t size = static_cast<uint64_t>(file->status.st_size);
  if (size > max_bytes) return gsym::Error(path + ": " + too_large(size, max_bytes));
  FileSource source(file->fd.get(), max_bytes);
  auto capture = parse_capture(source);
  if (!capture) return gsym::Error(path + ": " + capture.error().message);
  return capture;
}

}  // namespace gsymprof
