// userspace/capture_file.h - Capture <-> JSON capture file (format
// "gsymprof-capture", version 1; see capture-format.md, field by field).
//
// Input: a Capture (from the sampling session) or capture-file bytes.
// Output: deterministic JSON text, or a validated Capture. The parser is
// strict: not JSON, wrong format name or version, missing fields, fields of
// the wrong type, out-of-range numbers or indexes are a one-line error.
#pragma once

#include <string>
#include <string_view>

#include "gsym/expected.h"
#include "userspace/capture.h"

namespace gsymprof {

inline constexpr const char* kCaptureFormatName = "gsymprof-capture";
inline constexpr int kCaptureFormatVersion = 1;  // the version this code writes and reads

// Puts a capture in canonical order so equal captures serialize to equal
// bytes: modules sorted by (path, build ID, load bias, mappings) with frame and
// process indexes remapped, processes sorted by pid, identical stacks merged
// (counts added) and stacks sorted by (pid, comm, frames, truncated).
void canonicalize(Capture& capture);

// Canonical JSON text (a copy of `capture` is canonicalized first), ending in
// a newline.
std::string capture_to_json(const Capture& capture);

// Parses and validates capture-file text. Errors are one line, without the
// file name (the caller adds it).
gsym::Expected<Capture> capture_from_json(std::string_view text);

// File helpers: the error names the file. Writing is atomic (temp + rename).
gsym::Status write_capture_file(const Capture& capture, const std::string& path);
gsym::Expected<Capture> read_capture_file(const std::string& path);

// The stable names used for UnresolvedReason in capture files and reports
// ("no-mapping", "anonymous-mapping", ...); parse returns false on unknown.
const char* unresolved_reason_name(UnresolvedReason reason);
bool parse_unresolved_reason(std::string_view name, UnresolvedReason* reason);

}  // namespace gsymprof
