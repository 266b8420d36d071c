// userspace/base/text_fields.h - blank-separated fields of a line of /proc
// or perf-map text, taken one at a time without copies.
#pragma once

#include <string_view>

namespace gsymprof {

// Takes the next field of `line` (separated by spaces or tabs); "" at the end.
inline std::string_view next_field(std::string_view& line) {
  size_t begin = line.find_first_not_of(" \t");
  if (begin == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(begin);
  size_t end = line.find_first_of(" \t");
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

}  // namespace gsymprof
