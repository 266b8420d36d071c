#include "userspace/session/agent_session.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "userspace/assemble/capture_assembler.h"
#include "userspace/process/kernel_symbols.h"
#include "userspace/process/process_labels.h"
#include "userspace/sample/sampler.h"
#include "userspace/session/live_session.h"

namespace gsymprof {
namespace {

// Ticks between two compactions of the process table (a minute at 1 s),
// and sooner once it holds this many images: a host that starts thousands
// of processes a minute (a build, a test suite) grew the agent by 200 MB
// of images of exited processes within one minute.
constexpr uint64_t kTicksPerCompaction = 60;
constexpr size_t kMaxImagesBetweenCompactions = 1024;

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The labels of each process, read once while it lives (a pid reused by
// another process is read again when the old one's exit was seen).
class LabelCache {
 public:
  explicit LabelCache(const AgentSessionOptions& options) : options_(options) {}

  const std::vector<std::pair<std::string, std::string>>& of(uint32_t pid) {
    auto it = labels_.find(pid);
    if (it == labels_.end()) it = labels_.emplace(pid, agent_process_labels(pid, options_)).first;
    return it->second;
  }
  // Forgets the processes not in `live` (bounded by what runs).
  void keep_only(const std::vector<CaptureProcess>& live) {
    std::map<uint32_t, std::vector<std::pair<std::string, std::string>>> kept;
    for (const CaptureProcess& p : live)
      if (auto it = labels_.find(p.pid); it != labels_.end()) kept.insert(*it);
    labels_ = std::move(kept);
  }

 private:
  const AgentSessionOptions& options_;
  std::map<uint32_t, std::vector<std::pair<std::string, std::string>>> labels_;
};

const std::string* label_value(const std::vector<std::pair<std::string, std::string>>& labels,
                               const std::string& key) {
  for (const auto& [k, v] : labels)
    if (k == key) return &v;
  return nullptr;
}

// --comm and --cgroup: the stacks of other processes go (and with them
// their processes; modules unused are dropped by canonicalize's users).
void apply_filters(Capture& tick, const AgentSessionOptions& options) {
  if (options.comms.empty() && options.cgroup.empty()) return;
  auto wanted = [&](const CaptureProcess& p) {
    if (!options.comms.empty() && std::find(options.comms.begin(), options.comms.end(), p.comm) == options.comms.end())
      return false;
    if (!options.cgroup.empty()) {
      const std::string* cgroup = label_value(p.labels, "cgroup");
      if (!cgroup || !(*cgroup == options.cgroup || cgroup->starts_with(options.cgroup + "/"))) return false;
    }
    return true;
  };
  std::map<uint32_t, bool> keep;
  for (const CaptureProcess& p : tick.processes) keep[p.pid] = keep[p.pid] || wanted(p);
  std::erase_if(tick.processes, [&](const CaptureProcess& p) { return !keep[p.pid]; });
  uint64_t dropped = 0;
  std::erase_if(tick.stacks, [&](const CaptureStack& s) {
    const bool drop = !keep[s.pid];
    if (drop) dropped += s.count;
    return drop;
  });
  tick.samples -= dropped;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> agent_process_labels(uint32_t pid,
                                                                      const AgentSessionOptions& options) {
  const ProcessLabels read = read_process_labels(pid, options.service_name.empty() ? options.service_env : "");
  std::vector<std::pair<std::string, std::string>> labels;
  const std::string executable = basename_of(read.executable_path);
  if (!read.executable_path.empty()) {
    labels.emplace_back("process.executable.name", executable);
    labels.emplace_back("process.executable.path", read.executable_path);
  }
  if (!read.cgroup.empty()) labels.emplace_back("cgroup", read.cgroup);
  if (!read.container_id.empty()) labels.emplace_back("container.id", read.container_id);
  const std::string service = !options.service_name.empty() ? options.service_name
                              : !read.service.empty()         ? read.service
                                                              : executable;
  if (!service.empty()) labels.emplace_back("service.name", service);
  return labels;
}

gsym::Status run_agent_session(const AgentSessionOptions& options, AgentSessionStats* stats) {
  const TargetOptions& targets = options.targets;
  if (!targets.command.empty()) return gsym::Error("the agent profiles processes, not a command");
  UnwindOptions unwind;
  unwind.max_frames = targets.max_depth;
  CaptureAssembler assembler(ProcSource::live(), unwind);
  LabelCache labels(options);

  StopSignals stop_signals;
  SamplerOptions sampler_options = sampler_options_for(targets, options.ring_buffer_bytes);
  sampler_options.ring_sizing = kAgentRingSizing;
  auto sampler = Sampler::start(sampler_options, assembler);
  if (!sampler) return sampler.error();
  if (options.on_started) options.on_started((*sampler)->notices());
  Sampler* sampler_ptr = sampler->get();
  if ((*sampler)->sideband_on()) assembler.use_sideband([sampler_ptr] { return sampler_ptr->sideband_lost(); });
  read_python_frames(assembler, sampler_ptr);
  snapshot_processes(assembler, targets.pids);

  const auto tick = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options.tick_s));
  SamplerCounters before;
  uint64_t ticks = 0;
  for (;;) {
    const auto tick_start = std::chrono::steady_clock::now();
    const uint64_t tick_start_unix = unix_time_ns();
    const auto tick_end = tick_start + tick;
    bool stopping = false;
    while (!(stopping = stop_requested()) && std::chrono::steady_clock::now() < tick_end) {
      if (auto polled = (*sampler)->poll(10); !polled) return polled.error();
    }
    if (auto drained = (*sampler)->drain(); !drained) return drained.error();
    const SamplerCounters counters = (*sampler)->counters();
    assembler.finish();
    report_losses(counters, assembler, before);
    before = counters;

    Capture capture = new_capture(targets);
    capture.start_time_unix_ns = tick_start_unix;
    capture.duration_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    std::chrono::steady_clock::now() - tick_start)
                                                    .count());
    JitReport jit;
    assembler.build(capture, &jit, targets.call_graph == CallGraph::Dwarf);
    attach_running_kernel_symbols(capture);
    for (CaptureProcess& process : capture.processes) process.labels = labels.of(process.pid);
    apply_filters(capture, options);
    ++ticks;
    const bool compact = ticks % kTicksPerCompaction == 0 ||
                         assembler.processes().image_count() > kMaxImagesBetweenCompactions;
    if (compact) labels.keep_only(capture.processes);
    assembler.next_window(compact);
    if (compact) ::malloc_trim(0);  // what the process table freed goes back
    if (options.on_tick) options.on_tick(std::move(capture));
    if (stats) {
      stats->counters = counters;
      stats->ticks = ticks;
    }
    if (stopping) return gsym::Status::success();
  }
}

}  // namespace gsymprof
