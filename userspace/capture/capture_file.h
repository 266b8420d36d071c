// userspace/capture/capture_file.h - Capture <-> JSON capture file (format
// "gsymprof-capture", version 5, reads versions 1 to 4 too; see
// capture-format.md).
//
// Input: a Capture (from the sampling session) or capture-file bytes.
// Output: deterministic JSON text, or a validated Capture. The parser is
// strict: not JSON, wrong format name or version, missing fields, fields of
// the wrong type, out-of-range numbers or indexes are a one-line error, the
// first in document order (capture-format.md, "Validation").
//
// Code: capture_schema.h (field names, versions, limits: what the reader
// and writer share), capture_writer.cpp, capture_reader.cpp (with
// capture_source.h, the bytes it parses).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"

namespace gsymprof {

// Canonical JSON text (a copy of `capture` is canonicalized first), ending in
// a newline.
std::string capture_to_json(const Capture& capture);

// The largest capture read: "capture too large: N bytes (limit L)" beyond it,
// before anything is read. Reading streams (no JSON tree), so a capture costs
// about what its Capture takes, under its own size for real captures and a
// small multiple of it for any input (capture-format.md, "Size limit").
inline constexpr uint64_t kMaxCaptureBytes = uint64_t{1} << 30;  // 1 GiB

// Parses and validates capture-file text. Errors are one line, without the
// file name (the caller adds it).
gsym::Expected<Capture> capture_from_json(std::string_view text,
                                          uint64_t max_bytes = kMaxCaptureBytes);

// Whether text starting with `head` looks like a capture file (its format
// name near the start), before it is parsed: for messages about a capture
// given where something else was expected.
bool looks_like_capture(std::string_view head);

// File helpers: the error names the file. Writing is atomic (temp + rename).
// Reading opens without blocking, refuses anything but a regular file and
// streams it through a small buffer.
// write_capture_file puts `capture` in canonical order (canonicalize) and
// writes its text as it is made, in pieces: neither a copy of the capture
// nor its whole text is held beside it.
gsym::Status write_capture_file(Capture& capture, const std::string& path);
gsym::Expected<Capture> read_capture_file(const std::string& path,
                                          uint64_t max_bytes = kMaxCaptureBytes);

}  // namespace gsymprof
