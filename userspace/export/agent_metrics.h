// userspace/export/agent_metrics.h - the agent's counters, as /metrics
// serves them (Prometheus text format 0.0.4): samples and losses by reason
// from the ticks, windows by sink and outcome, spool bytes, and the
// agent's own CPU time and resident memory. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "userspace/capture/capture.h"

namespace gsymprof {

enum class WindowOutcome : uint8_t { Exported, Failed, Dropped };

class AgentMetrics {
 public:
  void add_tick(const Capture& tick);
  void add_window(const std::string& sink, WindowOutcome outcome, uint64_t count = 1);
  void add_pull(bool served);
  // Bytes of windows waiting in the OTLP spool (a gauge).
  void set_spool_bytes(uint64_t bytes);
  void set_locator_bytes(uint64_t bytes);
  // The exposition text, read now (own CPU and RSS from /proc/self).
  std::string prometheus_text() const;

 private:
  mutable std::mutex mutex_;
  uint64_t samples_ = 0, ticks_ = 0, off_cpu_ns_ = 0;
  std::map<std::string, uint64_t> lost_, truncated_;
  std::map<std::string, std::array<uint64_t, 3>> windows_;  // by sink: exported, failed, dropped
  uint64_t spool_bytes_ = 0, pulls_served_ = 0, pulls_failed_ = 0, locator_bytes_ = 0;
};

// Appends this process's user + system CPU seconds and resident bytes
// (gsymprof_process_cpu_seconds_total, gsymprof_process_resident_memory_bytes;
// from /proc/self/stat, 0 when unreadable); `who` names the process in the
// help text ("agent", "service").
void append_own_usage(std::string& out, const char* who);
// Appends "# HELP NAME HELP" and "# TYPE NAME TYPE" lines to `out`.
void prometheus_metric(std::string& out, const char* name, const char* type, const char* help);
// Appends "NAME{LABELS} VALUE" (no braces when `labels` is empty); label
// values escaped by the caller (prometheus_label_value).
void prometheus_sample(std::string& out, const std::string& name, const std::string& labels, const std::string& value);

// A Prometheus label value, escaped (\\, \", \n).
std::string prometheus_label_value(const std::string& value);

}  // namespace gsymprof
