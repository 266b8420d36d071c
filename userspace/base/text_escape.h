// userspace/base/text_escape.h - untrusted names made safe for a terminal and for
// line-oriented output, and the one UTF-8 decoder the output code shares.
//
// gsymprof runs as root and prints names anyone can choose: comm
// (prctl(PR_SET_NAME)), module paths (file names), function names (DWARF of
// user-built code), strings from capture and GSYM files. Raw, an ESC or a C1
// CSI in one could drive root's terminal, a NUL or newline could corrupt or
// forge folded lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gsymprof {

// Decodes the UTF-8 sequence starting at text[i] (i < text.size()): returns
// its length (1-4) and stores its code point, or returns 0 when the bytes
// there are not valid UTF-8 (bad lead or continuation byte, truncated,
// overlong, surrogate, above U+10FFFF). ASCII bytes, NUL included, decode
// as themselves.
size_t decode_utf8(std::string_view text, size_t i, uint32_t* code_point);

// The escaping rule: every C0 control (0x00-0x1f, tab and newline included),
// DEL (0x7f), every byte of a C1 control (U+0080-U+009F, i.e. "\xc2\x80" to
// "\xc2\x9f") and every byte that is not part of valid UTF-8 becomes the four
// visible characters \xHH (lower-case hex of the byte). Everything else,
// printable ASCII and valid non-ASCII UTF-8, is copied unchanged; a literal
// backslash stays a single backslash, so names without controls read as they
// always did (the price: "\x1b" typed literally looks like an escaped ESC).
// The result is printable UTF-8 with no newline, safe on a terminal and
// inside one line of output. Pure printable ASCII costs one scan and a copy.
std::string escape_control(std::string_view text);

// escape_control(text) appended to `out`, without a temporary.
void append_escaped_control(std::string& out, std::string_view text);

}  // namespace gsymprof
