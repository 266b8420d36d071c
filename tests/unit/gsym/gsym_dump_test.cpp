// gsym::write_dump: the text of every section for a small file, the caller's
// text filter applied to names and paths, and a malformed record dumped as
// its error with the dump going on.
#include <doctest/doctest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/reader/dump.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

std::vector<uint8_t> small_gsym() {
  Builder b;
  const uint32_t file = b.add_file({"/src", "a.c"});
  Function f;
  f.range = {0x1000, 0x1010};
  f.name = "outer";
  f.lines = {{0x1000, file, 3}, {0x1008, file, 4}};
  InlineNode root;
  root.ranges = {{0x1000, 0x1010}};
  root.name = "outer";
  InlineNode child;
  child.ranges = {{0x1004, 0x1008}};
  child.name = "in\x01line";
  child.call_file = file;
  child.call_line = 9;
  root.children.push_back(child);
  f.inline_tree = root;
  REQUIRE(b.add_function(f).ok());
  Function g;
  g.range = {0x1010, 0x1014};
  g.name = "g";
  REQUIRE(b.add_function(g).ok());
  auto bytes = b.encode();
  REQUIRE(bytes.ok());
  return *bytes;
}

}  // namespace

TEST_CASE("dump: header, tables and records; names through the text filter") {
  const std::vector<uint8_t> bytes = small_gsym();
  auto reader = Reader::parse(bytes);
  REQUIRE(reader.ok());
  std::ostringstream out;
  DumpOptions options;
  options.append_text = [](std::string& text, std::string_view s) {
    for (char c : s) text += c == '\x01' ? std::string("<01>") : std::string(1, c);
  };
  REQUIRE(write_dump(*reader, out, options).ok());
  const std::string text = out.str();
  CHECK(text.starts_with("Header:\n  Magic        = 0x4753594d (little-endian)\n"));
  CHECK(text.find("\n\nAddress Table:\nINDEX  OFFSET (ADDRESS)\n[   0] 0x00 (0x0000000000001000)\n"
                  "[   1] 0x10 (0x0000000000001010)\n") != std::string::npos);
  CHECK(text.find("\nFiles:\nINDEX  PATH\n[   0] \n[   1] /src/a.c\n\n") != std::string::npos);
  CHECK(text.find("FunctionInfo[0]: [0x0000000000001000 - 0x0000000000001010) \"outer\"\n"
                  "LineTable:\n  0x0000000000001000 /src/a.c:3\n  0x0000000000001008 /src/a.c:4\n"
                  "InlineInfo:\n[0x0000000000001000 - 0x0000000000001010) outer\n"
                  "  [0x0000000000001004 - 0x0000000000001008) in<01>line called from /src/a.c:9\n") !=
        std::string::npos);
  CHECK(text.ends_with("FunctionInfo[1]: [0x0000000000001010 - 0x0000000000001014) \"g\"\n"));
}

TEST_CASE("dump: a record that does not decode is dumped as its error, the first one returned") {
  std::vector<uint8_t> bytes = small_gsym();
  auto reader = Reader::parse(bytes);
  REQUIRE(reader.ok());
  // Corrupt the second record's first InfoType (after Size and Name).
  const uint64_t info_offsets = (48 + 2 * reader->header().addr_off_size + 3) & ~uint64_t{3};
  uint32_t second;
  std::memcpy(&second, bytes.data() + info_offsets + 4, 4);
  bytes[second + 8] = 9;  // an unknown InfoType: an error for the full decode
  reader = Reader::parse(bytes);
  REQUIRE(reader.ok());
  std::ostringstream out;
  const Status status = write_dump(*reader, out);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.starts_with("function[1] at 0x1010: unsupported InfoType 9 at offset "));
  CHECK(out.str().find("FunctionInfo[1] @ 0x0000000000001010: error: unsupported InfoType 9") !=
        std::string::npos);
  CHECK(out.str().find("FunctionInfo[0]: ") != std::string::npos);
}
