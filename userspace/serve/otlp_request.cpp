#include "userspace/serve/otlp_request.h"

#include <climits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "userspace/serve/string_table.h"

namespace gsymprof {
namespace {

namespace otlp = opentelemetry::proto::profiles::v1development;


bool in(int32_t index, int size) { return index >= 0 && index < size; }

// The GNU build ID of a mapping: its process.executable.build_id.gnu
// attribute as hex; nullopt when absent or not hex.
gsym::Expected<std::optional<BuildId>> mapping_build_id(const otlp::ProfilesDictionary& dictionary,
                                                        const otlp::Mapping& mapping) {
  std::optional<BuildId> id;
  for (int32_t a : mapping.attribute_indices()) {
    if (!in(a, dictionary.attribute_table_size())) return gsym::Error("otlp: a mapping refers to a missing attribute");
    const otlp::KeyValueAndUnit& attribute = dictionary.attribute_table(a);
    if (!in(attribute.key_strindex(), dictionary.string_table_size()))
      return gsym::Error("otlp: an attribute refers to a missing string");
    if (!id && dictionary.string_table(attribute.key_strindex()) == kGnuBuildIdAttribute &&
        attribute.value().has_string_value())
      id = parse_request_build_id(attribute.value().string_value());
  }
  return id;
}

}  // namespace

gsym::Status symbolize_otlp(otlp_collector::ExportProfilesServiceRequest& request, FrameNamer& namer) {
  otlp::ProfilesDictionary& dictionary = *request.mutable_dictionary();
  const int strings = dictionary.string_table_size();
  for (const otlp::Function& function : dictionary.function_table())
    for (int32_t s : {function.name_strindex(), function.system_name_strindex(), function.filename_strindex()})
      if (!in(s, strings)) return gsym::Error("otlp: a function refers to a missing string");
  std::vector<std::optional<BuildId>> build_ids;
  build_ids.reserve(static_cast<size_t>(dictionary.mapping_table_size()));
  for (const otlp::Mapping& mapping : dictionary.mapping_table()) {
    auto id = mapping_build_id(dictionary, mapping);
    if (!id) return id.error();
    build_ids.push_back(std::move(*id));
  }
  if (strings == 0) dictionary.add_string_table("");  // the zero value, for what is added
  StringTable table(*dictionary.mutable_string_table());
  if (dictionary.function_table_size() == 0) dictionary.add_function_table();  // the zero value
  std::unordered_map<FunctionKey, int32_t, FunctionKeyHash> functions;  // ours, by (name, system name, file)
  std::vector<NamedLine> lines;
  // The zero value at index 0 is not a location.
  for (int l = 1; l < dictionary.location_table_size(); ++l) {
    otlp::Location& location = *dictionary.mutable_location_table(l);
    if (location.lines_size() > 0) {
      for (const otlp::Line& line : location.lines())
        if (!in(line.function_index(), dictionary.function_table_size()))
          return gsym::Error("otlp: a line refers to a missing function");
      namer.count(FrameOutcome::AlreadyNamed);
      continue;
    }
    const int32_t m = location.mapping_index();
    if (m == 0) {
      namer.count(FrameOutcome::NoMapping);
      continue;
    }
    if (!in(m, dictionary.mapping_table_size())) return gsym::Error("otlp: a location refers to a missing mapping");
    const std::optional<BuildId>& id = build_ids[static_cast<size_t>(m)];
    if (!id) {
      namer.count(FrameOutcome::NoBuildId);
      continue;
    }
    const otlp::Mapping& mapping = dictionary.mapping_table(m);
    const MappingView view{mapping.memory_start(), mapping.memory_limit(), mapping.file_offset()};
    const FrameOutcome outcome = namer.name(*id, view, location.address(), lines);
    namer.count(outcome);
    if (outcome != FrameOutcome::Named) continue;
    for (const NamedLine& named : lines) {
      auto [it, added] = functions.try_emplace(FunctionKey{named.name, named.system_name, named.file}, dictionary.function_table_size());
      if (added) {
        if (it->second == INT32_MAX) return gsym::Error("otlp: too many functions");
        otlp::Function* function = dictionary.add_function_table();
        function->set_name_strindex(static_cast<int32_t>(table.index(named.name)));
        function->set_system_name_strindex(static_cast<int32_t>(table.index(named.system_name.empty() ? named.name : named.system_name)));
        function->set_filename_strindex(static_cast<int32_t>(table.index(named.file)));
      }
      otlp::Line* line = location.add_lines();
      line->set_function_index(it->second);
      line->set_line(named.line);
    }
  }
  return gsym::Status::success();
}

gsym::Expected<std::string> symbolize_otlp_bytes(std::string_view body, FrameNamer& namer) {
  otlp_collector::ExportProfilesServiceRequest request;
  if (body.size() > static_cast<size_t>(INT_MAX) || !request.ParseFromArray(body.data(), static_cast<int>(body.size())))
    return gsym::Error("otlp: not an ExportProfilesServiceRequest");
  gsym::Status status = symbolize_otlp(request, namer);
  if (!status) return status.error();
  std::string out;
  if (!request.SerializeToString(&out)) return gsym::Error("otlp: the request could not be serialized again");
  return out;
}

}  // namespace gsymprof
