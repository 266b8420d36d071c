// userspace/output/speedscope_output.h - a capture -> speedscope's JSON file
// format (`--format speedscope`; https://www.speedscope.app/file-format-schema.json),
// so that `speedscope out.json` opens it.
//
// Output: one document,
//   {"$schema":"https://www.speedscope.app/file-format-schema.json",
//    "exporter":"gsymprof","name":...,"activeProfileIndex":0,
//    "shared":{"frames":[{"name":...,"file":...[,"line":N]},...]},
//    "profiles":[{"type":"sampled","name":"COMM pid P tid T","unit":"none",
//                 "startValue":0,"endValue":SAMPLES,
//                 "samples":[[frame,...],...],"weights":[count,...]},...]}
// - frames are named as the folded output names them (folded_frame:
//   inlined "_[i]", kernel "_[k]", JIT "_[j]", "[truncated]" as the root
//   where the unwinder stopped), but Python frames without their "_[p]";
//   one frame per distinct name (the folded output and flame graphs merge
//   by name too), sorted by name, with the source file when every
//   occurrence of the name has the same one, and a Python frame's line
//   (not 0) with its file;
// - one sampled profile per thread (pid, tid of the capture's stacks; per
//   process for version-1 captures, which hold no threads), sorted by (pid,
//   tid), named by the comm with most samples in it;
// - samples are frame-index stacks, root first; the capture's stacks are
//   already aggregated, so each distinct stack of a thread is one sample
//   whose weight is its sample count (unit "none": samples, not time),
//   sorted by stack so the time-ordered view groups them like a flame graph.
// Deterministic: the same capture gives the same bytes. Text is JSON-escaped
// (invalid UTF-8 becomes U+FFFD, base/json_text.h).
#pragma once

#include <string>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

struct SpeedscopeProfile {
  std::string json;
  SymbolizeResult symbolized;  // its frames and modules (the summary)
  size_t samples = 0;          // sample entries written (distinct stacks per thread)
};

// options.pid_in_comm is not used: the pid is in each profile's name.
gsym::Expected<SpeedscopeProfile> speedscope_profile(const Capture& capture, GsymLocator& locator,
                                                     const SymbolizeOptions& options);

}  // namespace gsymprof
