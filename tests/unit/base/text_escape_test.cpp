// escape_control and decode_utf8: what reaches a terminal or a folded line.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "userspace/base/text_escape.h"

using namespace gsymprof;

TEST_CASE("escape_control: printable text passes through unchanged") {
  CHECK(escape_control("") == "");
  CHECK(escape_control("main") == "main");
  CHECK(escape_control("std::vector<int, std::allocator<int> >::push_back(int const&) ~!@#$%^&*()_+{}|:\"<>?`-=[];',./") ==
        "std::vector<int, std::allocator<int> >::push_back(int const&) ~!@#$%^&*()_+{}|:\"<>?`-=[];',./");
  // Valid non-ASCII UTF-8: 2, 3 and 4 bytes, the first code point after C1,
  // the last of Unicode.
  CHECK(escape_control("/home/j\xc3\xa9r\xc3\xb4me/\xe2\x82\xac/\xf0\x9f\x94\xa5") ==
        "/home/j\xc3\xa9r\xc3\xb4me/\xe2\x82\xac/\xf0\x9f\x94\xa5");
  CHECK(escape_control("\xc2\xa0") == "\xc2\xa0");
  CHECK(escape_control("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");
  // A literal backslash stays as is.
  CHECK(escape_control("C:\\dir\\x1b") == "C:\\dir\\x1b");
}

TEST_CASE("escape_control: C0, DEL and C1 controls become \\xHH") {
  CHECK(escape_control("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07");
  CHECK(escape_control(std::string("x\0y", 3)) == "x\\x00y");
  CHECK(escape_control("a\nb\rc\td") == "a\\x0ab\\x0dc\\x09d");
  CHECK(escape_control("\x1f\x7f") == "\\x1f\\x7f");
  // C1 CSI (U+009B) and NEL (U+0085) as UTF-8: both bytes escaped.
  CHECK(escape_control("\xc2\x9b" "2J") == "\\xc2\\x9b2J");
  CHECK(escape_control("\xc2\x80\xc2\x9f") == "\\xc2\\x80\\xc2\\x9f");
  // Every byte below 0x20 and DEL.
  for (int c = 0; c < 0x80; ++c) {
    std::string in(1, static_cast<char>(c));
    std::string out = escape_control(in);
    if (c < 0x20 || c == 0x7f) {
      char want[5];
      std::snprintf(want, sizeof want, "\\x%02x", c);
      CHECK(out == want);
    } else {
      CHECK(out == in);
    }
  }
}

TEST_CASE("escape_control: invalid UTF-8 bytes become \\xHH, one per byte") {
  CHECK(escape_control("x\xffy") == "x\\xffy");
  CHECK(escape_control("\x9b") == "\\x9b");                      // lone 8-bit CSI
  CHECK(escape_control("\xc0\xaf") == "\\xc0\\xaf");             // overlong '/'
  CHECK(escape_control("\xe0\x80\x80") == "\\xe0\\x80\\x80");    // overlong NUL
  CHECK(escape_control("\xed\xa0\x80") == "\\xed\\xa0\\x80");    // surrogate
  CHECK(escape_control("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(escape_control("\xe2\x82") == "\\xe2\\x82");             // truncated
  CHECK(escape_control("\xe2\x82z") == "\\xe2\\x82z");           // cut by ASCII
  // Resynchronises on the next valid sequence.
  CHECK(escape_control("\xff\xc3\xa9") == "\\xff\xc3\xa9");
}

TEST_CASE("escape_control: the output is always safe") {
  // Whatever the input, the output has no byte < 0x20, no DEL, no C1 and is
  // valid UTF-8 (so escaping is idempotent).
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (int a = 0xc0; a < 0x100; a += 7)
    for (int b = 0x70; b < 0xc0; b += 5) all += {static_cast<char>(a), static_cast<char>(b)};
  const std::string out = escape_control(all);
  for (size_t i = 0; i < out.size();) {
    uint32_t cp = 0;
    size_t length = decode_utf8(out, i, &cp);
    REQUIRE(length > 0);
    CHECK(cp >= 0x20);
    CHECK(cp != 0x7f);
    CHECK((cp < 0x80 || cp >= 0xa0));
    i += length;
  }
  CHECK(escape_control(out) == out);
}

TEST_CASE("append_escaped_control appends what escape_control returns") {
  std::string out = "prefix;";
  append_escaped_control(out, "a\x1b" "b");
  CHECK(out == "prefix;a\\x1bb");
  append_escaped_control(out, "");
  CHECK(out == "prefix;a\\x1bb");
}

TEST_CASE("decode_utf8: lengths, code points, rejections") {
  uint32_t cp = 0;
  CHECK(decode_utf8(std::string("\0", 1), 0, &cp) == 1);
  CHECK(cp == 0);
  CHECK(decode_utf8("A", 0, &cp) == 1);
  CHECK(cp == 'A');
  CHECK(decode_utf8("x\xc3\xa9", 1, &cp) == 2);
  CHECK(cp == 0xe9);
  CHECK(decode_utf8("\xe2\x82\xac", 0, &cp) == 3);
  CHECK(cp == 0x20ac);
  CHECK(decode_utf8("\xf0\x9f\x94\xa5", 0, &cp) == 4);
  CHECK(cp == 0x1f525);
  CHECK(decode_utf8("\x80", 0, &cp) == 0);              // continuation as lead
  CHECK(decode_utf8("\xc1\xbf", 0, &cp) == 0);          // overlong
  CHECK(decode_utf8("\xe0\x9f\xbf", 0, &cp) == 0);      // overlong
  CHECK(decode_utf8("\xf0\x8f\xbf\xbf", 0, &cp) == 0);  // overlong
  CHECK(decode_utf8("\xed\xbf\xbf", 0, &cp) == 0);      // surrogate
  CHECK(decode_utf8("\xf5\x80\x80\x80", 0, &cp) == 0);  // beyond U+10FFFF
  CHECK(decode_utf8("\xc3(", 0, &cp) == 0);             // bad continuation
  CHECK(decode_utf8("\xf0\x9f\x94", 0, &cp) == 0);      // truncated at the end
}
