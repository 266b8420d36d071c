// userspace/symbolize/gsym_prefetcher.h - modules' GSYMs located (converted,
// cached) in the background while sampling runs, so the output follows the
// end of sampling instead of waiting for cold conversions of big modules.
//
// Modules are added as samples first use them; each build ID is located
// once, in the order added, by one worker thread that runs SCHED_IDLE with
// single-threaded conversions, so the profiled workload keeps the CPUs.
// The locator is lent to the worker from construction until finish(): the
// caller must not use it meanwhile. finish() lets the conversion in flight
// complete at normal priority (saying so on a terminal) and drops the rest
// of the queue, which symbolize then converts with every core. Outcomes are
// the locator's own (memoized per build ID and local file), so what the
// worker found is what symbolize gets, with the same trust rules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "userspace/symbolize/progress.h"
#include "userspace/base/build_id.h"
#include "userspace/symbolize/gsym_locator.h"

namespace gsymprof {

struct PrefetchStats {
  uint64_t located = 0;        // build IDs the worker located (found or not)
  uint64_t dropped = 0;        // queued but not reached before finish()
  double finish_wait_s = 0;    // finish() waiting for the conversion in flight
};

class GsymPrefetcher {
 public:
  // `progress`: told which module the output waits for at finish().
  explicit GsymPrefetcher(GsymLocator& locator, ProgressFn progress = {});
  ~GsymPrefetcher();  // finish()
  GsymPrefetcher(const GsymPrefetcher&) = delete;
  GsymPrefetcher& operator=(const GsymPrefetcher&) = delete;

  // Queues the module with `build_id` (ignored when empty or already added).
  // `local_elf_path` and `module_path` as GsymLocator::locate and
  // ModuleReport::path take them, exactly as symbolize will pass them.
  void add(const BuildId& build_id, std::string local_elf_path, std::string module_path);
  // Stops the worker (see above); the locator is the caller's again.
  // `drain_queue`: locate everything queued first (at normal priority).
  PrefetchStats finish(bool drain_queue = false);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gsymprof
