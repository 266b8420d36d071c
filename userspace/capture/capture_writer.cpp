// The capture writer: capture_to_json and write_capture_file.
//
// Header fields one per line, then one module / process / stack per line:
// readable, diffable, and far smaller than fully indented JSON. Written
// straight into the text (no JSON tree of the whole capture), in the
// documented field order, byte for byte as nlohmann's compact dump of each
// value.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <map>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gsym/base/file_io.h"
#include "userspace/capture/capture_file.h"
#include "userspace/capture/capture_schema.h"

namespace gsymprof {
namespace {

using namespace capture_schema;

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
    using nlohmann::json;
    out += json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

void put_u64(std::string& out, uint64_t value) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  (void)ec;
  out.append(buffer, end);
}

// An address: "0x" and lower-case hex digits, as a JSON string.
void put_address(std::string& out, uint64_t value) {
  char buffer[24];
  buffer[0] = '"';
  buffer[1] = '0';
  buffer[2] = 'x';
  auto [end, ec] = std::to_chars(buffer + 3, buffer + sizeof buffer - 1, value, 16);
  (void)ec;
  *end++ = '"';
  out.append(buffer, end);
}

// Writes an object's fields in order, compactly: {"a":1,"b":"x"}.
class ObjectWriter {
 public:
  explicit ObjectWriter(std::string& out) : out_(out) { out_ += '{'; }
  // Writes the key of `field`; its value is written next into the result.
  std::string& operator[](Field field) {
    out_ += first_ ? "\"" : ",\"";
    first_ = false;
    out_ += field_name(field);
    out_ += "\":";
    return out_;
  }
  void close() { out_ += '}'; }

 private:
  std::string& out_;
  bool first_ = true;
};

// Where a file's text goes as it is made: past kChunkBytes, the text so far
// is written and dropped, so a big capture's text (16 MB for 20k stacks)
// never exists whole in memory beside the capture.
class ChunkedOutput {
 public:
  explicit ChunkedOutput(int fd) : fd_(fd) {}
  void after_line(std::string& out) {
    if (out.size() >= kChunkBytes) flush(out);
  }
  // Writes what `out` holds and empties it; false (errno set) once any
  // write failed.
  bool flush(std::string& out) {
    if (errno_ == 0 && !gsym::write_all(fd_, out)) errno_ = errno;  // write_all sets it
    out.clear();
    errno = errno_;
    return errno_ == 0;
  }

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  int fd_;
  int errno_ = 0;
};

// [\n  ITEM,\n  ITEM\n], or [] when empty: one item per line; `chunks`
// (optional) takes the text after each line.
template <typename Item>
void put_lines(std::string& out, const std::vector<Item>& items, void (*put_item)(std::string&, const Item&),
               ChunkedOutput* chunks = nullptr) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    put_item(out, items[i]);
    if (chunks) chunks->after_line(out);
  }
  out += items.empty() ? "]" : "\n]";
}

// [ITEM,ITEM] on one line.
template <typename Item, typename PutItem>
void put_inline(std::string& out, const std::vector<Item>& items, PutItem put_item) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    put_item(out, items[i]);
  }
  out += ']';
}

// A top-level field: "NAME": (its value follows, then ",\n").
std::string& top_key(std::string& out, Field field) {
  out += '"';
  out += field_name(field);
  out += "\": ";
  return out;
}

// Header lines: "NAME": VALUE,
void put_string_line(std::string& out, Field field, std::string_view text) {
  put_string(top_key(out, field), text);
  out += ",\n";
}
void put_number_line(std::string& out, Field field, uint64_t value) {
  put_u64(top_key(out, field), value);
  out += ",\n";
}

// "NAME": {"reason":COUNT,...},
void put_counters_line(std::string& out, Field field, const std::map<std::string, uint64_t>& counters) {
  top_key(out, field) += '{';
  bool first = true;
  for (const auto& [reason, count] : counters) {  // std::map: sorted
    if (!first) out += ',';
    first = false;
    put_string(out, reason);
    out += ':';
    put_u64(out, count);
  }
  out += "},\n";
}

void put_header(std::string& out, const Capture& c) {
  put_string_line(out, kFormat, kFormatName);
  put_number_line(out, kVersion, kFormatVersion);
  put_string_line(out, kHost, c.host);
  put_string_line(out, kKernelRelease, c.kernel_release);
  put_number_line(out, kFrequencyHz, c.frequency_hz);
  put_number_line(out, kStartTime, c.start_time_unix_ns);
  put_number_line(out, kDuration, c.duration_ns);
  put_string_line(out, kCallGraph, call_graph_name(c.call_graph));
  put_string_line(out, kClock, clock_name(c.clock));
  put_number_line(out, kSamples, c.samples);
  put_counters_line(out, kLost, c.lost);
  put_counters_line(out, kTruncations, c.truncations);
}

void put_mapping(std::string& out, const ModuleMapping& map) {
  ObjectWriter o(out);
  put_address(o[kStart], map.start);
  put_address(o[kEnd], map.end);
  put_address(o[kFileOffset], map.file_offset);
  put_string(o[kPerms], map.perms);
  o.close();
}

void put_module(std::string& out, const CaptureModule& m) {
  ObjectWriter o(out);
  put_string(o[kPath], m.path);
  put_string(o[kBuildId], m.build_id.hex());
  put_string(o[kBuildIdKind], kind_name(m.build_id.kind()));
  put_address(o[kLoadBias], m.load_bias);
  put_inline(o[kMappings], m.mappings, put_mapping);
  if (m.error_kind != ModuleErrorKind::None) put_string(o[kErrorKind], module_error_kind_name(m.error_kind));
  put_string(o[kError], m.error);
  o.close();
}

void put_process(std::string& out, const CaptureProcess& p) {
  ObjectWriter o(out);
  put_u64(o[kPid], p.pid);
  put_string(o[kComm], p.comm);
  put_inline(o[kModules], p.modules, [](std::string& s, uint32_t index) { put_u64(s, index); });
  o.close();
}

void put_frame(std::string& out, const CaptureFrame& f) {
  ObjectWriter o(out);
  if (f.python >= 0) {  // named by its python_frames entry alone: no address
    put_u64(o[kPython], static_cast<uint64_t>(f.python));
    o.close();
    return;
  }
  if (f.kernel) {
    o[kKernel] += "true";
  } else if (f.module >= 0) {
    put_u64(o[kModule], static_cast<uint64_t>(f.module));
  } else {
    put_string(o[kUnresolved], unresolved_reason_name(f.reason));
  }
  put_address(o[kAddress], f.address);
  if (f.jit >= 0) put_u64(o[kJit], static_cast<uint64_t>(f.jit));
  o.close();
}

// Sorted sample times as [first, delta, delta, ...]: a sample a millisecond
// after the last costs five bytes, not the 8 to 11 digits of its offset.
void put_time_deltas(std::string& out, const std::vector<uint64_t>& times) {
  out += '[';
  uint64_t previous = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    if (i) out += ',';
    put_u64(out, times[i] - previous);
    previous = times[i];
  }
  out += ']';
}

void put_stack(std::string& out, const CaptureStack& s) {
  ObjectWriter o(out);
  put_u64(o[kPid], s.pid);
  put_u64(o[kTid], s.tid);
  put_string(o[kComm], s.comm);
  put_u64(o[kCount], s.count);
  o[kTruncated] += s.truncated ? "true" : "false";
  if (s.off_cpu != OffCpuReason::None) {
    put_string(o[kOffCpu], off_cpu_reason_name(s.off_cpu));
    put_u64(o[kOffCpuNs], s.off_cpu_ns);
    if (s.short_waits) o[kShortWaits] += "true";
  }
  put_inline(o[kFrames], s.frames, put_frame);
  if (!s.times_us.empty()) put_time_deltas(o[kTimes], s.times_us);
  o.close();
}

void put_jit_symbol(std::string& out, const JitSymbol& j) {
  ObjectWriter o(out);
  put_address(o[kStart], j.start);
  put_address(o[kEnd], j.end);
  put_string(o[kName], j.name);
  o.close();
}

void put_python_frame(std::string& out, const PythonFrame& p) {
  ObjectWriter o(out);
  put_string(o[kQualname], p.qualname);
  put_string(o[kFile], p.file);
  put_u64(o[kLine], p.line);
  o.close();
}

void put_kernel_symbol(std::string& out, const KernelSymbol& k) {
  ObjectWriter o(out);
  put_address(o[kStart], k.start);
  put_address(o[kEnd], k.end);
  put_string(o[kName], k.name);
  put_string(o[kModule], k.module);
  o.close();
}

// "kernel": {"build_id":"...","error":"...","symbols":[\n  SYMBOL,\n  SYMBOL\n]},
void put_kernel(std::string& out, const CaptureKernel& kernel, ChunkedOutput* chunks) {
  ObjectWriter o(top_key(out, kKernel));
  put_string(o[kBuildId], kernel.build_id.hex());
  put_string(o[kError], kernel.error);
  put_lines(o[kSymbols], kernel.symbols, put_kernel_symbol, chunks);
  o.close();
  out += ",\n";
}

// "NAME": [\n  ITEM,\n  ITEM\n] and a comma unless `last`.
template <typename Item>
void put_section(std::string& out, Field field, const std::vector<Item>& items, bool last,
                 void (*put_item)(std::string&, const Item&), ChunkedOutput* chunks) {
  put_lines(top_key(out, field), items, put_item, chunks);
  out += last ? "\n" : ",\n";
}

// A canonical capture's text; `chunks` (optional) takes it as it grows.
void put_capture(std::string& out, const Capture& c, ChunkedOutput* chunks) {
  out += "{\n";
  put_header(out, c);
  put_kernel(out, c.kernel, chunks);
  put_section(out, kJitSymbols, c.jit_symbols, false, put_jit_symbol, chunks);
  put_section(out, kPythonFrames, c.python_frames, false, put_python_frame, chunks);
  put_section(out, kModules, c.modules, false, put_module, chunks);
  put_section(out, kProcesses, c.processes, false, put_process, chunks);
  put_section(out, kStacks, c.stacks, true, put_stack, chunks);
  out += "}\n";
}

}  // namespace

std::string capture_to_json(const Capture& input) {
  Capture c = input;
  canonicalize(c);
  std::string out;
  put_capture(out, c, nullptr);
  return out;
}

gsym::Status write_capture_file(Capture& capture, const std::string& path) {
  canonicalize(capture);
  return gsym::write_file_atomically_streamed(path, [&capture](int fd) {
    ChunkedOutput chunks(fd);
    std::string out;
    put_capture(out, capture, &chunks);
    return chunks.flush(out);
  });
}

}  // namespace gsymprof
