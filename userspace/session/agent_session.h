// userspace/session/agent_session.h - stage: the agent's sampling side.
// Samples until SIGTERM/SIGINT and hands over one Capture per tick (a
// second by default), unsymbolized and labelled; the caller merges ticks
// into windows (merge_capture) and exports them. The tables start empty
// every tick and the process table keeps only live processes, so memory
// follows what runs, not the uptime. Nothing here symbolizes or exports.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/events/counters.h"
#include "userspace/session/target_options.h"

namespace gsymprof {

struct AgentSessionOptions {
  TargetOptions targets;             // -p (else the whole host), -F, call graph, clock
  std::vector<std::string> comms;    // --comm: only processes with one of these names
  std::string cgroup;                // --cgroup: only processes in this cgroup (or below)
  std::string service_name;          // --service-name: every process's service.name
  std::string service_env;           // --service-env: the variable that names a process's service
  double tick_s = 1.0;
  size_t ring_buffer_bytes = 0;      // 0: sized by the sampler
  // Once sampling started: what this kernel cannot do (Sampler::notices).
  std::function<void(const std::vector<std::string>& notices)> on_started;
  // Each tick's capture, in order, labelled; called on the sampling thread:
  // must return quickly (queue the work).
  std::function<void(Capture&& tick)> on_tick;
};

struct AgentSessionStats {
  SamplerCounters counters;  // the sampler's, since the start
  uint64_t ticks = 0;
};

// Runs until a stop signal; the last tick is handed over before returning.
gsym::Status run_agent_session(const AgentSessionOptions& options, AgentSessionStats* stats = nullptr);

// The labels the agent puts on a process's samples: process.pid is the
// sample's own; these come from /proc (process_labels.h) and the rule for
// service.name (--service-name, else --service-env's value, else the
// executable's name).
std::vector<std::pair<std::string, std::string>> agent_process_labels(uint32_t pid, const AgentSessionOptions& options);

}  // namespace gsymprof
