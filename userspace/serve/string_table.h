// userspace/serve/string_table.h - a protobuf string table (pprof's
// Profile.string_table, OTLP's ProfilesDictionary.string_table) that names
// are added to without repeats: index() finds a string or appends it; and
// the key the decoders find their added Functions by (name, system name,
// file: views the request's FrameNamer keeps alive).
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gsymprof {

class StringTable {
 public:
  explicit StringTable(google::protobuf::RepeatedPtrField<std::string>& table) : table_(table) {
    for (int i = 0; i < table.size(); ++i) index_.try_emplace(table.Get(i), i);
  }
  int64_t index(std::string_view text) {
    if (auto it = index_.find(text); it != index_.end()) return it->second;
    const int64_t at = table_.size();
    table_.Add()->assign(text.data(), text.size());
    index_.emplace(std::string(text), at);
    return at;
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  google::protobuf::RepeatedPtrField<std::string>& table_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> index_;
};

struct FunctionKey {
  std::string_view name, system_name, file;
  bool operator==(const FunctionKey&) const = default;
};
struct FunctionKeyHash {
  size_t operator()(const FunctionKey& k) const {
    const std::hash<std::string_view> h;
    return (h(k.name) * 31 + h(k.system_name)) * 31 + h(k.file);
  }
};

}  // namespace gsymprof
