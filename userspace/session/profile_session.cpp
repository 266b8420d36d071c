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
#include <algorithm>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "userspace/process/kernel_symbols.h"
#include "userspace/process/vdso_file.h"
#include "userspace/process/process_image.h"
#include "userspace/assemble/capture_assembler.h"
#include "userspace/base/parse_number.h"
#include "userspace/base/pseudo_file.h"
#include "userspace/base/text_escape.h"
#include "userspace/base/text_fields.h"
#include "userspace/session/live_session.h"

namespace gsymprof {
namespace {


// /proc/PID/stat: one line, its command name the only field that may hold
// spaces or parentheses (so fields are counted after the last ')').
constexpr size_t kMaxProcStatBytes = 4096;
std::optional<std::string> proc_stat_line(uint32_t pid) {
  gsym::Expected<std::string> text =
      read_pseudo_file("/proc/" + std::to_string(pid) + "/stat", kMaxProcStatBytes);
  if (!text) return std::nullopt;
  return text->substr(0, text->find('\n'));
}

// A process is alive until it is gone or a zombie.
bool process_alive(uint32_t pid) {
  const std::optional<std::string> line = proc_stat_line(pid);
  if (!line) return false;
  const std::string& text = *line;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

// A kernel thread has no user memory, hence no user stack: its flags
// (/proc/PID/stat, the 9th field) have PF_KTHREAD.
bool is_kernel_thread(uint32_t pid) {
  constexpr uint64_t kPfKthread = 0x00200000;
  const std::optional<std::string> line = proc_stat_line(pid);
  if (!line) return false;
  const std::string& text = *line;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::string_view rest = std::string_view(text).substr(paren + 1);
  std::string_view field;
  for (int i = 3; i <= 9; ++i) field = next_field(rest);  // state is the 3rd field
  const std::optional<uint64_t> flags = parse_unsigned<uint64_t>(field);
  return flags && (*flags & kPfKthread) != 0;
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

  // SIGTERM, a grace period, then SIGKILL; the same for `descendants`
  // (the processes the command started) that still run, so none is left
  // behind. A pid that is no longer a descendant (reused) is not in the
  // list: the fork tracepoint drops a pid reused by another process.
  void terminate(const std::vector<uint32_t>& descendants = {}) {
    auto alive = [](uint32_t pid) { return process_alive(pid); };  // zombies are done
    std::vector<uint32_t> others;
    for (uint32_t pid : descendants)
      if (static_cast<pid_t>(pid) != pid_ && static_cast<pid_t>(pid) != ::getpid() && alive(pid))
        others.push_back(pid);
    if (reaped_ && others.empty()) return;
    if (!reaped_) ::kill(pid_, SIGTERM);
    for (uint32_t pid : others) ::kill(static_cast<pid_t>(pid), SIGTERM);
    auto all_gone = [&] {
      return exited() && std::none_of(others.begin(), others.end(), alive);
    };
    for (int i = 0; i < 100 && !all_gone(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (uint32_t pid : others)
      if (alive(pid)) ::kill(static_cast<pid_t>(pid), SIGKILL);
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

// Keeps gsymprof out of its own profile: the command it launches is a copy
// of gsymprof until it execs (held in a read, then in execve under our
// name), and those samples are gsymprof's, not the command's. They are
// dropped until the command's exec event or its new name shows; everything
// else passes to the assembler unchanged.
class WithoutOwnPreExec final : public EventSink {
 public:
  explicit WithoutOwnPreExec(EventSink& next) : next_(next) {
    char name[17] = {};
    int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = ::read(fd, name, 16);
      ::close(fd);
      if (n > 0) own_comm_.assign(name, static_cast<size_t>(n));
      while (!own_comm_.empty() && own_comm_.back() == '\n') own_comm_.pop_back();
    }
  }
  void launched(uint32_t pid) { launched_ = pid; }

  void on_sample(const RawSample& s) override {
    if (own(s.pid, s.comm)) return;
    next_.on_sample(s);
  }
  void on_stack_copy(const RawStackCopy& c) override {
    if (own(c.pid, c.comm)) return;
    next_.on_stack_copy(c);
  }
  void on_short_waits(const RawShortWaits& w) override {
    if (own(w.pid, w.comm)) return;
    next_.on_short_waits(w);
  }
  void on_exec(uint32_t tgid, uint64_t mm) override {
    if (tgid == launched_) exec_seen_ = true;
    next_.on_exec(tgid, mm);
  }
  void on_mapping(const RawMapping& m) override { next_.on_mapping(m); }
  void on_fork(uint32_t parent, uint32_t child, uint64_t mm) override { next_.on_fork(parent, child, mm); }
  void on_exit(uint32_t tgid) override { next_.on_exit(tgid); }
  void on_lost(std::string_view reason, uint64_t count) override { next_.on_lost(reason, count); }

 private:
  bool own(uint32_t pid, std::string_view comm) {
    return pid == launched_ && !exec_seen_ && comm == own_comm_;
  }
  EventSink& next_;
  std::string own_comm_;
  uint32_t launched_ = 0;
  bool exec_seen_ = false;
};




// Forks the command held before exec, makes it a target, snapshots its
// image and lets it run.
gsym::Expected<std::unique_ptr<LaunchedCommand>> launch_command(const std::vector<std::string>& argv,
                                                                Sampler& sampler,
                                                                ProcessTable& processes,
                                                                WithoutOwnPreExec& sink) {
  auto command = std::make_unique<LaunchedCommand>();
  if (auto s = command->fork_held(argv); !s) return s.error();
  sink.launched(command->pid());
  if (auto s = sampler.add_target(command->pid()); !s) return s.error();
  // Until exec the child is a copy of us: snapshot that image now, as a
  // sample taken before exec may be read only after it (the exec event then
  // starts the command's own image).
  processes.current_image(command->pid());
  if (auto s = command->release(); !s) return s.error();
  // Without the side-band no exec event comes: the snapshot is gsymprof's
  // copy, whose mappings must not name the command's samples.
  if (!sampler.sideband_on()) processes.forget_image(command->pid());
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
    if (stop_requested()) return std::string("interrupted");
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

// The -p targets that are kernel threads (no user stack), once the targets
// are known to be valid and alive.
gsym::Expected<std::vector<uint32_t>> checked_kernel_threads(const TargetOptions& targets) {
  if (std::string problem = validate_target_options(targets); !problem.empty()) return gsym::Error(problem);
  std::vector<uint32_t> kernel_threads;
  for (uint32_t pid : targets.pids) {
    if (!process_alive(pid)) return gsym::Error("no process with pid " + std::to_string(pid));
    if (is_kernel_thread(pid)) kernel_threads.push_back(pid);
  }
  return kernel_threads;
}

// After each poll: the live line's numbers (every 500 ms), the modules
// stacks started to use.
struct PollProgress {
  const SessionOptions& options;
  CaptureAssembler& assembler;
  std::chrono::steady_clock::time_point start, next_progress;
  void operator()() {
    const auto now = std::chrono::steady_clock::now();
    if (options.on_progress && now >= next_progress) {
      next_progress = now + std::chrono::milliseconds(500);
      options.on_progress(assembler.aggregator().samples(), std::chrono::duration<double>(now - start).count());
    }
    if (!options.on_module_used) return;
    for (const StackAggregator::ModuleUse& use : assembler.take_new_module_uses()) {
      const ProcessImage& image = assembler.processes().image(use.image);
      options.on_module_used(image.modules[static_cast<size_t>(use.module)]);
    }
  }
};

// What the assembler saw: stacks, /proc reads, Python frames, how the
// unwinder found callers.
void take_assembler_stats(SessionStats& stats, CaptureAssembler& assembler) {
  stats.unique_raw_stacks = assembler.aggregator().unique_stacks();
  stats.maps_reads = assembler.processes().map_reads();
  stats.python = assembler.python().report();
  stats.frame_pointer_steps = assembler.unwinder().frame_pointer_steps();
  stats.frame_pointer_stacks = assembler.unwinder().frame_pointer_stacks();
  stats.epilogue_steps = assembler.unwinder().epilogue_steps();
  stats.jit_cfi_steps = assembler.unwinder().jit_cfi_steps();
  const CfiCacheStats cfi = assembler.unwinder().cfi_stats();
  stats.jit_cfi_rejected = cfi.jit_code_rejected;
  stats.jit_cfi_rejection = cfi.jit_code_rejection;
}

}  // namespace

gsym::Expected<Capture> run_sampling_session(const SessionOptions& options, SessionStats* stats) {
  const TargetOptions& targets = options.targets;
  gsym::Expected<std::vector<uint32_t>> kernel_threads = checked_kernel_threads(targets);
  if (!kernel_threads) return kernel_threads.error();

  UnwindOptions unwind;
  unwind.max_frames = targets.max_depth;
  CaptureAssembler assembler(ProcSource::live(), unwind);
  ProcessTable& processes = assembler.processes();
  Capture capture = new_capture(targets);

  StopSignals stop_signals;
  WithoutOwnPreExec sink(assembler);
  auto sampler = Sampler::start(sampler_options_for(options.targets, options.ring_buffer_bytes), sink);
  if (!sampler) return sampler.error();
  // What this kernel cannot do, and what that costs, before any sample.
  std::vector<std::string> features_off = (*sampler)->notices();
  if (options.on_started) options.on_started(features_off);
  // Mappings come from the kernel as they are made; /proc is read again only
  // if some of those events were lost (or the kernel has no side-band).
  Sampler* sampler_ptr = sampler->get();
  if ((*sampler)->sideband_on())
    assembler.use_sideband([sampler_ptr] { return sampler_ptr->sideband_lost(); });
  read_python_frames(assembler, sampler_ptr);

  // Snapshot the named processes now, in case they exit before sampling.
  snapshot_processes(assembler, targets.pids);
  std::unique_ptr<LaunchedCommand> command;
  if (!targets.command.empty()) {
    auto launched = launch_command(targets.command, **sampler, processes, sink);
    if (!launched) return launched.error();
    command = std::move(*launched);
  }

  capture.start_time_unix_ns = unix_time_ns();
  const auto start = std::chrono::steady_clock::now();
  // steady_clock is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns: sample
  // times become offsets from the capture's start. Nothing was read from
  // the rings yet (the first poll comes below).
  if (options.sample_times)
    assembler.keep_sample_times(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count()));
  PollProgress after_poll{options, assembler, start, start};
  gsym::Expected<std::string> stop_reason =
      sample_until_stopped(**sampler, targets, command.get(), start, after_poll);
  if (!stop_reason) return stop_reason.error();
  capture.duration_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());

  if (auto drained = (*sampler)->drain(); !drained) return drained.error();
  SamplerCounters counters = (*sampler)->counters();
  const size_t ring_buffer_bytes = (*sampler)->ring_buffer_bytes();
  const bool sideband_on = (*sampler)->sideband_on();
  features_off = (*sampler)->notices();  // with any the session added
  // Everything the command started (its descendants, also those its exit
  // orphaned), stopped with it when sampling ends first.
  std::vector<uint32_t> command_tree;
  if (command) command_tree = (*sampler)->targets();
  read_python_frames(assembler, nullptr);
  sampler->reset();  // detach: stop sampling before the user-space work
  if (sideband_on)
    assembler.use_sideband([lost = counters[PROFILE_COUNTER_SIDEBAND_LOST]] { return lost; });
  // Images that missed an address since their last read, while alive.
  assembler.finish();
  assembler.release_unwinder();
  const bool command_stopped = command && !command->exited();
  if (command) command->terminate(command_tree);

  JitReport jit;
  report_losses(counters, assembler);
  assembler.build(capture, &jit, targets.call_graph == CallGraph::Dwarf);
  // Named now, from this kernel: the capture may be symbolized elsewhere.
  attach_running_kernel_symbols(capture);
  if (stats) {
    take_assembler_stats(*stats, assembler);
    stats->counters = counters;
    stats->stop_reason = *stop_reason;
    stats->command_exit_status = command ? command->status() : -1;
    stats->command_stopped = command_stopped;
    if (command) stats->command_name = targets.command.front();
    stats->jit = std::move(jit);
    stats->ring_buffer_bytes = ring_buffer_bytes;
    stats->kernel_threads = std::move(*kernel_threads);
    stats->features_off = std::move(features_off);
  }
  return capture;
}

}  // namespace gsymprof
