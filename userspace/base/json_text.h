// userspace/base/json_text.h - JSON text as gsymprof writes it, through
// nlohmann: compact, bytes that are not UTF-8 replaced by U+FFFD, and (for
// output a terminal may show) DEL and the C1 controls \u-escaped too, which
// JSON would allow raw but terminals act on (U+009B is a CSI).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace gsymprof {

// Compact dump of `value`, invalid UTF-8 replaced, DEL and C1 escaped.
std::string terminal_safe_json(const nlohmann::ordered_json& value);

// `text` as one JSON string (quotes included), appended the same way.
void append_terminal_safe_json_string(std::string& out, std::string_view text);

}  // namespace gsymprof
