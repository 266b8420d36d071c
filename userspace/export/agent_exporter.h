// userspace/export/agent_exporter.h - the agent's export side: merges the
// sampling thread's ticks into windows and into the profiles pulled over
// HTTP, and symbolizes and hands them to the sinks on a thread of its own,
// at a lower priority (nice 10), so neither GSYM conversion nor a slow
// backend holds up sampling. At most max_queued windows wait; beyond that
// the oldest is dropped and counted. Pulls, whose client waits, are served
// on a thread of their own (AgentExporterOptions::make_pull_locator).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/export/agent_metrics.h"
#include "userspace/export/window_sink.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

struct AgentExporterOptions {
  double window_s = 10;
  SymbolizeOptions symbolize;
  size_t max_queued = 4;      // windows waiting for the export thread
  size_t max_pulls = 4;       // profiles being collected for HTTP at once
  double max_pull_s = 600;    // the longest one
  // Makes the locator anew every `windows_per_locator` windows (empty: one
  // for the lifetime): a locator keeps every GSYM it opened mapped, and
  // what it found for every module it was asked about, and a host runs new
  // binaries all day. Opened GSYMs stay in the cache, and without lookup
  // indexes (the agent's) opening one again is cheap.
  std::function<GsymLocator()> make_locator;
  uint64_t windows_per_locator = 6;
  // Given: pulls are symbolized on a thread of their own, each with a
  // locator made for it (one that converts only what is quick), so a
  // window's export in progress does not hold up a client that waits.
  // Empty: pulls wait their turn on the export thread, ahead of windows.
  std::function<GsymLocator()> make_pull_locator;
  // ... and sooner once its readers hold this many heap bytes (their lookup
  // indexes): a host that rebuilds big programs all day opened 155 MB of
  // them within ten minutes.
  size_t max_locator_bytes = size_t{32} << 20;
};

class AgentExporter {
 public:
  AgentExporter(AgentExporterOptions options, GsymLocator locator, std::vector<std::unique_ptr<WindowSink>> sinks,
                AgentMetrics& metrics);
  ~AgentExporter();
  AgentExporter(const AgentExporter&) = delete;
  AgentExporter& operator=(const AgentExporter&) = delete;

  // A tick from the sampling thread.
  void on_tick(Capture&& tick);
  // A gzipped pprof of the next `seconds` of ticks (HTTP threads). Error
  // at once when too many are being collected or `seconds` is out of range.
  gsym::Expected<std::future<gsym::Expected<std::string>>> pull(double seconds);
  // Sampling ended: the window so far is exported, everything queued is
  // delivered, the export thread stops.
  void finish();

 private:
  struct Pull {
    double remaining_s = 0;
    Capture capture;
    std::promise<gsym::Expected<std::string>> promise;
  };
  struct Job {
    Capture capture;
    std::unique_ptr<Pull> pull;  // null: a window for the sinks
  };
  void run();
  void run_pulls();
  void serve_pull(Pull& pull, GsymLocator& locator);
  // A pull has all its ticks: to the pull thread, else the export thread.
  void pull_ready_locked(std::unique_ptr<Pull> pull);
  void enqueue_window_locked();

  AgentExporterOptions options_;
  GsymLocator locator_;
  std::vector<std::unique_ptr<WindowSink>> sinks_;
  AgentMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  std::vector<std::unique_ptr<Pull>> pulls_;
  Capture window_;
  bool stopping_ = false;
  uint64_t windows_since_locator_ = 0;  // the export thread's
  std::thread thread_;
  std::condition_variable pull_wake_;
  std::deque<std::unique_ptr<Pull>> ready_pulls_;  // for pull_thread_
  std::thread pull_thread_;
};

}  // namespace gsymprof
