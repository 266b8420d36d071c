#include "userspace/report/loss_summary.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>

#include "userspace/base/text_escape.h"
#include "userspace/session/target_options.h"
#include "userspace/unwind/stack_copy_unwind.h"

namespace gsymprof {

LossSummary summarize_losses(const Capture& capture) {
  LossSummary losses;
  for (const auto& [reason, count] : capture.lost) {
    losses.lost_by_reason[reason] = count;
    losses.lost += count;
  }
  losses.truncated_by_reason = capture.truncations;  // kept samples
  std::set<uint32_t> exited;
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.truncated) losses.truncated += stack.count;
    if (stack.count != 0 &&
        std::any_of(stack.frames.begin(), stack.frames.end(),
                    [](const CaptureFrame& f) { return f.reason == UnresolvedReason::ProcessGone; })) {
      losses.exited_samples += stack.count;
      exited.insert(stack.pid);
    }
  }
  losses.exited_processes = exited.size();
  // The truncations a flag can fix, with that flag.
  auto count_of = [&](const std::string& reason) {
    auto it = capture.truncations.find(reason);
    return it == capture.truncations.end() ? uint64_t{0} : it->second;
  };
  if (uint64_t n = count_of(unwind_stop_loss_key(UnwindStop::StackCopyTooSmall)))
    losses.fixes += std::to_string(n) +
                    " stacks are deeper than the copied user stack: copy more with "
                    "--call-graph dwarf,SIZE (gsymprof: up to " +
                    std::to_string(kMaxStackCopyBytes) + " bytes; perf record: 65528)";
  if (uint64_t n = count_of(unwind_stop_loss_key(UnwindStop::DepthLimit)))
    losses.fixes += std::string(losses.fixes.empty() ? "" : "; ") + std::to_string(n) +
                    " stacks are deeper than the unwinder walks: raise --max-depth (default " +
                    std::to_string(kDefaultMaxDepth) + ", at most " + std::to_string(kMaxMaxDepth) + ")";
  if (has_kernel_frames(capture)) losses.kernel_problem = capture.kernel.error;
  return losses;
}

namespace {

// "REASON N, ..." of the non-zero counts (every count when `all`).
std::string reason_list(const std::map<std::string, uint64_t>& counts, bool all) {
  std::string list;
  for (const auto& [reason, count] : counts)
    if (all || count) list += (list.empty() ? "" : ", ") + reason + " " + std::to_string(count);
  return list;
}

}  // namespace

void print_losses(const LossSummary& losses, bool verbose) {
  // Reason names are capture.lost's keys, fixed strings today; escaped so the
  // terminal stays safe should one ever come from elsewhere (a capture file).
  const std::string lost = reason_list(losses.lost_by_reason, verbose);
  if (!lost.empty() || verbose)
    std::fprintf(stderr, "gsymprof: lost by reason: %s\n", escape_control(lost).c_str());
  const std::string truncated = reason_list(losses.truncated_by_reason, verbose);
  if (losses.truncated || !truncated.empty() || verbose)
    std::fprintf(stderr, "gsymprof: truncated stacks: %" PRIu64 "%s%s%s\n", losses.truncated,
                 truncated.empty() ? "" : " (", escape_control(truncated).c_str(),
                 truncated.empty() ? "" : ")");
  if (!losses.fixes.empty())
    std::fprintf(stderr, "gsymprof: to unwind them further: %s\n", losses.fixes.c_str());
  if (!losses.kernel_problem.empty())
    std::fprintf(stderr, "gsymprof: kernel frames are not named: %s\n",
                 escape_control(losses.kernel_problem).c_str());
  if (losses.exited_samples)
    std::fprintf(stderr,
                 "gsymprof: %" PRIu64 " samples of %" PRIu64
                 " processes that exited before their maps could be read: frames [unknown]\n",
                 losses.exited_samples, losses.exited_processes);
}

}  // namespace gsymprof
