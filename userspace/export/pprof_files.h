// userspace/export/pprof_files.h - the agent's --output-dir: one gzipped
// pprof per window (profile-<UTC start>-<sequence>.pb.gz), the newest kept
// within a count and a total size (window_store.h).
#pragma once

#include <cstdint>
#include <string>

#include "userspace/export/window_sink.h"
#include "userspace/export/window_store.h"

namespace gsymprof {

class PprofFiles final : public WindowSink {
 public:
  explicit PprofFiles(WindowStore store) : store_(std::move(store)) {}
  const char* name() const override { return "files"; }
  void deliver(const Capture& window, GsymLocator& locator, const SymbolizeOptions& options,
               AgentMetrics& metrics) override;

 private:
  WindowStore store_;
};

}  // namespace gsymprof
