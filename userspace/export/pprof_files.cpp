#include "userspace/export/pprof_files.h"

#include <cstdio>

#include "userspace/base/text_escape.h"
#include "userspace/output/pprof_output.h"

namespace gsymprof {

void PprofFiles::deliver(const Capture& window, GsymLocator& locator, const SymbolizeOptions& options,
                         AgentMetrics& metrics) {
  auto profile = pprof_profile(window, locator, options);
  if (!profile) {
    std::fprintf(stderr, "gsymprof agent: pprof of a window: %s\n", escape_control(profile.error().to_string()).c_str());
    metrics.add_window(name(), WindowOutcome::Failed);
    return;
  }
  auto dropped = store_.add(window.start_time_unix_ns, profile->gzipped);
  if (!dropped) {
    std::fprintf(stderr, "gsymprof agent: %s\n", escape_control(dropped.error().to_string()).c_str());
    metrics.add_window(name(), WindowOutcome::Failed);
    return;
  }
  metrics.add_window(name(), WindowOutcome::Exported);
  // Rotated out: older windows the bounds no longer hold.
  if (*dropped) metrics.add_window(name(), WindowOutcome::Dropped, *dropped);
}

}  // namespace gsymprof
