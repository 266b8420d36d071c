// userspace/output/json_output.h - symbolized stacks -> JSON for tools
// (`gsymprof symbolize --format json`).
//
// Input: a SymbolizeResult (symbolize.h). Output: one JSON document,
//   {"format":"gsymprof-stacks","version":1,"samples":N,
//    "stacks":[{"comm":"app","count":12,"frames":[FRAME,...]},...],
//    "modules":[{"path":...,"build_id":...,"resolved":true,"source":"gsym-dir",
//                "gsym":"/dir/x.gsym","reason":""},...]}
// with FRAME = {"name","kind","file","line","inlined","module","build_id"},
// frames root first (each stack's ids resolved through result.frames),
// stacks and modules in the result's (sorted) order, one stack per line.
// Deterministic; bytes that are not UTF-8 become U+FFFD, DEL and C1 controls
// are \u-escaped (base/json_text.h).
#pragma once

#include <string>

#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

// "function", "module-offset", "unknown", "truncated", "kernel", "jit",
// "off-cpu", "python".
const char* frame_kind_name(FrameKind kind);

std::string symbolized_json(const SymbolizeResult& result);

}  // namespace gsymprof
