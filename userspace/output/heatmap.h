// userspace/output/heatmap.h - a capture with sample times -> one
// self-contained HTML page: a sub-second heatmap (FlameScope's view) whose
// selected time ranges become flame graphs in the page (`gsymprof heatmap`).
//
// Input: a Capture whose stacks carry sample times (CaptureStack::times_us:
// `record` and `profile` keep them) and a GsymLocator. Output: HTML with
// inline CSS and script and no external resource (a Content-Security-Policy
// forbids any request), and the data as JSON in the page:
//   {"title":..., "host":..., "start_unix_ns":N, "duration_us":N,
//    "slice_us":N, "rows":N (slices per second), "columns":N (seconds),
//    "unit":"samples", "samples":N, "untimed_samples":N,
//    "frames":["name",...],                   // distinct folded names, sorted
//    "lanes":[[pid,tid,"comm"],...],          // threads, sorted by (pid, tid)
//    "stacks":[[lane,[frame,...],[cell,count,cell,count,...]],...]}
// - a stack's frames are root first, its comm first, named exactly as the
//   folded output names them (folded_frame: "_[i]", "_[k]", "_[j]", "_[p]";
//   "[truncated]" root; off-CPU reason leaf), so a range's flame graph is
//   the folded output of that range;
// - a cell is second * rows + slice within the second (slice_us long; the
//   last slice of a second may be shorter when slice_us does not divide it),
//   so cell order is time order; cells of a stack are sorted, each with its
//   sample count;
// - one entry per distinct (thread, folded stack), sorted by (lane, frames).
// Stacks without times (short waits, a stack merged from untimed captures)
// are counted in untimed_samples and left out. Deterministic: the same
// capture gives the same bytes. Every name is data: JSON-escaped, '<', '>'
// and '&' as \u escapes (no "</script>" can end the block), and the page's
// script puts names only into text nodes and attributes, never markup.
#pragma once

#include <cstdint>
#include <string>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

struct HeatmapOptions {
  uint32_t slice_ms = 50;  // a row: 1 to 1000 ms
  std::string title = "gsymprof heatmap";
};

struct HeatmapPage {
  std::string html;
  SymbolizeResult symbolized;   // its frames and modules (the summary)
  uint64_t samples = 0;         // samples shown
  uint64_t untimed_samples = 0;  // samples without a time, left out
  size_t stacks = 0;            // (thread, stack) entries written
};

inline constexpr uint32_t kMaxHeatmapSliceMs = 1000;

// Errors: slice_ms out of range; a capture without any sample time (record
// it with `gsymprof record`: the agent and perf.data keep none); symbolize()'s.
gsym::Expected<HeatmapPage> heatmap_page(const Capture& capture, GsymLocator& locator,
                                         const SymbolizeOptions& symbolize_options,
                                         const HeatmapOptions& options);

}  // namespace gsymprof
