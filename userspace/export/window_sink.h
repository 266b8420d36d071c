// userspace/export/window_sink.h - where the agent's windows go: each sink
// encodes a window (a Capture of --window seconds) its way and delivers or
// stores it, on the agent's export thread, and counts what it did.
#pragma once

#include <string>

#include "userspace/capture/capture.h"
#include "userspace/export/agent_metrics.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

class WindowSink {
 public:
  virtual ~WindowSink() = default;
  // The sink's name in /metrics ("files", "otlp").
  virtual const char* name() const = 0;
  // One window, symbolized through `locator` as `options` say; failures
  // are counted in `metrics` and said on stderr, never thrown.
  virtual void deliver(const Capture& window, GsymLocator& locator, const SymbolizeOptions& options,
                       AgentMetrics& metrics) = 0;
  // Called about once a second while no window waits (retries).
  virtual void idle(AgentMetrics& /*metrics*/) {}
};

}  // namespace gsymprof
