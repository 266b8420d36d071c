// gsym/format/decode_context.h - what the record decoders need from the file around
// a record: its string table and file count, and for verify() the strict
// reference checks and the counts.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "gsym/base/expected.h"
#include "gsym/format/model.h"  // VerifyReport

namespace gsym::detail {

// The NUL-terminated string at `offset` of a string table ("" past its end,
// as LLVM; a string running to the end of the table stops there).
inline std::string_view string_at(std::string_view strtab, uint64_t offset) {
  if (offset >= strtab.size()) return {};
  const char* begin = strtab.data() + offset;
  const size_t max = strtab.size() - offset;
  const void* nul = std::memchr(begin, 0, max);
  return {begin, nul ? static_cast<size_t>(static_cast<const char*>(nul) - begin) : max};
}

struct DecodeContext {
  std::string_view strtab;
  uint32_t num_files = 0;
  bool strict = false;             // verify(): every reference checked
  VerifyReport* report = nullptr;  // verify(): counts

  std::string_view string(uint64_t offset) const { return string_at(strtab, offset); }

  Status check_string(uint64_t off, uint64_t at) const {
    if (strict && off >= strtab.size())
      return Error("string offset " + hex_number(off) + " is past the string table (size " +
                       hex_number(strtab.size()) + ")",
                   at);
    return {};
  }
  Status check_file(uint64_t index, uint64_t at) const {
    if (strict && index >= num_files)
      return Error("file index " + std::to_string(index) + " is past the file table (" +
                       std::to_string(num_files) + " files)",
                   at);
    return {};
  }
};

}  // namespace gsym::detail
