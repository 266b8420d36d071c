#include "userspace/output/pprof_input.h"

#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "gsym/convert/elf_image.h"
#include "userspace/output/profile.pb.h"

namespace gsymprof {
namespace {

namespace pb = perftools::profiles;

// The most a pprof file may decompress to, whatever its size: protobuf
// parses at most 2 GiB, and a profile that large would be a bomb.
constexpr uint64_t kMaxProfileBytes = uint64_t{1} << 30;

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%" PRIx64, value);
  return text;
}

class Reader {
 public:
  explicit Reader(const pb::Profile& profile) : profile_(profile) {}

  gsym::Expected<PprofStacks> read() {
    for (const pb::Mapping& mapping : profile_.mapping()) mappings_.emplace(mapping.id(), &mapping);
    for (const pb::Function& function : profile_.function()) functions_.emplace(function.id(), &function);
    for (const pb::Location& location : profile_.location()) locations_.emplace(location.id(), &location);
    auto index = value_index();
    if (!index) return index.error();
    const int comm_key = string_index("comm");

    std::map<std::string, uint64_t> counts;
    std::string stack;
    for (int s = 0; s < profile_.sample_size(); ++s) {
      const pb::Sample& sample = profile_.sample(s);
      const std::string where = "pprof: sample " + std::to_string(s);
      if (sample.value_size() != profile_.sample_type_size())
        return gsym::Error(where + " has " + std::to_string(sample.value_size()) + " values for " +
                           std::to_string(profile_.sample_type_size()) + " sample types");
      const int64_t value = sample.value(*index);
      if (value < 0) return gsym::Error(where + " has a negative value");
      if (value == 0) continue;
      stack.clear();
      if (comm_key >= 0)
        for (const pb::Label& label : sample.label())
          if (label.key() == comm_key && label.str() != 0) {
            auto comm = text(label.str());
            if (!comm) return gsym::Error(where + ": " + comm.error().message);
            stack = sanitize_folded_name(*comm);
            break;
          }
      for (int i = sample.location_id_size() - 1; i >= 0; --i) {
        auto found = locations_.find(sample.location_id(i));
        if (found == locations_.end())
          return gsym::Error(where + " refers to location " + std::to_string(sample.location_id(i)) +
                             ", which the profile lacks");
        if (auto status = append_location(stack, *found->second); !status) return status.error();
      }
      if (stack.empty()) stack = "[unknown]";
      uint64_t& sum = counts[stack];
      if (sum > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(value))
        return gsym::Error("pprof: sample counts overflow 64 bits");
      sum += static_cast<uint64_t>(value);
    }
    PprofStacks out;
    out.stacks.reserve(counts.size());
    for (auto& [text, count] : counts) out.stacks.push_back({text, count});
    const pb::ValueType& type = profile_.sample_type(*index);
    auto type_name = text(type.type());
    if (!type_name) return type_name.error();
    auto unit = text(type.unit());
    if (!unit) return unit.error();
    out.sample_type = sanitize_folded_name(*type_name + "/" + *unit);
    return out;
  }

 private:
  gsym::Expected<std::string> text(int64_t index) const {
    if (index < 0 || index >= profile_.string_table_size())
      return gsym::Error("pprof: string " + std::to_string(index) + " is not in the string table (" +
                         std::to_string(profile_.string_table_size()) + " strings)");
    return profile_.string_table(static_cast<int>(index));
  }

  // The string table's index of `wanted`, or -1 (index 0 is "").
  int string_index(const std::string& wanted) const {
    for (int i = 1; i < profile_.string_table_size(); ++i)
      if (profile_.string_table(i) == wanted) return i;
    return -1;
  }

  // "samples", else the default sample type, else the last.
  gsym::Expected<int> value_index() const {
    const int types = profile_.sample_type_size();
    if (types == 0) return gsym::Error("pprof: the profile has no sample types");
    std::vector<std::string> names;
    for (int i = 0; i < types; ++i) {
      auto name = text(profile_.sample_type(i).type());
      if (!name) return name.error();
      names.push_back(*name);
    }
    std::string wanted = "samples";
    if (std::find(names.begin(), names.end(), wanted) == names.end() && profile_.default_sample_type() != 0) {
      auto name = text(profile_.default_sample_type());
      if (!name) return name.error();
      wanted = *name;
    }
    auto found = std::find(names.begin(), names.end(), wanted);
    return found != names.end() ? static_cast<int>(found - names.begin()) : types - 1;
  }

  static void append_frame(std::string& stack, const std::string& name) {
    if (!stack.empty()) stack += ';';
    stack += name;
  }

  gsym::Status append_location(std::string& stack, const pb::Location& location) const {
    const pb::Mapping* mapping = nullptr;
    if (location.mapping_id() != 0) {
      auto found = mappings_.find(location.mapping_id());
      if (found == mappings_.end())
        return gsym::Error("pprof: location " + std::to_string(location.id()) + " refers to mapping " +
                           std::to_string(location.mapping_id()) + ", which the profile lacks");
      mapping = found->second;
    }
    std::string file;
    if (mapping) {
      auto name = text(mapping->filename());
      if (!name) return name.error();
      file = *name;
    }
    const std::string suffix = file == "[kernel.kallsyms]" ? "_[k]" : "";
    if (location.line_size() == 0) {
      const size_t slash = file.rfind('/');
      const std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
      if (!mapping || base.empty()) {
        append_frame(stack, hex(location.address()));
      } else {
        const uint64_t offset = location.address() - mapping->memory_start() + mapping->file_offset();
        append_frame(stack, sanitize_folded_name(base + "+" + hex(offset)) + suffix);
      }
      return gsym::Status::success();
    }
    // Lines are innermost first: the outermost, the concrete function, is last.
    for (int i = location.line_size() - 1; i >= 0; --i) {
      auto found = functions_.find(location.line(i).function_id());
      if (found == functions_.end())
        return gsym::Error("pprof: location " + std::to_string(location.id()) + " refers to function " +
                           std::to_string(location.line(i).function_id()) + ", which the profile lacks");
      auto name = text(found->second->name());
      if (!name) return name.error();
      if (name->empty()) {
        name = text(found->second->system_name());
        if (!name) return name.error();
      }
      std::string frame = sanitize_folded_name(name->empty() ? "[unknown]" : *name);
      if (i != location.line_size() - 1) frame += "_[i]";
      frame += suffix;
      append_frame(stack, frame);
    }
    return gsym::Status::success();
  }

  const pb::Profile& profile_;
  std::unordered_map<uint64_t, const pb::Mapping*> mappings_;
  std::unordered_map<uint64_t, const pb::Function*> functions_;
  std::unordered_map<uint64_t, const pb::Location*> locations_;
};

}  // namespace

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b;
}

gsym::Expected<PprofStacks> folded_from_pprof(std::string_view bytes) {
  std::string inflated;
  if (is_gzip(bytes)) {
    auto plain = gunzip_bytes(bytes, kMaxProfileBytes);
    if (!plain) return plain.error();
    inflated = std::move(*plain);
    bytes = inflated;
  }
  if (bytes.size() > kMaxProfileBytes) return gsym::Error("pprof: profile too large");
  pb::Profile profile;
  if (!profile.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return gsym::Error("pprof: not a profile.proto message");
  return Reader(profile).read();
}

gsym::Expected<std::string> gunzip_bytes(std::string_view bytes, uint64_t max_bytes) {
  if (bytes.size() > std::numeric_limits<uInt>::max()) return gsym::Error("pprof: file too large");
  const uint64_t bound = std::min({gsym::decompressed_bound(bytes.size()), kMaxProfileBytes, max_bytes});
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) return gsym::Error("pprof: cannot start gunzip");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char buffer[65536];
  int status = Z_OK;
  for (;;) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    status = inflate(&stream, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) break;
    const size_t produced = sizeof buffer - stream.avail_out;
    if (out.size() + produced > bound) {
      inflateEnd(&stream);
      return gsym::Error("pprof: decompresses to more than " + std::to_string(bound) + " bytes (limit for " +
                         std::to_string(bytes.size()) + " compressed)");
    }
    out.append(buffer, produced);
    if (status == Z_STREAM_END) {
      // Concatenated gzip members (gzip allows them) are read as one.
      if (stream.avail_in == 0) break;
      if (inflateReset(&stream) != Z_OK) break;
      continue;
    }
  }
  inflateEnd(&stream);
  if (status != Z_STREAM_END)
    return gsym::Error(std::string("pprof: gzip data ") + (status == Z_BUF_ERROR ? "truncated" : "corrupt"));
  return out;
}


}  // namespace gsymprof
