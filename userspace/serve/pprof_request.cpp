#include "userspace/serve/pprof_request.h"

#include <map>
#include <unordered_map>
#include <vector>

#include "userspace/output/pprof_input.h"
#include "userspace/output/pprof_output.h"
#include "userspace/output/profile.pb.h"
#include "userspace/serve/string_table.h"

namespace gsymprof {
namespace {

namespace pb = perftools::profiles;


struct MappingInfo {
  std::optional<BuildId> build_id;  // nullopt: none, or not a GNU build ID's hex
  MappingView view;
  bool all_named = true;
  bool any = false;
};

// The profile's mappings by id, each with its build ID; an error for a
// mapping with id 0, a repeated id or a string index out of the table.
gsym::Expected<std::map<uint64_t, MappingInfo>> checked_mappings(const pb::Profile& profile) {
  const int64_t strings = profile.string_table_size();
  std::map<uint64_t, MappingInfo> mappings;
  for (const pb::Mapping& mapping : profile.mapping()) {
    if (mapping.id() == 0) return gsym::Error("pprof: a mapping with id 0");
    if (mapping.build_id() < 0 || mapping.build_id() >= strings || mapping.filename() < 0 || mapping.filename() >= strings)
      return gsym::Error("pprof: mapping " + std::to_string(mapping.id()) + " refers to a missing string");
    MappingInfo info;
    info.build_id = parse_request_build_id(profile.string_table(static_cast<int>(mapping.build_id())));
    info.view = {mapping.memory_start(), mapping.memory_limit(), mapping.file_offset()};
    if (!mappings.emplace(mapping.id(), info).second)
      return gsym::Error("pprof: two mappings with id " + std::to_string(mapping.id()));
  }
  return mappings;
}

// The first function id past the profile's own; an error for a function
// with id 0 or a string index out of the table.
gsym::Expected<uint64_t> checked_functions(const pb::Profile& profile) {
  const int64_t strings = profile.string_table_size();
  uint64_t next_function = 1;
  for (const pb::Function& function : profile.function()) {
    if (function.id() == 0) return gsym::Error("pprof: a function with id 0");
    for (int64_t s : {function.name(), function.system_name(), function.filename()})
      if (s < 0 || s >= strings) return gsym::Error("pprof: function " + std::to_string(function.id()) + " refers to a missing string");
    next_function = std::max(next_function, function.id() + 1);
  }
  return next_function;
}

}  // namespace

gsym::Expected<std::string> symbolize_pprof(std::string_view body, uint64_t max_plain_bytes, FrameNamer& namer) {
  std::string plain;
  if (is_gzip(body)) {
    auto inflated = gunzip_bytes(body, max_plain_bytes);
    if (!inflated) return inflated.error();
    plain = std::move(*inflated);
    body = plain;
  }
  pb::Profile profile;
  if (body.size() > static_cast<size_t>(INT32_MAX) || !profile.ParseFromArray(body.data(), static_cast<int>(body.size())))
    return gsym::Error("pprof: not a profile.proto Profile");
  plain.clear();
  plain.shrink_to_fit();
  if (profile.string_table_size() == 0 || !profile.string_table(0).empty())
    return gsym::Error("pprof: string_table[0] must be the empty string");
  gsym::Expected<std::map<uint64_t, MappingInfo>> checked = checked_mappings(profile);
  if (!checked) return checked.error();
  std::map<uint64_t, MappingInfo>& mappings = *checked;
  gsym::Expected<uint64_t> first_free_function = checked_functions(profile);
  if (!first_free_function) return first_free_function.error();
  uint64_t next_function = *first_free_function;

  StringTable table(*profile.mutable_string_table());
  std::unordered_map<FunctionKey, uint64_t, FunctionKeyHash> functions;  // ours, by (name, system name, file)
  std::vector<NamedLine> lines;
  for (pb::Location& location : *profile.mutable_location()) {
    if (location.line_size() > 0) {
      namer.count(FrameOutcome::AlreadyNamed);
      continue;
    }
    auto mapping = mappings.find(location.mapping_id());
    if (location.mapping_id() == 0 || mapping == mappings.end()) {
      if (location.mapping_id() != 0)
        return gsym::Error("pprof: location " + std::to_string(location.id()) + " refers to a missing mapping");
      namer.count(FrameOutcome::NoMapping);
      continue;
    }
    MappingInfo& info = mapping->second;
    info.any = true;
    if (!info.build_id) {
      info.all_named = false;
      namer.count(FrameOutcome::NoBuildId);
      continue;
    }
    const FrameOutcome outcome = namer.name(*info.build_id, info.view, location.address(), lines);
    namer.count(outcome);
    if (outcome != FrameOutcome::Named) {
      info.all_named = false;
      continue;
    }
    for (const NamedLine& named : lines) {
      auto [it, added] = functions.try_emplace(FunctionKey{named.name, named.system_name, named.file}, next_function);
      if (added) {
        pb::Function* function = profile.add_function();
        function->set_id(next_function++);
        function->set_name(table.index(named.name));
        function->set_system_name(table.index(named.system_name.empty() ? named.name : named.system_name));
        function->set_filename(table.index(named.file));
      }
      pb::Line* line = location.add_line();
      line->set_function_id(it->second);
      line->set_line(named.line);
    }
  }
  for (pb::Mapping& mapping : *profile.mutable_mapping()) {
    const MappingInfo& info = mappings[mapping.id()];
    if (!info.any || !info.all_named) continue;
    mapping.set_has_functions(true);
    mapping.set_has_filenames(true);
    mapping.set_has_line_numbers(true);
    mapping.set_has_inline_frames(true);
  }
  std::string out;
  if (!profile.SerializeToString(&out)) return gsym::Error("pprof: the answer could not be serialized");
  return gzip_bytes(out);
}

}  // namespace gsymprof
