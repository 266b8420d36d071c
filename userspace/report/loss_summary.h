// userspace/report/loss_summary.h - stage: what a capture lost and cut
// short, as data (LossSummary) and as the summary lines every command prints
// (profile, record, symbolize of a capture or a perf.data file). The report
// stage owns the "gsymprof: ..." lines on stderr; libraries return values.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "userspace/capture/capture.h"

namespace gsymprof {

// Capture::lost holds the sampler's losses by name (sample/counters.h);
// Capture::truncations the samples kept with a stack the CFI unwinder had
// to cut short ("unwind_<reason>", stack_copy_unwind.h).

// The losses of a capture, from Capture::lost and its stacks' truncated
// flags: taken before the stacks are freed (render's free_stacks).
struct LossSummary {
  uint64_t lost = 0;       // samples lost: every reason of Capture::lost
  uint64_t truncated = 0;  // samples whose stack the unwinder cut short
  // Capture::lost split in two, every reason (zeros too): the losses, and
  // the unwinder's truncations (unwind_*, samples kept).
  std::map<std::string, uint64_t> lost_by_reason, truncated_by_reason;
  std::string kernel_problem;  // why the kernel frames have no names ("" = named, or none)
  std::string fixes;  // truncations a flag fixes, with the flag ("" = none)
  // Samples with a process-gone frame: their process exited before its
  // maps could be read (the module-level case is a module report).
  uint64_t exited_samples = 0, exited_processes = 0;
};
LossSummary summarize_losses(const Capture& capture);

// The loss lines of every summary (profile, record, and symbolize of a
// capture or a perf.data file), each only when it has something to say:
//   gsymprof: lost by reason: REASON N, ...            (the non-zero reasons)
//   gsymprof: truncated stacks: N (unwind_REASON N, ...)
//   gsymprof: to unwind them further: N stacks are deeper than ...: FLAG
// (`verbose`: both first lines always, with every reason, zeros too)
// and, when the kernel frames could not be named:
//   gsymprof: kernel frames are not named: WHY
// and, when some process was gone before its maps were read:
//   gsymprof: N samples of P processes that exited before their maps could be read: frames [unknown]
void print_losses(const LossSummary& losses, bool verbose);

}  // namespace gsymprof
