#include "userspace/session/profile_session.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <chrono>
#include <csignal>
#include <cstring>
#include <set>
#include <fstream>
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "userspace/process/kernel_symbols.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/vdso_file.h"
#include "userspace/process/process_image.h"
#include "userspace/aggregate/stack_aggregator.h"
#include "userspace/unwind/stack_copy_unwind.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) { g_stop_signal = signal; }

// Installs SIGINT/SIGTERM handlers for the session's lifetime, without
// SA_RESTART so a blocking poll returns early.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// The kernel's report of a mapping, as /proc/PID/maps would show it, and
// the stamp of the file it maps.
std::pair<MapEntry, FileStamp> mapping_entry(const RawMapping& mapping) {
  MapEntry entry;
  entry.start = mapping.start;
  entry.end = mapping.end;
  entry.file_offset = mapping.file_offset;
  entry.dev_major = mapping.dev_major;
  entry.dev_minor = mapping.dev_minor;
  entry.inode = mapping.inode;
  entry.perms = {mapping.readable ? 'r' : '-', mapping.writable ? 'w' : '-', 'x',
                 mapping.shared ? 's' : 'p'};
  entry.path = mapping.vdso ? std::string(kVdsoPath) : std::string(mapping.path);
  entry.deleted = mapping.deleted;
  FileStamp stamp;
  if (mapping.inode) stamp = stamp_of_mapped_file(mapping.pid, entry, mapping.time_ns);
  return {std::move(entry), stamp};
}

class AggregatingSink : public SampleSink {
 public:
  AggregatingSink(StackAggregator& aggregator, StackCopyUnwinder& unwinder, ProcessTable& processes)
      : aggregator_(aggregator), unwinder_(unwinder), processes_(processes) {}
  void on_sample(const RawSample& sample) override { aggregator_.add(sample); }
  void on_exec(uint32_t tgid, uint64_t mm) override { aggregator_.note_exec(tgid, mm); }
  void on_mapping(const RawMapping& mapping) override {
    auto [entry, stamp] = mapping_entry(mapping);
    // A file mapping without a full path (an unreachable or very deep one)
    // is still opened through /proc/PID/map_files.
    processes_.note_mapping(mapping.pid, mapping.mm, std::move(entry), stamp,
                            mapping.path_complete || mapping.vdso, mapping.elf_loader);
  }
  void on_fork(uint32_t parent_tgid, uint32_t child_tgid, uint64_t child_mm) override {
    processes_.note_fork(parent_tgid, child_tgid, child_mm);
  }
  void on_exit(uint32_t tgid) override { processes_.note_exit(tgid); }
  // --call-graph dwarf: unwind now, while the process's modules are known.
  void on_stack_copy(const RawStackCopy& copy) override { unwinder_.unwind(copy, add_); }
  // Walks held for a maps re-read, once sampling is over.
  void flush() { unwinder_.flush(add_); }

 private:
  StackAggregator& aggregator_;
  StackCopyUnwinder& unwinder_;
  ProcessTable& processes_;
  SampleCallback add_ = [this](const RawSample& sample) { aggregator_.add(sample); };
};

// A process is alive until it is gone or a zombie.
bool process_alive(uint32_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

// A child forked and held before exec until the sampler knows its pid, so it
// is profiled from its first instruction.
class LaunchedCommand {
 public:
  ~LaunchedCommand() {
    if (go_fd_ >= 0) ::close(go_fd_);  // EOF: a held child exits without exec
    if (pid_ > 0 && !reaped_) terminate();
  }

  gsym::Status fork_held(const std::vector<std::string>& command) {
    int go[2], exec_error[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(exec_error, O_CLOEXEC) != 0)
      return gsym::Error(std::string("pipe: ") + std::strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return gsym::Error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(go[1]);
      ::close(exec_error[0]);
      char byte;
      if (::read(go[0], &byte, 1) != 1) _exit(127);
      std::vector<char*> argv;
      for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      int error = errno;
      (void)!::write(exec_error[1], &error, sizeof(error));
      _exit(127);
    }
    ::close(go[0]);
    ::close(exec_error[1]);
    pid_ = pid;
    go_fd_ = go[1];
    exec_error_fd_ = exec_error[0];
    name_ = command[0];
    return {};
  }

  // Lets the child exec; fails if exec did.
  gsym::Status release() {
    char byte = 1;
    if (::write(go_fd_, &byte, 1) != 1)
      return gsym::Error(std::string("cannot start ") + name_ + ": " + std::strerror(errno));
    ::close(go_fd_);
    go_fd_ = -1;
    int error = 0;
    ssize_t n;
    do n = ::read(exec_error_fd_, &error, sizeof(error));
    while (n < 0 && errno == EINTR);
    ::close(exec_error_fd_);
    exec_error_fd_ = -1;
    if (n == sizeof(error)) {
      wait_blocking();
      return gsym::Error("cannot run " + name_ + ": " + std::strerror(error));
    }
    return {};
  }

  uint32_t pid() const { return static_cast<uint32_t>(pid_); }
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      status_ = status;
    }
    return reaped_;
  }
  int status() const { return status_; }

  // SIGTERM, a grace period, then SIGKILL.
  void terminate() {
    if (reaped_) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100 && !exited(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      wait_blocking();
    }
  }

 private:
  void wait_blocking() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    status_ = status;
  }

  pid_t pid_ = -1;
  int go_fd_ = -1, exec_error_fd_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  std::string name_;
};

uint64_t unix_time_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

SamplerOptions sampler_options_for(const SessionOptions& options) {
  const TargetOptions& targets = options.targets;
  SamplerOptions sampler_options;
  sampler_options.frequency_hz = targets.frequency_hz;
  sampler_options.filter_by_tgid = !targets.whole_system();
  sampler_options.target_tgids = targets.pids;
  sampler_options.ring_buffer_bytes = options.ring_buffer_bytes;
  if (targets.call_graph == "dwarf") sampler_options.stack_copy_bytes = targets.stack_copy_bytes;
  sampler_options.kernel_stacks = targets.kernel_stacks;
  return sampler_options;
}

// A capture with the facts known before sampling: host, kernel, settings.
Capture new_capture(const TargetOptions& targets) {
  Capture capture;
  struct utsname host {};
  if (uname(&host) == 0) {
    capture.host = host.nodename;
    capture.kernel_release = host.release;
  }
  capture.frequency_hz = targets.frequency_hz;
  capture.call_graph = targets.call_graph;
  return capture;
}

// Forks the command held before exec, makes it a target, snapshots its
// image and lets it run.
gsym::Expected<std::unique_ptr<LaunchedCommand>> launch_command(const std::vector<std::string>& argv,
                                                                Sampler& sampler,
                                                                ProcessTable& processes) {
  auto command = std::make_unique<LaunchedCommand>();
  if (auto s = command->fork_held(argv); !s) return s.error();
  if (auto s = sampler.add_target(command->pid()); !s) return s.error();
  // Until exec the child is a copy of us: snapshot that image now, as a
  // sample taken before exec may be read only after it (the exec event then
  // starts the command's own image).
  processes.current_image(command->pid());
  if (auto s = command->release(); !s) return s.error();
  return command;
}

// Polls the sampler until a signal, the deadline, or every target is gone;
// returns why it stopped.
gsym::Expected<std::string> sample_until_stopped(Sampler& sampler, const TargetOptions& targets,
                                                 LaunchedCommand* command,
                                                 std::chrono::steady_clock::time_point start,
                                                 const std::function<void()>& after_poll) {
  const auto deadline =
      targets.duration_s
          ? start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(*targets.duration_s))
          : std::chrono::steady_clock::time_point::max();
  auto next_liveness_check = start;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (g_stop_signal) return std::string("interrupted");
    if (now >= deadline) return std::string("duration");
    if (now >= next_liveness_check) {
      next_liveness_check = now + std::chrono::milliseconds(100);
      if ((command && command->exited()) ||
          (!targets.pids.empty() &&
           std::none_of(targets.pids.begin(), targets.pids.end(), process_alive)))
        return std::string("targets exited");
    }
    // Short waits: samples arrive without wakeups (see Sampler::poll), and a
    // short-lived process must be read (maps, unwinding) while it exists.
    auto wait = std::min<std::chrono::steady_clock::duration>(deadline - now,
                                                              std::chrono::milliseconds(10));
    int timeout_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
    if (auto polled = sampler.poll(std::max(timeout_ms, 1)); !polled) return polled.error();
    after_poll();
  }
}

// Capture::lost: the sampler's losses by name, then the stacks the CFI
// unwinder kept but cut short ("unwind_stack_copy_too_small", ...).
void record_losses(const SamplerCounters& counters, const StackCopyUnwinder* unwinder,
                   Capture& capture) {
  for (uint32_t c = 0; c < PROFILE_COUNTER_COUNT; ++c) {
    const CounterInfo info = counter_info(static_cast<enum profile_counter>(c));
    if (info.kind == CounterKind::Lost) capture.lost[info.name] = counters.kernel[c];
  }
  capture.lost[kLostBadRecords] = counters.bad_records;
  if (unwinder)
    for (const auto& [reason, count] : unwinder->truncations()) capture.lost[reason] = count;
}

}  // namespace

gsym::Expected<Capture> run_sampling_session(const SessionOptions& options, SessionStats* stats) {
  const TargetOptions& targets = options.targets;
  if (std::string problem = validate_target_options(targets); !problem.empty())
    return gsym::Error(problem);
  for (uint32_t pid : targets.pids)
    if (!process_alive(pid)) return gsym::Error("no process with pid " + std::to_string(pid));

  ProcessTable processes(ProcSource::live());
  PerfMaps perf_maps;
  StackAggregator aggregator(processes, &perf_maps);
  StackCopyUnwinder stack_unwinder(processes);
  AggregatingSink sink(aggregator, stack_unwinder, processes);
  Capture capture = new_capture(targets);

  StopSignals stop_signals;
  auto sampler = Sampler::start(sampler_options_for(options), sink);
  if (!sampler) return sampler.error();
  // What this kernel cannot do, and what that costs, before any sample.
  for (const std::string& notice : (*sampler)->notices())
    std::fprintf(stderr, "gsymprof: %s\n", notice.c_str());
  // Mappings come from the kernel as they are made; /proc is read again only
  // if some of those events were lost (or the kernel has no side-band).
  Sampler* sampler_ptr = sampler->get();
  if ((*sampler)->sideband_on())
    processes.use_sideband([sampler_ptr] { return sampler_ptr->sideband_lost(); });

  // Snapshot the named processes now, in case they exit before sampling.
  for (uint32_t pid : targets.pids) processes.current_image(pid);
  std::unique_ptr<LaunchedCommand> command;
  if (!targets.command.empty()) {
    auto launched = launch_command(targets.command, **sampler, processes);
    if (!launched) return launched.error();
    command = std::move(*launched);
  }

  capture.start_time_unix_ns = unix_time_ns();
  const auto start = std::chrono::steady_clock::now();
  auto report_module_uses = [&] {
    if (!options.on_module_used) return;
    for (const StackAggregator::ModuleUse& use : aggregator.take_new_module_uses()) {
      const ProcessImage& image = processes.image(use.image);
      options.on_module_used(image.modules[static_cast<size_t>(use.module)]);
    }
  };
  gsym::Expected<std::string> stop_reason =
      sample_until_stopped(**sampler, targets, command.get(), start, report_module_uses);
  if (!stop_reason) return stop_reason.error();
  capture.duration_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());

  if (auto drained = (*sampler)->drain(); !drained) return drained.error();
  SamplerCounters counters = (*sampler)->counters();
  const size_t ring_buffer_bytes = (*sampler)->ring_buffer_bytes();
  const bool sideband_on = (*sampler)->sideband_on();
  sampler->reset();  // detach: stop sampling before the user-space work
  if (sideband_on)
    processes.use_sideband([lost = counters[PROFILE_COUNTER_SIDEBAND_LOST]] { return lost; });
  // Images that missed an address since their last read, while alive.
  processes.refresh_stale();
  sink.flush();
  if (command) command->terminate();

  JitReport jit;
  aggregator.build(capture, &jit);
  // Named now, from this kernel: the capture may be symbolized elsewhere.
  attach_running_kernel_symbols(capture);
  record_losses(counters, targets.call_graph == "dwarf" ? &stack_unwinder : nullptr, capture);
  if (stats) {
    stats->counters = counters;
    stats->unique_raw_stacks = aggregator.unique_stacks();
    stats->maps_reads = processes.map_reads();
    stats->stop_reason = *stop_reason;
    stats->command_exit_status = command ? command->status() : -1;
    stats->jit = std::move(jit);
    stats->frame_pointer_steps = stack_unwinder.frame_pointer_steps();
    stats->frame_pointer_stacks = stack_unwinder.frame_pointer_stacks();
    stats->ring_buffer_bytes = ring_buffer_bytes;
  }
  return capture;
}

namespace {

// Kernel stacks the sampler had to cut or could not read, with what it means.
void print_kernel_stack_counters(const SamplerCounters& counters) {
  const uint64_t kernel_truncated = counters[PROFILE_COUNTER_KERNEL_TRUNCATED];
  const uint64_t kernel_errors = counters[PROFILE_COUNTER_KERNEL_STACK_ERROR];
  if (kernel_truncated || kernel_errors)
    std::fprintf(stderr,
                 "gsymprof: kernel stacks: %" PRIu64 " cut at %d frames, %" PRIu64
                 " unreadable (those samples keep their user frames)\n",
                 kernel_truncated, PROFILE_MAX_KERNEL_FRAMES, kernel_errors);
}

// JIT code: how much a perf map named, and where one was missing, with the
// flag that writes one.
void print_jit_summary(const Capture& capture, const SessionStats& stats) {
  const JitReport& jit = stats.jit;
  if (jit.named_samples)
    std::fprintf(stderr, "gsymprof: JIT code: %" PRIu64 " samples named from perf maps (%zu symbols)\n",
                 jit.named_samples, capture.jit_symbols.size());
  if (!jit.unnamed_samples) return;
  // The processes with most such samples first, a few per line.
  std::vector<std::pair<uint64_t, uint32_t>> by_samples;
  for (const auto& [pid, samples] : jit.unnamed_by_pid) by_samples.emplace_back(samples, pid);
  std::sort(by_samples.begin(), by_samples.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  constexpr size_t kShown = 8;
  std::string without, partial;
  size_t without_count = 0, partial_count = 0;
  for (const auto& [samples, pid] : by_samples) {
    auto has = jit.has_map.find(pid);
    const bool has_map = has != jit.has_map.end() && has->second;
    std::string& list = has_map ? partial : without;
    size_t& count = has_map ? partial_count : without_count;
    if (++count <= kShown)
      list += (list.empty() ? "" : ", ") + std::to_string(pid) + " (" + std::to_string(samples) + ")";
  }
  if (without_count > kShown) without += " and " + std::to_string(without_count - kShown) + " more";
  if (partial_count > kShown) partial += " and " + std::to_string(partial_count - kShown) + " more";
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples in anonymous executable memory (JIT code?) that no perf map names\n",
               jit.unnamed_samples);
  if (!without.empty())
    std::fprintf(stderr,
                 "gsymprof:   no /tmp/perf-PID.map for pid (samples): %s; have the runtime write one "
                 "(node --perf-basic-prof, python -X perf, a Java perf-map agent)\n",
                 without.c_str());
  if (!partial.empty())
    std::fprintf(stderr, "gsymprof:   perf map covers not all of it, pid (samples): %s\n", partial.c_str());
}

}  // namespace

LossSummary summarize_losses(const Capture& capture) {
  LossSummary losses;
  for (const auto& [reason, count] : capture.lost) {
    const bool truncation = reason.starts_with(kTruncatedByUnwinderPrefix);
    std::string& list = truncation ? losses.truncation_reasons : losses.lost_reasons;
    list += (list.empty() ? "" : ", ") + reason + " " + std::to_string(count);
    if (!truncation) losses.lost += count;  // unwind_*: kept
  }
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
    auto it = capture.lost.find(reason);
    return it == capture.lost.end() ? uint64_t{0} : it->second;
  };
  if (uint64_t n = count_of(unwind_stop_loss_key(UnwindStop::StackCopyTooSmall)))
    losses.fixes += std::to_string(n) +
                    " stacks are deeper than the copied user stack: copy more with "
                    "--call-graph dwarf,SIZE (gsymprof: up to " +
                    std::to_string(kMaxStackCopyBytes) + " bytes; perf record: 65528)";
  if (has_kernel_frames(capture)) losses.kernel_problem = capture.kernel.error;
  return losses;
}

void print_losses(const LossSummary& losses) {
  // Reason names are capture.lost's keys, fixed strings today; escaped so the
  // terminal stays safe should one ever come from elsewhere (a capture file).
  std::fprintf(stderr, "gsymprof: lost by reason: %s\n", escape_control(losses.lost_reasons).c_str());
  std::fprintf(stderr, "gsymprof: truncated stacks: %" PRIu64 "%s%s%s\n", losses.truncated,
               losses.truncation_reasons.empty() ? "" : " (",
               escape_control(losses.truncation_reasons).c_str(),
               losses.truncation_reasons.empty() ? "" : ")");
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

void print_sampling_summary(const Capture& capture, const SessionStats& stats) {
  const LossSummary losses = summarize_losses(capture);
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples taken, %" PRIu64 " recorded, %" PRIu64
               " lost (%.2f s at %u Hz, stopped: %s)\n",
               stats.counters.samples(), capture.samples, losses.lost,
               static_cast<double>(capture.duration_ns) / 1e9, capture.frequency_hz,
               stats.stop_reason.c_str());
  print_losses(losses);
  if (stats.frame_pointer_stacks)
    std::fprintf(stderr,
                 "gsymprof: frame-pointer fallback: %" PRIu64 " frames in %" PRIu64
                 " stacks where no CFI covered the code (JIT code, assembly)\n",
                 stats.frame_pointer_steps, stats.frame_pointer_stacks);
  print_jit_summary(capture, stats);
  print_kernel_stack_counters(stats.counters);
  if (stats.counters.sample_records)
    std::fprintf(stderr, "gsymprof: ring buffer: %zu KiB, %" PRIu64 " bytes per sample record\n",
                 stats.ring_buffer_bytes >> 10,
                 stats.counters.sample_record_bytes / stats.counters.sample_records);
  if (const uint64_t lost = stats.counters[PROFILE_COUNTER_SIDEBAND_LOST])
    std::fprintf(stderr,
                 "gsymprof: side-band events lost: %" PRIu64
                 " (ring buffer full); mappings were read from /proc/PID/maps instead, too late "
                 "for processes that had exited (a larger -F interval or fewer targets help)\n",
                 lost);
}

}  // namespace gsymprof
