// userspace/serve/pprof_request.h - POST /symbolize/pprof: a pprof
// (profile.proto, gzipped or not) in, the same profile with Function and
// Line entries filled for every location of a mapping with a GNU build ID
// (hex in Mapping.build_id) that the store can name, out (gzipped).
// Locations that have lines already, or whose mapping has none or another
// identity, are left as they are; every location is counted by outcome.
// A mapping whose locations are all named gets has_functions,
// has_filenames, has_line_numbers and has_inline_frames.
//
// Hostile input: the body must parse as a Profile; string, mapping and
// function references out of range are errors (one line); a gzip body
// may inflate to at most `max_plain_bytes`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gsym/base/expected.h"
#include "userspace/serve/frame_namer.h"

namespace gsymprof {

gsym::Expected<std::string> symbolize_pprof(std::string_view body, uint64_t max_plain_bytes, FrameNamer& namer);

}  // namespace gsymprof
