// userspace/output/frame_chains.h - each distinct frame of a capture's stacks
// symbolized once, on its own: the outputs that keep the capture's own stacks
// (pprof: locations per frame and samples per stack; speedscope: samples per
// thread) name them through this, not through symbolize()'s merged stacks.
//
// Every distinct CaptureFrame of the counted stacks becomes a one-frame
// stack of its own, named by its index (zero-padded, so the result's comm
// order is index order): one symbolize() call then gives every frame its
// inline chain, root first (the concrete function, the inlined calls, the
// innermost), named and identified as in the folded output.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

struct FrameChains {
  // The distinct frames of the stacks with a count, numbered in the order the
  // stacks first use them (`first`, when given, is number 0).
  std::vector<CaptureFrame> frames;
  std::map<CaptureFrame, uint32_t> numbers;  // frame -> its index in `frames`
  // Per frame: ids into symbolized.frames, root first.
  std::vector<std::vector<uint32_t>> chains;
  // One stack per frame; its `frames` table and its `modules` (the reports
  // of every module a counted stack uses) are what callers keep.
  SymbolizeResult symbolized;
};

// A stack's entries leaf first, as pprof and OTLP list them: why its thread
// was off the CPU and "[short waits]" leafward, its frames (`frame(number)`,
// the frame's number in `numbers`), "[truncated]" at the root
// (`marker(name)` for each marker).
template <typename OnFrame, typename OnMarker>
void for_each_stack_entry(const CaptureStack& stack, const std::map<CaptureFrame, uint32_t>& numbers,
                          OnFrame&& frame, OnMarker&& marker) {
  if (stack.off_cpu != OffCpuReason::None) marker(off_cpu_frame_name(stack.off_cpu));
  if (stack.short_waits) marker(std::string(kShortWaitsFrame));
  for (const CaptureFrame& f : stack.frames) frame(numbers.at(f));
  if (stack.truncated) marker(std::string("[truncated]"));
}

// The frame a marker (a name no code has) is shown as.
SymbolizedFrame marker_frame(const std::string& name);

// options.pid_in_comm is ignored. Errors: symbolize()'s (a bad capture).
gsym::Expected<FrameChains> symbolize_frames(const Capture& capture, GsymLocator& locator,
                                             const SymbolizeOptions& options,
                                             const CaptureFrame* first = nullptr);

}  // namespace gsymprof
