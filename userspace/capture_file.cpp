#include "userspace/capture_file.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "userspace/atomic_write.h"

namespace gsymprof {

using nlohmann::json;

namespace {

struct ReasonName {
  UnresolvedReason reason;
  const char* name;
};
constexpr ReasonName kReasonNames[] = {
    {UnresolvedReason::None, "none"},
    {UnresolvedReason::NoMapping, "no-mapping"},
    {UnresolvedReason::AnonymousMapping, "anonymous-mapping"},
    {UnresolvedReason::ModuleUnreadable, "module-unreadable"},
    {UnresolvedReason::NoSegment, "no-segment"},
    {UnresolvedReason::ProcessGone, "process-gone"},
};

// nlohmann's DOM parser is iterative, but bound nesting anyway: a capture is
// four levels deep, and hostile input should not build huge nested trees.
constexpr int kMaxNesting = 16;

bool nesting_within_limit(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// A value from the input, shown in an error message: JSON-quoted (so no
// control character can break the one-line message) and cut to 40 bytes.
std::string shown_value(std::string_view value) {
  std::string shown(value.substr(0, 40));
  std::string out = json(shown).dump(-1, ' ', false, json::error_handler_t::replace);
  return value.size() > 40 ? out + "..." : out;
}

std::string hex_u64(uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%" PRIx64, value);
  return buffer;
}

const char* type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a non-integer number";
    default: return "an unsupported value";
  }
}

// Walks the parsed document; the first problem is kept as a one-line error
// naming the JSON path ("stacks[3].frames[0].module: ...").
class CaptureParser {
 public:
  gsym::Expected<Capture> parse(const json& root) {
    Capture c;
    if (!root.is_object()) return gsym::Error("capture: expected a JSON object at top level");
    if (!parse_header(root, c) || !parse_modules(root, c) || !parse_processes(root, c) ||
        !parse_stacks(root, c))
      return gsym::Error(error_);
    return c;
  }

 private:
  std::string error_;

  bool fail(const std::string& where, const std::string& what) {
    error_ = where + ": " + what;
    return false;
  }

  const json* field(const json& object, const char* key, const std::string& where) {
    auto it = object.find(key);
    if (it == object.end()) {
      fail(where.empty() ? key : where + "." + key, "missing field");
      return nullptr;
    }
    return &*it;
  }
  static std::string join(const std::string& where, const char* key) {
    return where.empty() ? key : where + "." + key;
  }

  bool as_string(const json& v, const std::string& where, std::string* out) {
    if (!v.is_string()) return fail(where, std::string("expected a string, got ") + type_name(v));
    *out = v.get<std::string>();
    return true;
  }
  bool as_u64(const json& v, const std::string& where, uint64_t* out) {
    if (v.is_number_unsigned()) {
      *out = v.get<uint64_t>();
      return true;
    }
    if (v.is_number_integer()) return fail(where, "expected an unsigned integer, got a negative one");
    return fail(where, std::string("expected an unsigned integer, got ") + type_name(v));
  }
  bool as_u32(const json& v, const std::string& where, uint32_t* out) {
    uint64_t wide = 0;
    if (!as_u64(v, where, &wide)) return false;
    if (wide > std::numeric_limits<uint32_t>::max())
      return fail(where, "value " + std::to_string(wide) + " does not fit in 32 bits");
    *out = static_cast<uint32_t>(wide);
    return true;
  }
  bool as_hex_u64(const json& v, const std::string& where, uint64_t* out) {
    std::string text;
    if (!as_string(v, where, &text)) return false;
    if (text.size() < 3 || text.size() > 18 || text[0] != '0' || text[1] != 'x')
      return fail(where, "expected a hex string \"0x...\" of at most 16 digits");
    uint64_t value = 0;
    for (size_t i = 2; i < text.size(); ++i) {
      char ch = text[i];
      int digit = ch >= '0' && ch <= '9'   ? ch - '0'
                  : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                  : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                           : -1;
      if (digit < 0) return fail(where, "invalid hex digit in " + shown_value(text));
      value = value << 4 | static_cast<uint64_t>(digit);
    }
    *out = value;
    return true;
  }
  bool as_array(const json& v, const std::string& where) {
    if (!v.is_array()) return fail(where, std::string("expected an array, got ") + type_name(v));
    return true;
  }
  bool as_object(const json& v, const std::string& where) {
    if (!v.is_object()) return fail(where, std::string("expected an object, got ") + type_name(v));
    return true;
  }

  template <class F>
  bool with_field(const json& object, const char* key, const std::string& where, F&& read) {
    const json* v = field(object, key, where);
    return v && read(*v, join(where, key));
  }
  bool string_field(const json& o, const char* key, const std::string& where, std::string* out) {
    return with_field(o, key, where, [&](const json& v, const std::string& w) { return as_string(v, w, out); });
  }
  bool u64_field(const json& o, const char* key, const std::string& where, uint64_t* out) {
    return with_field(o, key, where, [&](const json& v, const std::string& w) { return as_u64(v, w, out); });
  }
  bool u32_field(const json& o, const char* key, const std::string& where, uint32_t* out) {
    return with_field(o, key, where, [&](const json& v, const std::string& w) { return as_u32(v, w, out); });
  }
  bool hex_field(const json& o, const char* key, const std::string& where, uint64_t* out) {
    return with_field(o, key, where, [&](const json& v, const std::string& w) { return as_hex_u64(v, w, out); });
  }

  bool parse_header(const json& root, Capture& c) {
    std::string format;
    if (!string_field(root, "format", "", &format)) return false;
    if (format != kCaptureFormatName)
      return fail("format", "not a gsymprof capture (format is " + shown_value(format) + ")");
    const json* version = field(root, "version", "");
    if (!version) return false;
    uint64_t v = 0;
    if (!as_u64(*version, "version", &v)) return false;
    if (v != static_cast<uint64_t>(kCaptureFormatVersion))
      return fail("version", "unsupported capture version " + std::to_string(v) +
                                 " (this gsymprof reads version " +
                                 std::to_string(kCaptureFormatVersion) + ")");
    if (!string_field(root, "host", "", &c.host) ||
        !string_field(root, "kernel_release", "", &c.kernel_release) ||
        !u32_field(root, "frequency_hz", "", &c.frequency_hz) ||
        !u64_field(root, "start_time_unix_ns", "", &c.start_time_unix_ns) ||
        !u64_field(root, "duration_ns", "", &c.duration_ns) ||
        !string_field(root, "call_graph", "", &c.call_graph) ||
        !u64_field(root, "samples", "", &c.samples))
      return false;
    if (c.call_graph.empty()) return fail("call_graph", "must not be empty");
    const json* lost = field(root, "lost", "");
    if (!lost || !as_object(*lost, "lost")) return false;
    for (const auto& [reason, count] : lost->items()) {
      if (reason.empty()) return fail("lost", "empty reason name");
      if (!as_u64(count, "lost." + shown_value(reason), &c.lost[reason])) return false;
    }
    return true;
  }

  bool parse_modules(const json& root, Capture& c) {
    const json* modules = field(root, "modules", "");
    if (!modules || !as_array(*modules, "modules")) return false;
    if (modules->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      return fail("modules", "too many modules");
    for (size_t i = 0; i < modules->size(); ++i) {
      const std::string where = "modules[" + std::to_string(i) + "]";
      const json& m = (*modules)[i];
      if (!as_object(m, where)) return false;
      CaptureModule module;
      std::string build_id_hex;
      if (!string_field(m, "path", where, &module.path) ||
          !string_field(m, "build_id", where, &build_id_hex) ||
          !hex_field(m, "load_bias", where, &module.load_bias) ||
          !string_field(m, "error", where, &module.error))
        return false;
      auto build_id = BuildId::from_hex(build_id_hex);
      if (!build_id) return fail(where + ".build_id", "not an even-length hex string");
      if (build_id->bytes().size() > 64) return fail(where + ".build_id", "longer than 64 bytes");
      module.build_id = *build_id;
      const json* mappings = field(m, "mappings", where);
      if (!mappings || !as_array(*mappings, where + ".mappings")) return false;
      for (size_t j = 0; j < mappings->size(); ++j) {
        const std::string mw = where + ".mappings[" + std::to_string(j) + "]";
        const json& jm = (*mappings)[j];
        if (!as_object(jm, mw)) return false;
        ModuleMapping mapping;
        if (!hex_field(jm, "start", mw, &mapping.start) || !hex_field(jm, "end", mw, &mapping.end) ||
            !hex_field(jm, "file_offset", mw, &mapping.file_offset) ||
            !string_field(jm, "perms", mw, &mapping.perms))
          return false;
        if (mapping.start >= mapping.end) return fail(mw, "start is not below end");
        module.mappings.push_back(std::move(mapping));
      }
      c.modules.push_back(std::move(module));
    }
    return true;
  }

  bool parse_processes(const json& root, Capture& c) {
    const json* processes = field(root, "processes", "");
    if (!processes || !as_array(*processes, "processes")) return false;
    std::set<uint32_t> pids;
    for (size_t i = 0; i < processes->size(); ++i) {
      const std::string where = "processes[" + std::to_string(i) + "]";
      const json& p = (*processes)[i];
      if (!as_object(p, where)) return false;
      CaptureProcess process;
      if (!u32_field(p, "pid", where, &process.pid) || !string_field(p, "comm", where, &process.comm))
        return false;
      if (!pids.insert(process.pid).second)
        return fail(where + ".pid", "duplicate process " + std::to_string(process.pid));
      const json* modules = field(p, "modules", where);
      if (!modules || !as_array(*modules, where + ".modules")) return false;
      for (size_t j = 0; j < modules->size(); ++j) {
        const std::string mw = where + ".modules[" + std::to_string(j) + "]";
        uint32_t index = 0;
        if (!as_u32((*modules)[j], mw, &index)) return false;
        if (index >= c.modules.size())
          return fail(mw, "module index " + std::to_string(index) + " out of range (" +
                              std::to_string(c.modules.size()) + " modules)");
        process.modules.push_back(index);
      }
      c.processes.push_back(std::move(process));
    }
    return true;
  }

  bool parse_frame(const json& f, const std::string& where, const std::set<uint32_t>& allowed,
                   const Capture& c, CaptureFrame* frame) {
    if (!as_object(f, where)) return false;
    if (!hex_field(f, "address", where, &frame->address)) return false;
    bool has_module = f.contains("module"), has_reason = f.contains("unresolved");
    if (has_module == has_reason)
      return fail(where, "a frame needs exactly one of \"module\" and \"unresolved\"");
    if (has_module) {
      uint32_t index = 0;
      if (!as_u32(f["module"], where + ".module", &index)) return false;
      if (index >= c.modules.size())
        return fail(where + ".module", "module index " + std::to_string(index) +
                                           " out of range (" + std::to_string(c.modules.size()) +
                                           " modules)");
      if (!allowed.count(index))
        return fail(where + ".module",
                    "module " + std::to_string(index) + " is not a module of the stack's process");
      frame->module = static_cast<int32_t>(index);
      frame->reason = UnresolvedReason::None;
      return true;
    }
    std::string name;
    if (!as_string(f["unresolved"], where + ".unresolved", &name)) return false;
    if (!parse_unresolved_reason(name, &frame->reason) || frame->reason == UnresolvedReason::None)
      return fail(where + ".unresolved", "unknown reason " + shown_value(name));
    frame->module = -1;
    return true;
  }

  bool parse_stacks(const json& root, Capture& c) {
    const json* stacks = field(root, "stacks", "");
    if (!stacks || !as_array(*stacks, "stacks")) return false;
    std::map<uint32_t, std::set<uint32_t>> modules_of;
    for (const CaptureProcess& p : c.processes)
      modules_of[p.pid].insert(p.modules.begin(), p.modules.end());
    uint64_t total = 0;
    for (size_t i = 0; i < stacks->size(); ++i) {
      const std::string where = "stacks[" + std::to_string(i) + "]";
      const json& s = (*stacks)[i];
      if (!as_object(s, where)) return false;
      CaptureStack stack;
      if (!u32_field(s, "pid", where, &stack.pid) || !string_field(s, "comm", where, &stack.comm) ||
          !u64_field(s, "count", where, &stack.count))
        return false;
      if (stack.count == 0) return fail(where + ".count", "must be at least 1");
      if (total > std::numeric_limits<uint64_t>::max() - stack.count)
        return fail(where + ".count", "sample counts overflow 64 bits");
      total += stack.count;
      auto process = modules_of.find(stack.pid);
      if (process == modules_of.end())
        return fail(where + ".pid", "process " + std::to_string(stack.pid) + " is not in \"processes\"");
      const json* truncated = field(s, "truncated", where);
      if (!truncated) return false;
      if (!truncated->is_boolean())
        return fail(where + ".truncated", std::string("expected a boolean, got ") + type_name(*truncated));
      stack.truncated = truncated->get<bool>();
      const json* frames = field(s, "frames", where);
      if (!frames || !as_array(*frames, where + ".frames")) return false;
      stack.frames.resize(frames->size());
      for (size_t j = 0; j < frames->size(); ++j)
        if (!parse_frame((*frames)[j], where + ".frames[" + std::to_string(j) + "]", process->second,
                         c, &stack.frames[j]))
          return false;
      c.stacks.push_back(std::move(stack));
    }
    if (total != c.samples)
      return fail("samples", std::to_string(c.samples) + " does not equal the sum of stack counts (" +
                                 std::to_string(total) + ")");
    return true;
  }
};

auto mapping_key(const ModuleMapping& m) { return std::tie(m.start, m.end, m.file_offset, m.perms); }

bool module_less(const CaptureModule& a, const CaptureModule& b) {
  if (a.path != b.path) return a.path < b.path;
  if (a.build_id != b.build_id) return a.build_id < b.build_id;
  if (a.load_bias != b.load_bias) return a.load_bias < b.load_bias;
  if (a.error != b.error) return a.error < b.error;
  return std::lexicographical_compare(
      a.mappings.begin(), a.mappings.end(), b.mappings.begin(), b.mappings.end(),
      [](const ModuleMapping& x, const ModuleMapping& y) { return mapping_key(x) < mapping_key(y); });
}

bool module_equal(const CaptureModule& a, const CaptureModule& b) {
  return !module_less(a, b) && !module_less(b, a);
}

}  // namespace

const char* to_string(UnresolvedReason reason) { return unresolved_reason_name(reason); }

const char* unresolved_reason_name(UnresolvedReason reason) {
  for (const ReasonName& r : kReasonNames)
    if (r.reason == reason) return r.name;
  return "unknown";
}

bool parse_unresolved_reason(std::string_view name, UnresolvedReason* reason) {
  for (const ReasonName& r : kReasonNames)
    if (name == r.name) {
      *reason = r.reason;
      return true;
    }
  return false;
}

void canonicalize(Capture& capture) {
  // Modules: sorted, identical entries (e.g. a forked child's) merged.
  for (CaptureModule& m : capture.modules)
    std::sort(m.mappings.begin(), m.mappings.end(),
              [](const ModuleMapping& x, const ModuleMapping& y) { return mapping_key(x) < mapping_key(y); });
  std::vector<size_t> order(capture.modules.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return module_less(capture.modules[a], capture.modules[b]);
  });
  std::vector<CaptureModule> modules;
  std::vector<int32_t> new_index(capture.modules.size(), -1);
  for (size_t old : order) {
    if (modules.empty() || !module_equal(modules.back(), capture.modules[old]))
      modules.push_back(std::move(capture.modules[old]));
    new_index[old] = static_cast<int32_t>(modules.size() - 1);
  }
  capture.modules = std::move(modules);
  auto remap = [&](int64_t old) -> int32_t {
    return old >= 0 && static_cast<size_t>(old) < new_index.size() ? new_index[old] : -1;
  };

  for (CaptureProcess& p : capture.processes) {
    for (uint32_t& m : p.modules) m = static_cast<uint32_t>(remap(m));
    std::sort(p.modules.begin(), p.modules.end());
    p.modules.erase(std::unique(p.modules.begin(), p.modules.end()), p.modules.end());
  }
  std::stable_sort(capture.processes.begin(), capture.processes.end(),
                   [](const CaptureProcess& a, const CaptureProcess& b) {
                     return std::tie(a.pid, a.comm) < std::tie(b.pid, b.comm);
                   });

  for (CaptureStack& s : capture.stacks)
    for (CaptureFrame& f : s.frames)
      if (f.module >= 0) f.module = remap(f.module);
  auto stack_key = [](const CaptureStack& s) { return std::tie(s.pid, s.comm, s.frames, s.truncated); };
  std::sort(capture.stacks.begin(), capture.stacks.end(),
            [&](const CaptureStack& a, const CaptureStack& b) { return stack_key(a) < stack_key(b); });
  std::vector<CaptureStack> merged;
  for (CaptureStack& s : capture.stacks) {
    if (!merged.empty() && stack_key(merged.back()) == stack_key(s)) merged.back().count += s.count;
    else merged.push_back(std::move(s));
  }
  capture.stacks = std::move(merged);
}

std::string capture_to_json(const Capture& input) {
  Capture c = input;
  canonicalize(c);
  // Header fields one per line, then one module / process / stack per line:
  // readable, diffable, and far smaller than fully indented JSON.
  // ordered_json keeps the documented field order.
  using ojson = nlohmann::ordered_json;
  // Bytes that are not UTF-8 (possible in paths and comm) become U+FFFD
  // rather than making the write fail.
  auto dump = [](const ojson& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); };
  std::string out = "{\n";
  auto field = [&](const char* key, const ojson& value) {
    out += "\"" + std::string(key) + "\": " + dump(value) + ",\n";
  };
  field("format", kCaptureFormatName);
  field("version", kCaptureFormatVersion);
  field("host", c.host);
  field("kernel_release", c.kernel_release);
  field("frequency_hz", c.frequency_hz);
  field("start_time_unix_ns", c.start_time_unix_ns);
  field("duration_ns", c.duration_ns);
  field("call_graph", c.call_graph);
  field("samples", c.samples);
  ojson lost = ojson::object();
  for (const auto& [reason, count] : c.lost) lost[reason] = count;  // std::map: sorted
  field("lost", lost);

  auto list = [&](const char* key, const std::vector<ojson>& items, bool last) {
    out += "\"" + std::string(key) + "\": [";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ",\n  " : "\n  ") + dump(items[i]);
    out += items.empty() ? "]" : "\n]";
    out += last ? "\n" : ",\n";
  };

  std::vector<ojson> modules;
  for (const CaptureModule& m : c.modules) {
    ojson mappings = ojson::array();
    for (const ModuleMapping& map : m.mappings)
      mappings.push_back({{"start", hex_u64(map.start)},
                          {"end", hex_u64(map.end)},
                          {"file_offset", hex_u64(map.file_offset)},
                          {"perms", map.perms}});
    modules.push_back({{"path", m.path},
                       {"build_id", m.build_id.hex()},
                       {"load_bias", hex_u64(m.load_bias)},
                       {"mappings", std::move(mappings)},
                       {"error", m.error}});
  }
  list("modules", modules, false);

  std::vector<ojson> processes;
  for (const CaptureProcess& p : c.processes)
    processes.push_back({{"pid", p.pid}, {"comm", p.comm}, {"modules", p.modules}});
  list("processes", processes, false);

  std::vector<ojson> stacks;
  for (const CaptureStack& s : c.stacks) {
    ojson frames = ojson::array();
    for (const CaptureFrame& f : s.frames) {
      ojson jf;
      if (f.module >= 0) jf["module"] = f.module;
      else jf["unresolved"] = unresolved_reason_name(f.reason);
      jf["address"] = hex_u64(f.address);
      frames.push_back(std::move(jf));
    }
    stacks.push_back({{"pid", s.pid},
                      {"comm", s.comm},
                      {"count", s.count},
                      {"truncated", s.truncated},
                      {"frames", std::move(frames)}});
  }
  list("stacks", stacks, true);
  out += "}\n";
  return out;
}

gsym::Expected<Capture> capture_from_json(std::string_view text) {
  if (!nesting_within_limit(text))
    return gsym::Error("not a capture: JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    auto pos = what.find("] ");
    return gsym::Error("not valid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  return CaptureParser().parse(root);
}

gsym::Status write_capture_file(const Capture& capture, const std::string& path) {
  return write_file_atomically(path, capture_to_json(capture));
}

gsym::Expected<Capture> read_capture_file(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text) return text.error();
  auto capture = capture_from_json(*text);
  if (!capture) return gsym::Error(path + ": " + capture.error().message);
  return capture;
}

}  // namespace gsymprof
