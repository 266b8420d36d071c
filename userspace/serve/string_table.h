// userspace/serve/string_table.h - a protobuf string table (pprof's
// Profile.string_table, OTLP's ProfilesDictionary.string_table) that names
// are added to without repeats: index() finds a string or appends it.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <cstdint>
#include <string>
#include <unordered_map>

namespace gsymprof {

class StringTable {
 public:
  explicit StringTable(google::protobuf::RepeatedPtrField<std::string>& table) : table_(table) {
    for (int i = 0; i < table.size(); ++i) index_.try_emplace(table.Get(i), i);
  }
  int64_t index(const std::string& text) {
    auto [it, added] = index_.try_emplace(text, table_.size());
    if (added) *table_.Add() = text;
    return it->second;
  }

 private:
  google::protobuf::RepeatedPtrField<std::string>& table_;
  std::unordered_map<std::string, int64_t> index_;
};

}  // namespace gsymprof
