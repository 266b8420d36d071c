#include "userspace/export/otlp_profiles.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "userspace/base/text_escape.h"
#include "userspace/output/frame_chains.h"
#include "userspace/output/mapping_numbers.h"

namespace gsymprof {
namespace {

namespace otlp = opentelemetry::proto::profiles::v1development;
namespace otlp_common = opentelemetry::proto::common::v1;
using opentelemetry::proto::collector::profiles::v1development::ExportProfilesServiceRequest;

// proto3 strings must be UTF-8: a receiver written in Go refuses the whole
// request otherwise, and comm, paths and symbol names are arbitrary bytes.
// Bytes that are not UTF-8 become \xHH; valid text is kept as it is.
std::string utf8_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t code_point = 0;
    const size_t length = decode_utf8(text, i, &code_point);
    if (length == 0) {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned char>(text[i]));
      out += escaped;
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

// A sample attribute's value: a string, or an integer (pid, tid).
struct AttributeValue {
  bool is_int = false;
  int64_t number = 0;
  std::string text;
  auto operator<=>(const AttributeValue&) const = default;
};

// One value type: a Profile of its own (sample_type is a single ValueType).
struct ValueKind {
  const char* type;
  const char* unit;
  uint64_t (*value)(const Capture& capture, const CaptureStack& stack);
};

uint64_t period_ns(const Capture& capture) { return capture.frequency_hz ? 1000000000ull / capture.frequency_hz : 0; }
uint64_t sampled_count(const Capture&, const CaptureStack& stack) { return stack.count; }
uint64_t cpu_ns(const Capture& capture, const CaptureStack& stack) {
  return stack.off_cpu == OffCpuReason::None ? stack.count * period_ns(capture) : 0;
}
uint64_t off_cpu_ns(const Capture&, const CaptureStack& stack) { return stack.off_cpu_ns; }
uint64_t weight(const Capture& capture, const CaptureStack& stack) { return stack_weight(capture, stack); }

// The value types of a clock, the main view first (the proto: tools show
// profiles[0] by default), as pprof_output names them.
std::vector<ValueKind> value_kinds(ProfileClock clock) {
  switch (clock) {
    case ProfileClock::Cpu:
      return {{"cpu", "nanoseconds", cpu_ns}, {"samples", "count", sampled_count}};
    case ProfileClock::OffCpu:
      return {{"off_cpu", "nanoseconds", off_cpu_ns}, {"waits", "count", sampled_count}};
    case ProfileClock::Wall:
      return {{"wall", "nanoseconds", weight}, {"cpu", "nanoseconds", cpu_ns}, {"off_cpu", "nanoseconds", off_cpu_ns}};
  }
  return {};
}

// A module identity as a mapping attribute. GNU and Go build IDs have
// semantic-convention keys (process.executable.build_id.gnu: hex;
// .go: the Go build ID string as `go tool buildid` prints it). Our third
// kind, SHA-256 of the whole file, is not the convention's .htlhash (a
// hash of the file's head, tail and length), so it goes under our own key.
std::pair<std::string, std::string> identity_attribute(const BuildId& id) {
  switch (id.kind()) {
    case BuildId::Kind::Gnu:
      return {"process.executable.build_id.gnu", id.hex()};
    case BuildId::Kind::Go:
      return {"process.executable.build_id.go",
              std::string(reinterpret_cast<const char*>(id.bytes().data()), id.bytes().size())};
    case BuildId::Kind::ContentSha256:
      return {"gsymprof.executable.sha256", id.hex()};
  }
  return {};
}

class RequestBuilder {
 public:
  RequestBuilder(const Capture& capture, otlp::ProfilesDictionary& dictionary)
      : capture_(capture), dictionary_(dictionary) {
    // Index 0 of every table is its zero value (the proto's MUST).
    string_index("");
    dictionary_.add_mapping_table();
    dictionary_.add_location_table();
    dictionary_.add_function_table();
    otlp::Link* no_link = dictionary_.add_link_table();
    no_link->set_trace_id(std::string(16, '\0'));  // 16 + 8 zero bytes, as the proto recommends
    no_link->set_span_id(std::string(8, '\0'));
    dictionary_.add_attribute_table();
    dictionary_.add_stack_table();
  }

  // Location of frame i of `chains`.
  void add_locations(const FrameChains& chains) {
    frame_locations_.reserve(chains.frames.size());
    for (size_t i = 0; i < chains.frames.size(); ++i)
      frame_locations_.push_back(add_location(chains.frames[i], chains.chains[i], chains.symbolized));
  }

  // The stack of a capture stack: leaf first, the off-CPU reason and the
  // "[short waits]" marker leafward, "[truncated]" at the root.
  int32_t stack_index(const CaptureStack& stack, const std::map<CaptureFrame, uint32_t>& frame_numbers) {
    std::vector<int32_t> locations;
    for_each_stack_entry(
        stack, frame_numbers, [&](uint32_t number) { locations.push_back(frame_locations_[number]); },
        [&](const std::string& marker) { locations.push_back(marker_location(marker)); });
    auto [it, added] = stack_indexes_.try_emplace(locations, dictionary_.stack_table_size());
    if (added) {
      otlp::Stack* entry = dictionary_.add_stack_table();
      for (int32_t location : locations) entry->add_location_indices(location);
    }
    return it->second;
  }

  int32_t attribute_index(const std::string& key, const AttributeValue& value) {
    const int32_t key_index = string_index(key);
    auto [it, added] = attribute_indexes_.try_emplace(std::pair(key_index, value), dictionary_.attribute_table_size());
    if (added) {
      otlp::KeyValueAndUnit* entry = dictionary_.add_attribute_table();
      entry->set_key_strindex(key_index);
      if (value.is_int) entry->mutable_value()->set_int_value(value.number);
      else entry->mutable_value()->set_string_value(utf8_text(value.text));
    }
    return it->second;
  }

  int32_t string_index(const std::string& text) {
    auto [it, added] = string_indexes_.try_emplace(text, dictionary_.string_table_size());
    if (added) dictionary_.add_string_table(utf8_text(text));
    return it->second;
  }

 private:
  int32_t add_location(const CaptureFrame& frame, const std::vector<uint32_t>& chain, const SymbolizeResult& result) {
    const int32_t index = dictionary_.location_table_size();
    otlp::Location* location = dictionary_.add_location_table();
    // No mapping for JIT, Python and unknown frames: no file holds their code.
    const uint64_t address = runtime_address(capture_, frame);
    const int32_t mapping = frame.kernel ? kernel_mapping_index() : frame.module >= 0 ? mapping_index(frame.module, address) : 0;
    location->set_mapping_index(mapping);
    location->set_address(address);
    // profile.frame.type (semantic conventions): native code from a file,
    // the kernel, or CPython's interpreter. JIT frames have none: which
    // runtime wrote the perf map is not known, and the convention has no
    // generic JIT type.
    const char* frame_type = frame.kernel ? "kernel" : frame.python >= 0 ? "cpython" : frame.module >= 0 ? "native" : nullptr;
    if (frame_type) location->add_attribute_indices(attribute_index("profile.frame.type", {false, 0, frame_type}));
    // A frame of a known mapping without a name gets no lines: the address
    // and the mapping's build ID are what a backend symbolizer needs, and a
    // made-up name would stop it from trying (--symbolize none).
    if (mapping != 0 && chain.size() == 1 && result.frames[chain.front()].kind == FrameKind::ModuleOffset)
      return index;
    // symbolize() gives the chain root first; the proto wants it innermost first.
    for (auto id = chain.rbegin(); id != chain.rend(); ++id) {
      const SymbolizedFrame& named = result.frames[*id];
      otlp::Line* line = location->add_lines();
      line->set_function_index(function_index(named));
      line->set_line(named.line);
    }
    return index;
  }

  // The executable mapping of `module` holding `runtime` (0: none).
  int32_t mapping_index(int32_t module_index, uint64_t runtime) {
    return mapping_indexes_.of(capture_, module_index, runtime, dictionary_.mapping_table_size(),
                               [&](const CaptureModule& module, const ModuleMapping& range) {
                                 add_mapping(range.start, range.end, range.file_offset, module.path, module.build_id);
                               });
  }

  // One mapping for every kernel frame, over the kernel addresses sampled,
  // named as perf names the kernel, with the recording kernel's build ID.
  int32_t kernel_mapping_index() {
    if (kernel_mapping_ == 0) {
      const auto [start, limit] = kernel_address_range(capture_);
      kernel_mapping_ = dictionary_.mapping_table_size();
      add_mapping(start, limit, 0, kKernelModulePath, capture_.kernel.build_id);
    }
    return kernel_mapping_;
  }

  void add_mapping(uint64_t start, uint64_t limit, uint64_t file_offset, const std::string& path, const BuildId& id) {
    otlp::Mapping* mapping = dictionary_.add_mapping_table();
    mapping->set_memory_start(start);
    mapping->set_memory_limit(limit);
    mapping->set_file_offset(file_offset);
    mapping->set_filename_strindex(string_index(path));
    if (!id.empty()) {
      auto [key, value] = identity_attribute(id);
      mapping->add_attribute_indices(attribute_index(key, {false, 0, value}));
    }
  }

  int32_t function_index(const SymbolizedFrame& frame) {
    auto [it, added] = function_indexes_.try_emplace(
        std::tuple(frame.name, frame.system_name, frame.file, frame.start_line), dictionary_.function_table_size());
    if (added) {
      otlp::Function* function = dictionary_.add_function_table();
      function->set_name_strindex(string_index(frame.name));
      // The raw (mangled) name, as the proto defines system_name.
      function->set_system_name_strindex(string_index(frame.system_name.empty() ? frame.name : frame.system_name));
      function->set_filename_strindex(string_index(frame.file));
      function->set_start_line(frame.start_line);
    }
    return it->second;
  }

  // A location of its own for a frame no code has: "[truncated]" at the
  // root of a cut stack, why a thread was off the CPU at its leaf.
  int32_t marker_location(const std::string& name) {
    auto [it, added] = marker_indexes_.try_emplace(name, 0);
    if (added) {
      it->second = dictionary_.location_table_size();
      dictionary_.add_location_table()->add_lines()->set_function_index(function_index(marker_frame(name)));
    }
    return it->second;
  }

  const Capture& capture_;
  otlp::ProfilesDictionary& dictionary_;
  std::vector<int32_t> frame_locations_;  // by frame number (frame_chains.h)
  std::unordered_map<std::string, int32_t> string_indexes_;
  std::map<std::pair<int32_t, AttributeValue>, int32_t> attribute_indexes_;
  MappingNumbers<int32_t> mapping_indexes_;
  std::map<std::tuple<std::string, std::string, std::string, uint32_t>, int32_t> function_indexes_;
  std::map<std::string, int32_t> marker_indexes_;
  std::map<std::vector<int32_t>, int32_t> stack_indexes_;
  int32_t kernel_mapping_ = 0;
};

// A sample's identity (the proto: stack and attribute set); equal ones are
// one Sample with the values summed.
struct SampleKey {
  int32_t stack = 0;
  std::vector<int32_t> attributes;
  auto operator<=>(const SampleKey&) const = default;
};

// Process labels as attribute keys: the agent's "cgroup" is the semantic
// conventions' process.linux.cgroup; container.id is the resource's.
const char* label_key(const std::string& label) {
  if (label == "cgroup") return "process.linux.cgroup";
  if (label == "container.id") return nullptr;
  return label.c_str();
}

std::string container_of(const CaptureProcess* process) {
  if (process)
    for (const auto& [key, value] : process->labels)
      if (key == "container.id") return value;
  return "";
}


using SamplesByKey = std::map<SampleKey, std::vector<uint64_t>>;  // values by kind

// One ResourceProfiles: the resource, the scope, a Profile per value kind
// that has samples. Returns the Sample messages written.
size_t add_resource(ExportProfilesServiceRequest& request, RequestBuilder& builder, const Capture& capture,
                    const std::vector<ValueKind>& kinds, const std::string& container, const SamplesByKey& samples) {
  auto* resource_profiles = request.add_resource_profiles();
  auto* resource = resource_profiles->mutable_resource();
  auto resource_attribute = [&](const char* key, const std::string& value) {
    otlp_common::KeyValue* attribute = resource->add_attributes();
    attribute->set_key(key);
    attribute->mutable_value()->set_string_value(utf8_text(value));
  };
  if (!container.empty()) resource_attribute("container.id", container);
  if (!capture.host.empty()) resource_attribute("host.name", capture.host);
  auto* scope_profiles = resource_profiles->add_scope_profiles();
  scope_profiles->mutable_scope()->set_name("gsymprof");
  size_t written = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    otlp::Profile profile;
    for (const auto& [key, values] : samples) {
      if (values[k] == 0) continue;  // e.g. an off-CPU stack in the cpu profile of a wall-clock capture
      otlp::Sample* sample = profile.add_samples();
      sample->set_stack_index(key.stack);
      for (int32_t attribute : key.attributes) sample->add_attribute_indices(attribute);
      sample->add_values(static_cast<int64_t>(values[k]));
    }
    if (profile.samples_size() == 0) continue;  // nothing of this kind
    written += static_cast<size_t>(profile.samples_size());
    profile.mutable_sample_type()->set_type_strindex(builder.string_index(kinds[k].type));
    profile.mutable_sample_type()->set_unit_strindex(builder.string_index(kinds[k].unit));
    profile.mutable_period_type()->set_type_strindex(builder.string_index("cpu"));
    profile.mutable_period_type()->set_unit_strindex(builder.string_index("nanoseconds"));
    profile.set_period(static_cast<int64_t>(period_ns(capture)));
    profile.set_time_unix_nano(capture.start_time_unix_ns);
    profile.set_duration_nano(capture.duration_ns);
    *scope_profiles->add_profiles() = std::move(profile);
  }
  return written;
}

}  // namespace

gsym::Expected<OtlpProfilesRequest> otlp_profiles_request(const Capture& capture, GsymLocator& locator,
                                                          const SymbolizeOptions& options) {
  if (capture.modules.size() > INT32_MAX) return gsym::Error("otlp: too many modules");
  SymbolizeOptions chain_options = options;
  chain_options.function_start_lines = true;
  gsym::Expected<FrameChains> chains = symbolize_frames(capture, locator, chain_options);
  if (!chains) return chains.error();

  ExportProfilesServiceRequest request;
  RequestBuilder builder(capture, *request.mutable_dictionary());
  builder.add_locations(*chains);

  std::map<uint32_t, const CaptureProcess*> process_of;
  for (const CaptureProcess& process : capture.processes) process_of.emplace(process.pid, &process);
  const std::vector<ValueKind> kinds = value_kinds(capture.clock);
  // By container.id ("" = none): its samples, each with a value per kind.
  std::map<std::string, SamplesByKey> resources;
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.count == 0) continue;
    auto process = process_of.find(stack.pid);
    const CaptureProcess* labels_of = process != process_of.end() ? process->second : nullptr;
    SampleKey key;
    key.stack = builder.stack_index(stack, chains->numbers);
    std::set<std::string> keys_used;  // a key at most once per sample (the proto)
    auto add = [&](const std::string& name, AttributeValue value) {
      if (keys_used.insert(name).second) key.attributes.push_back(builder.attribute_index(name, value));
    };
    add("thread.name", {false, 0, stack.comm});
    if (stack.tid != 0) add("thread.id", {true, stack.tid, ""});  // 0: a capture without threads
    add("process.pid", {true, stack.pid, ""});
    if (labels_of)
      for (const auto& [label, value] : labels_of->labels)
        if (const char* name = label_key(label)) add(name, {false, 0, value});
    std::vector<uint64_t>& values = resources[container_of(labels_of)][std::move(key)];
    values.resize(kinds.size());
    for (size_t k = 0; k < kinds.size(); ++k) values[k] += kinds[k].value(capture, stack);
  }

  OtlpProfilesRequest out;
  for (const auto& [container, samples] : resources)
    out.samples += add_resource(request, builder, capture, kinds, container, samples);

  {
    google::protobuf::io::StringOutputStream stream(&out.bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!request.SerializeToCodedStream(&coded)) return gsym::Error("otlp: cannot serialize the request");
  }
  return out;
}

}  // namespace gsymprof
