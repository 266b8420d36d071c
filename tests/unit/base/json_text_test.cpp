#include <doctest/doctest.h>

#include <string>

#include "userspace/base/json_text.h"

using gsymprof::append_terminal_safe_json_string;
using gsymprof::terminal_safe_json;

namespace {
std::string quoted(std::string_view text) {
  std::string out;
  append_terminal_safe_json_string(out, text);
  return out;
}
}  // namespace

TEST_CASE("json text: plain and UTF-8 text is nlohmann's compact dump") {
  CHECK(quoted("main") == "\"main\"");
  CHECK(quoted("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(quoted("caf\xc3\xa9 \xe2\x82\xac") == "\"caf\xc3\xa9 \xe2\x82\xac\"");
  CHECK(terminal_safe_json({{"k", 1}, {"s", "x"}}) == "{\"k\":1,\"s\":\"x\"}");
}

TEST_CASE("json text: every control a terminal acts on is escaped") {
  CHECK(quoted("a\x1b[31mb\x07") == "\"a\\u001b[31mb\\u0007\"");
  CHECK(quoted("del\x7f") == "\"del\\u007f\"");
  CHECK(quoted("csi\xc2\x9b" "2J") == "\"csi\\u009b2J\"");
  CHECK(quoted("\xc2\x80\xc2\x9f") == "\"\\u0080\\u009f\"");
  // U+00A0 and up stay raw: printable.
  CHECK(quoted("\xc2\xa0") == "\"\xc2\xa0\"");
}

TEST_CASE("json text: bytes that are not UTF-8 become U+FFFD") {
  CHECK(quoted("a\xff" "b") == "\"a\xef\xbf\xbd" "b\"");
  // A lone 0xc2 lead byte is invalid, not the start of a C1 escape.
  CHECK(quoted("x\xc2") == "\"x\xef\xbf\xbd\"");
}
