#include "userspace/sample/sampler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bpf/profile.h"
#include "bpf/profile.skel.h"
#include "userspace/base/parse_number.h"
#include "userspace/base/pseudo_file.h"
#include "userspace/sample/bpf_ring_reader.h"
#include "userspace/sample/kernel_features.h"
#include "userspace/sample/perf_sideband.h"
#include "userspace/sample/ring_records.h"
#include "userspace/sample/sampling_events.h"

namespace gsymprof {
namespace {

// libbpf's last warning, so an error can say more than an errno.
std::string& last_libbpf_message() {
  static std::string message;
  return message;
}

int libbpf_print(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  // The verifier's log comes as one message: printed whole when debugging.
  if (std::getenv("GSYMPROF_DEBUG_BPF")) {
    va_list copy;
    va_copy(copy, args);
    std::vfprintf(stderr, format, copy);
    va_end(copy);
  }
  char buffer[512];
  int n = std::vsnprintf(buffer, sizeof(buffer), format, args);
  if (n > 0) {
    std::string text(buffer);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!text.empty()) last_libbpf_message() = text;
  }
  return 0;
}

gsym::Error bpf_error(const std::string& what, int error) {
  std::string message = what + ": " + std::strerror(error < 0 ? -error : error);
  if (!last_libbpf_message().empty()) message += " (libbpf: " + last_libbpf_message() + ")";
  if (error == -EPERM || error == EPERM) message += "; run as root";
  return gsym::Error(message);
}

bool is_power_of_two(size_t n) { return n && (n & (n - 1)) == 0; }

}  // namespace

gsym::Expected<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::string_view rest(text);
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.remove_suffix(1);
  if (rest.empty()) return gsym::Error("empty CPU list");
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    size_t dash = item.find('-');
    std::optional<uint32_t> first = parse_unsigned<uint32_t>(item.substr(0, dash));
    std::optional<uint32_t> last =
        dash == std::string_view::npos ? first : parse_unsigned<uint32_t>(item.substr(dash + 1));
    if (!first || !last || *last < *first || *last > 65535)
      return gsym::Error("bad CPU list '" + text + "'");
    for (uint32_t cpu = *first; cpu <= *last; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus;
}

struct Sampler::State {
  EventSink* sink = nullptr;
  profile_bpf* skel = nullptr;
  std::unique_ptr<BpfRingReader> ring;
  // The cpu-clock events sample_stack runs on; per thread (-p) while
  // cpu_events_per_thread, until a target forks.
  std::unique_ptr<SamplingEvents> cpu_events;
  bool cpu_events_per_thread = false;
  uint32_t frequency_hz = 0;
  std::vector<int> cpus;  // online at the start
  // The kernel's side-band records (null when the kernel refused them).
  std::unique_ptr<PerfSideband> sideband;
  std::unique_ptr<SidebandTargets> targets;
  uint64_t sideband_read_at = 0;  // PerfSideband::read's last time
  int epoll_fd = -1;
  std::vector<std::string> notices;
  bool stack_copy = false;
  uint64_t bad_records = 0;
  uint64_t sample_records = 0, sample_record_bytes = 0;
  size_t ring_buffer_bytes = 0;
  bool off_cpu = false;             // the off-CPU programs are attached
  uint64_t short_waits_read_at = 0; // monotonic ns of the last short_waits read
  std::vector<bpf_link*> off_cpu_links;
  RingRecordScratch scratch;

  ~State() {
    if (epoll_fd >= 0) ::close(epoll_fd);
    cpu_events.reset();  // its links before the program they hold
    for (bpf_link* link : off_cpu_links) bpf_link__destroy(link);
    if (skel) profile_bpf__destroy(skel);
  }

  static void on_record(void* context, std::span<const uint8_t> record) {
    static_cast<State*>(context)->deliver(record.data(), record.size());
  }

  // Side-band events older than a sample go first: the rings are read
  // again when the sample is newer than their last read (perf_sideband.h).
  void sideband_before(uint64_t time_ns) {
    if (!sideband) return;
    if (time_ns >= sideband_read_at) sideband_read_at = sideband->read();
    sideband->deliver_until(time_ns, *targets, *sink);
  }

  // Hands the sink the short waits summed since the last call, taking
  // each entry out of the map (lookup-and-delete: none is counted twice).
  void deliver_short_waits() {
    short_waits_read_at = monotonic_ns();
    const bpf_map* map = skel->maps.short_waits;
    profile_short_wait_key key{}, next{};
    const profile_short_wait_key* previous = nullptr;
    std::vector<profile_short_wait_key> keys;
    for (uint32_t steps = 0; steps < bpf_map__max_entries(map); ++steps) {
      if (bpf_map__get_next_key(map, previous, &next, sizeof(next)) != 0) break;
      keys.push_back(next);
      key = next;
      previous = &key;
    }
    for (const profile_short_wait_key& k : keys) {
      profile_short_wait_value value{};
      if (bpf_map__lookup_and_delete_elem(map, &k, sizeof(k), &value, sizeof(value), 0) != 0) {
        // Before Linux 5.14 hash maps cannot: read, then delete (an
        // increment in between is lost, the risk of an old kernel).
        if (bpf_map__lookup_elem(map, &k, sizeof(k), &value, sizeof(value), 0) != 0) continue;
        bpf_map__delete_elem(map, &k, sizeof(k), 0);
      }
      gsymprof::deliver_short_waits(k, value, *sink);
    }
  }

  void sideband_until(uint64_t time_ns) {
    if (sideband) sideband->deliver_until(time_ns, *targets, *sink);
  }

  void deliver(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> record(data, size);
    // Side-band events older than the sample go before it.
    if (auto time = ring_record_time(record)) sideband_before(*time);
    const RingRecordKind kind = decode_ring_record(record, scratch, *sink);
    if (kind == RingRecordKind::Bad) {
      ++bad_records;
      return;
    }
    // A Python stack is part of its sample's cost, not a sample.
    if (kind == RingRecordKind::Sample) ++sample_records;
    sample_record_bytes += size;
  }
};

Sampler::Sampler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Sampler::~Sampler() = default;

namespace {

// Side-band ring per CPU: 64 pages (256 KiB), room for about 2,000 mapping
// records between two reads; the reader wakes at every record.
constexpr size_t kSidebandRingPages = 64;

// Sets the program's knobs for `options` on this kernel; `notices` gets a
// line for each thing the kernel cannot do and what is lost.
gsym::Status configure(profile_bpf* skel, const SamplerOptions& options, const KernelFeatures& kernel,
                       size_t ring_bytes, bool* stack_copy, std::vector<std::string>& notices) {
  if (const KernelFeature* missing = kernel.missing_for_sampling())
    return gsym::Error(std::string("this kernel (") + kernel.release + ") cannot run the sampler: it lacks " +
                       missing->name + " (Linux " + missing->since + " and later have it)");
  *stack_copy = options.stack_copy_bytes != 0;
  for (const char* needed : {"task_pt_regs", "ringbuf_dynptr"}) {
    if (*stack_copy && !kernel.has(needed)) {
      const KernelFeature& f = kernel.feature(needed);
      notices.push_back(std::string("call graph: this kernel lacks ") + f.name + " (Linux " +
                        f.since + "): " + f.without);
      *stack_copy = false;
    }
  }
  skel->rodata->sample_mode = *stack_copy ? PROFILE_MODE_STACK_COPY : PROFILE_MODE_FRAME_POINTER;
  skel->rodata->stack_copy_bytes = options.stack_copy_bytes;
  skel->rodata->have_find_vma = kernel.has("find_vma");
  if (*stack_copy && !kernel.has("find_vma"))
    notices.push_back(std::string("stack copy: this kernel lacks bpf_find_vma (Linux 5.17): ") +
                      kernel.feature("find_vma").without);
  skel->rodata->wakeup_bytes = ring_bytes / 4;
  skel->rodata->filter_by_tgid = options.filter_by_tgid;
  skel->rodata->follow_forks = options.follow_forks;
  skel->rodata->kernel_stacks = options.kernel_stacks;
  skel->rodata->self_tgid = static_cast<uint32_t>(::getpid());
  skel->rodata->off_cpu_min_ns = options.off_cpu_min_ns;
  skel->rodata->off_cpu_runqueue = options.off_cpu_runqueue;
  skel->rodata->python_frames = options.python_frames && kernel.has("bpf_loop");
  if (options.python_frames && !kernel.has("bpf_loop"))
    notices.push_back(std::string("Python frames off: this kernel lacks bpf_loop (Linux 5.17): ") +
                      kernel.feature("bpf_loop").without);
  const bool off_cpu = options.off_cpu && kernel.has("off_cpu");
  if (options.off_cpu && !off_cpu) {
    if (!options.cpu_samples)
      return gsym::Error(std::string("--off-cpu: this kernel lacks ") + kernel.feature("off_cpu").name +
                         " (Linux " + kernel.feature("off_cpu").since + ")");
    notices.push_back(std::string("off-CPU time off: this kernel lacks ") + kernel.feature("off_cpu").name +
                      " (Linux " + kernel.feature("off_cpu").since + "): " + kernel.feature("off_cpu").without);
  }
  if (!off_cpu) {
    // Hash maps are allocated whole at load: off-CPU's (about 6 MB of
    // kernel memory) only when its programs run.
    for (bpf_map* map : {skel->maps.off_cpu_starts, skel->maps.off_cpu_pending, skel->maps.short_waits})
      bpf_map__set_max_entries(map, 1);
  }
  bpf_program__set_autoload(skel->progs.off_cpu_switch, off_cpu);
  bpf_program__set_autoload(skel->progs.off_cpu_sys_exit, off_cpu);
  bpf_program__set_autoload(skel->progs.sample_stack, options.cpu_samples);
  // Following children is needed only with a target filter.
  const bool follow = options.filter_by_tgid && options.follow_forks;
  if (follow && !kernel.has("raw_tracepoint")) {
    notices.push_back(std::string("fork following off: this kernel lacks raw tracepoint programs (Linux 4.17): ") +
                      kernel.feature("raw_tracepoint").without);
  }
  bpf_program__set_autoload(skel->progs.follow_fork, follow && kernel.has("raw_tracepoint"));
  int err = bpf_map__set_max_entries(skel->maps.events, static_cast<uint32_t>(ring_bytes));
  if (err) return bpf_error("cannot size the ring buffer", err);
  return gsym::Status::success();
}

// The cpu-clock events sample_stack runs on: an event per CPU, or with
// per_thread_events an event per thread of each target (sampling_events.h),
// unless the targets have so many threads that an event per CPU costs less.
gsym::Status attach_cpu_clocks(Sampler::State& state, const SamplerOptions& options,
                               const std::vector<int>& cpus) {
  state.frequency_hz = options.frequency_hz;
  state.cpus = cpus;
  state.cpu_events = std::make_unique<SamplingEvents>(state.skel->progs.sample_stack, options.frequency_hz);
  if (options.filter_by_tgid && options.per_thread_events) {
    size_t threads = 0;
    for (uint32_t tgid : options.target_tgids)
      if (auto tids = process_threads(tgid)) threads += tids->size();
    if (threads <= kMaxThreadEvents) {
      state.cpu_events_per_thread = true;
      for (uint32_t tgid : options.target_tgids) {
        auto status = state.cpu_events->attach_process(tgid);
        // A target gone already is the session's to notice (it stops when
        // every target has exited); it has nothing left to sample.
        if (!status && status.error().code != gsym::ErrorCode::NotFound) return status;
      }
      return gsym::Status::success();
    }
    state.notices.push_back("sampling every CPU: the targets have " + std::to_string(threads) +
                            " threads, above the " + std::to_string(kMaxThreadEvents) +
                            " that get an event each; every CPU is interrupted at the rate, not only "
                            "those running a target");
  }
  return state.cpu_events->attach_cpus(cpus);
}

// --off-cpu, --wall: the sched_switch and sys_exit tracepoints. Without
// them the CPU samples go on (--wall), with a notice of what is lost.
gsym::Status attach_off_cpu(Sampler::State& state, const SamplerOptions& options,
                            const KernelFeatures& kernel) {
  if (!bpf_program__autoload(state.skel->progs.off_cpu_switch)) return gsym::Status::success();
  auto lost = [&](const std::string& why) -> gsym::Status {
    if (!options.cpu_samples) return gsym::Error("--off-cpu: " + why);
    state.notices.push_back("off-CPU time off: " + why + ": " + kernel.feature("off_cpu").without);
    return gsym::Status::success();
  };
  for (bpf_program* program : {state.skel->progs.off_cpu_switch, state.skel->progs.off_cpu_sys_exit}) {
    bpf_link* link = bpf_program__attach(program);
    if (!link)
      return lost(std::string("cannot attach ") + bpf_program__name(program) + " (" + std::strerror(errno) + ")");
    state.off_cpu_links.push_back(link);
  }
  state.off_cpu = true;
  return gsym::Status::success();
}

// One wait for both: the BPF ring buffer's epoll descriptor and the
// side-band rings.
gsym::Status wait_on_rings(Sampler::State& state) {
  state.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (state.epoll_fd < 0) return gsym::Error(std::string("epoll_create1: ") + std::strerror(errno));
  std::vector<int> wait_fds{state.ring->wait_fd()};
  if (state.sideband)
    wait_fds.insert(wait_fds.end(), state.sideband->fds().begin(), state.sideband->fds().end());
  for (int fd : wait_fds) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(state.epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0)
      return gsym::Error(std::string("epoll_ctl: ") + std::strerror(errno));
  }
  return gsym::Status::success();
}

// The kernel's side-band records and the fork tracepoint, or a notice of
// what is lost without them.
void open_sideband(Sampler::State& state, const SamplerOptions& options, const KernelFeatures& kernel,
                   const std::vector<int>& cpus) {
  state.targets = std::make_unique<SidebandTargets>(options.filter_by_tgid, options.follow_forks);
  const uint64_t now = monotonic_ns();
  for (uint32_t tgid : options.target_tgids) state.targets->add(tgid, now);
  if (kernel.has("perf_sideband")) {
    auto sideband = PerfSideband::open(cpus, kSidebandRingPages);
    if (sideband)
      state.sideband = std::move(*sideband);
    else
      state.notices.push_back("side-band off: " + sideband.error().message + "; " +
                              kernel.feature("perf_sideband").without);
  } else {
    state.notices.push_back(std::string("side-band off: this kernel refuses perf's side-band records; ") +
                            kernel.feature("perf_sideband").without);
  }
  if (options.filter_by_tgid && options.follow_forks && state.skel->links.follow_fork == nullptr &&
      bpf_program__autoload(state.skel->progs.follow_fork)) {
    state.skel->links.follow_fork = bpf_program__attach(state.skel->progs.follow_fork);
    if (!state.skel->links.follow_fork)
      state.notices.push_back(std::string("fork following off: cannot attach the fork tracepoint (") +
                              std::strerror(errno) + "): " + kernel.feature("raw_tracepoint").without);
  }
}

}  // namespace

gsym::Expected<std::unique_ptr<Sampler>> Sampler::start(const SamplerOptions& options,
                                                         EventSink& sink) {
  libbpf_set_print(libbpf_print);
  last_libbpf_message().clear();
  if (options.frequency_hz == 0) return gsym::Error("frequency must be at least 1 Hz");
  if (options.stack_copy_bytes % 8 != 0 || options.stack_copy_bytes > PROFILE_MAX_STACK_COPY)
    return gsym::Error("stack copy size must be a multiple of 8 up to " +
                       std::to_string(PROFILE_MAX_STACK_COPY));

  auto online = read_pseudo_file("/sys/devices/system/cpu/online", 4096);
  if (!online) return online.error();
  auto cpus = parse_cpu_list(*online);
  if (!cpus) return gsym::Error("/sys/devices/system/cpu/online: " + cpus.error().message);

  size_t ring_bytes = options.ring_buffer_bytes;
  if (ring_bytes == 0) {
    auto [typical, largest] = record_bytes_for(options);
    ring_bytes = ring_buffer_bytes_for(cpus->size(), options.frequency_hz, typical, largest, options.ring_sizing);
  }
  if (!is_power_of_two(ring_bytes) || ring_bytes < 4096)
    return gsym::Error("ring buffer size must be a power of two >= 4096");

  const KernelFeatures kernel = probe_kernel_features();
  libbpf_set_print(libbpf_print);
  auto state = std::make_unique<State>();
  state->sink = &sink;
  state->skel = profile_bpf__open();
  if (!state->skel) return bpf_error("cannot open the BPF program", errno);
  if (auto status = configure(state->skel, options, kernel, ring_bytes, &state->stack_copy,
                              state->notices);
      !status)
    return status.error();
  state->ring_buffer_bytes = ring_bytes;
  int err = profile_bpf__load(state->skel);
  if (err) return bpf_error("cannot load the BPF program", err);

  for (uint32_t tgid : options.target_tgids) {
    uint8_t one = 1;
    if (bpf_map__update_elem(state->skel->maps.target_tgids, &tgid, sizeof(tgid), &one,
                             sizeof(one), BPF_ANY))
      return bpf_error("cannot add target pid " + std::to_string(tgid), errno);
  }

  auto ring = BpfRingReader::open(bpf_map__fd(state->skel->maps.events), ring_bytes);
  if (!ring) return gsym::Error("cannot read the ring buffer: " + ring.error().message);
  state->ring = std::move(*ring);

  // The side-band first, so no sample can precede the records that explain
  // its mappings. Without it, /proc is read instead (ProcessTable).
  open_sideband(*state, options, kernel, *cpus);
  if (options.cpu_samples)
    if (auto status = attach_cpu_clocks(*state, options, *cpus); !status) return status.error();
  if (options.off_cpu)
    if (auto status = attach_off_cpu(*state, options, kernel); !status) return status.error();
  if (auto status = wait_on_rings(*state); !status) return status.error();
  return std::unique_ptr<Sampler>(new Sampler(std::move(state)));
}

std::vector<uint32_t> Sampler::targets() const {
  std::vector<uint32_t> out;
  const bpf_map* map = state_->skel->maps.target_tgids;
  uint32_t key = 0, next = 0;
  const uint32_t* previous = nullptr;
  // Bounded by the map's size: a key that vanishes meanwhile restarts the
  // walk at most once per entry.
  for (uint32_t steps = 0; steps < bpf_map__max_entries(map); ++steps) {
    if (bpf_map__get_next_key(map, previous, &next, sizeof(next)) != 0) break;
    out.push_back(next);
    key = next;
    previous = &key;
  }
  return out;
}

gsym::Status Sampler::add_target(uint32_t tgid) {
  uint8_t one = 1;
  if (bpf_map__update_elem(state_->skel->maps.target_tgids, &tgid, sizeof(tgid), &one,
                           sizeof(one), BPF_ANY))
    return bpf_error("cannot add target pid " + std::to_string(tgid), errno);
  state_->targets->add(tgid, monotonic_ns());
  if (state_->cpu_events && state_->cpu_events_per_thread)
    if (auto status = state_->cpu_events->attach_process(tgid); !status) return status.error();
  return {};
}

static_assert(PROFILE_PYTHON_ABSENT == UINT32_MAX, "PythonWalk says absent with UINT32_MAX");

gsym::Status Sampler::set_python_process(uint32_t tgid, const PythonWalk& walk) {
  profile_python_process layout{};
  layout.runtime = walk.runtime;
  layout.runtime_tstate_current = walk.runtime_tstate_current;
  layout.runtime_interpreters_head = walk.runtime_interpreters_head;
  layout.interp_threads_head = walk.interp_threads_head;
  layout.tstate_next = walk.tstate_next;
  layout.tstate_native_thread_id = walk.tstate_native_thread_id;
  layout.tstate_cframe = walk.tstate_cframe;
  layout.cframe_current_frame = walk.cframe_current_frame;
  layout.frame_code = walk.frame_code;
  layout.frame_previous = walk.frame_previous;
  layout.frame_prev_instr = walk.frame_prev_instr;
  layout.frame_is_entry = walk.frame_is_entry;
  layout.frame_owner = walk.frame_owner;
  layout.owned_by_cstack = walk.owned_by_cstack;
  layout.code_adaptive = walk.code_adaptive;
  if (bpf_map__update_elem(state_->skel->maps.python_processes, &tgid, sizeof(tgid), &layout,
                           sizeof(layout), BPF_ANY))
    return bpf_error("cannot add the Python process " + std::to_string(tgid), errno);
  return {};
}

void Sampler::forget_python_process(uint32_t tgid) {
  bpf_map__delete_elem(state_->skel->maps.python_processes, &tgid, sizeof(tgid), 0);
}

gsym::Expected<int> Sampler::poll(int timeout_ms) {
  epoll_event events[8];
  int n = epoll_wait(state_->epoll_fd, events, 8, timeout_ms);
  if (n < 0 && errno != EINTR) return gsym::Error(std::string("epoll_wait: ") + std::strerror(errno));
  // Most sample records are submitted without a wakeup (wakeup_bytes in
  // profile.bpf.c), so read the ring after every wait.
  auto drained = drain_rings();
  sample_every_cpu_once_targets_fork();
  // The summed short waits once a second: a map walk costs a system call
  // per entry.
  if (drained && state_->off_cpu && monotonic_ns() - state_->short_waits_read_at >= 1000000000ull)
    state_->deliver_short_waits();
  return drained;
}

gsym::Expected<int> Sampler::drain() {
  auto drained = drain_rings();
  if (drained && state_->off_cpu) state_->deliver_short_waits();
  return drained;
}

// -p targets are sampled with an event per thread until one starts a
// process (follow_fork counts them): inherited events start a whole period
// at each new process, so processes that run less than a period would never
// be sampled (a /bin/true loop: 0.4x the samples its CPU time is worth).
// From then on an event per CPU, as for -- CMD. The new events are attached
// disabled and enabled once the old are gone: no sample is taken twice,
// and the gap is the time to close the old ones.
void Sampler::sample_every_cpu_once_targets_fork() {
  State& state = *state_;
  if (!state.cpu_events_per_thread || !state.skel->bss ||
      __atomic_load_n(&state.skel->bss->target_forks, __ATOMIC_RELAXED) == 0)
    return;
  state.cpu_events_per_thread = false;
  auto every_cpu = std::make_unique<SamplingEvents>(state.skel->progs.sample_stack, state.frequency_hz);
  if (auto status = every_cpu->attach_cpus(state.cpus, false); !status) {
    state.notices.push_back("sampling stays per thread (" + status.error().message +
                            "): a process the targets start is sampled only after a whole period of its CPU time");
    return;
  }
  state.cpu_events = std::move(every_cpu);  // closes the per-thread events
  if (auto enabled = state.cpu_events->enable(); !enabled)
    state.notices.push_back("sampling stopped when the targets started a process: " + enabled.error().message);
}

gsym::Expected<int> Sampler::drain_rings() {
  if (state_->sideband) state_->sideband_read_at = state_->sideband->read();
  // Every sample taken before this time is committed before consume starts
  // (the sampled task cannot run on until its sample is), so consume reads
  // it: side-band events up to this time may go after the samples, not
  // later ones (a pid's next owner must not take its predecessor's samples).
  const uint64_t consume_start = monotonic_ns();
  const int n = static_cast<int>(state_->ring->consume(State::on_record, state_.get()));
  // Side-band records newer than every sample (a process that only mapped,
  // exec'd or exited) go now, while the process may still be read.
  state_->sideband_until(consume_start);
  return n;
}

const std::vector<std::string>& Sampler::notices() const { return state_->notices; }
bool Sampler::sideband_on() const { return state_->sideband != nullptr; }

SamplerCounters Sampler::counters() const {
  SamplerCounters result;
  result.bad_records = state_->bad_records + state_->ring->bad_headers();
  result.sample_records = state_->sample_records;
  result.sample_record_bytes = state_->sample_record_bytes;
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return result;
  std::vector<uint64_t> values(static_cast<size_t>(ncpus));
  for (uint32_t key = 0; key < PROFILE_COUNTER_COUNT; ++key) {
    if (bpf_map__lookup_elem(state_->skel->maps.counters, &key, sizeof(key), values.data(),
                             values.size() * sizeof(uint64_t), 0))
      continue;
    for (uint64_t v : values) result.kernel[key] += v;
  }
  if (state_->sideband)
    result.kernel[PROFILE_COUNTER_SIDEBAND_LOST] +=
        state_->sideband->lost() + state_->sideband->bad_records();
  return result;
}

uint64_t Sampler::sideband_lost() const {
  if (!state_->sideband) return 1;  // no side-band: /proc is the only source
  uint64_t lost = state_->sideband->lost() + state_->sideband->bad_records();
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return lost;
  std::vector<uint64_t> values(static_cast<size_t>(ncpus));
  uint32_t key = PROFILE_COUNTER_SIDEBAND_LOST;
  if (bpf_map__lookup_elem(state_->skel->maps.counters, &key, sizeof(key), values.data(),
                           values.size() * sizeof(uint64_t), 0))
    return 1;  // unknown: assume lost, so /proc is read again
  for (uint64_t v : values) lost += v;
  return lost;
}

size_t Sampler::ring_buffer_bytes() const { return state_->ring_buffer_bytes; }

std::vector<ProgramCost> measure_programs() {
  libbpf_set_print(libbpf_print);
  const KernelFeatures kernel = probe_kernel_features();
  libbpf_set_print(libbpf_print);
  struct Variant {
    const char* name;
    uint32_t stack_copy_bytes;
    bool filter;
    bool off_cpu = false;
  };
  const Variant variants[] = {
      {"frame pointers, every process", 0, false},
      {"frame pointers, -p filter", 0, true},
      {"stack copy 256 KiB, every process", 262144, false},
      {"stack copy 1 MiB, -p filter", PROFILE_MAX_STACK_COPY, true},
      {"wall: frame pointers, -p filter", 0, true, true},
      {"wall: stack copy 1 MiB, -p filter", PROFILE_MAX_STACK_COPY, true, true},
  };
  std::vector<ProgramCost> costs;
  for (const Variant& variant : variants) {
    SamplerOptions options;
    options.stack_copy_bytes = variant.stack_copy_bytes;
    options.filter_by_tgid = variant.filter;
    options.off_cpu = options.off_cpu_runqueue = variant.off_cpu;
    options.follow_forks = true;
    last_libbpf_message().clear();
    profile_bpf* skel = profile_bpf__open();
    auto add_failure = [&](const std::string& error) {
      costs.push_back({"all", variant.name, false, 0, error});
    };
    if (!skel) {
      add_failure(bpf_error("cannot open the BPF program", errno).message);
      continue;
    }
    bool stack_copy = false;
    std::vector<std::string> notices;
    auto status = configure(skel, options, kernel, size_t{1} << 20, &stack_copy, notices);
    if (status && variant.stack_copy_bytes && !stack_copy) {
      add_failure("not used on this kernel: " + (notices.empty() ? std::string() : notices.front()));
    } else if (!status) {
      add_failure(status.error().message);
    } else if (int err = profile_bpf__load(skel); err) {
      add_failure(bpf_error("cannot load", err).message);
    } else {
      bpf_program* program;
      bpf_object__for_each_program(program, skel->obj) {
        if (!bpf_program__autoload(program)) continue;
        bpf_prog_info info{};
        uint32_t length = sizeof(info);
        ProgramCost cost{bpf_program__name(program), variant.name, true, 0, ""};
        if (bpf_obj_get_info_by_fd(bpf_program__fd(program), &info, &length) == 0)
          cost.verified_insns = info.verified_insns;
        costs.push_back(std::move(cost));
      }
    }
    profile_bpf__destroy(skel);
  }
  return costs;
}

size_t ring_buffer_bytes_for(size_t cpus, uint32_t frequency_hz, size_t typical_record_bytes,
                             size_t max_record_bytes, RingSizing sizing) {
  const double per_second = static_cast<double>(std::max<size_t>(cpus, 1)) * frequency_hz *
                            static_cast<double>(typical_record_bytes);
  double want = std::max(per_second * sizing.seconds,
                         static_cast<double>(std::max<size_t>(cpus, 1)) * static_cast<double>(sizing.max_records) *
                             static_cast<double>(max_record_bytes));
  size_t bytes = kMinRingBufferBytes;
  while (bytes < kMaxRingBufferBytes && static_cast<double>(bytes) < want) bytes *= 2;
  return bytes;
}

std::pair<size_t, size_t> record_bytes_for(const SamplerOptions& options) {
  if (options.stack_copy_bytes == 0)
    return {sizeof(profile_fp_stack_event), sizeof(profile_fp_stack_event)};
  const size_t fixed = sizeof(profile_stack_copy_event);
  return {fixed + std::min<size_t>(options.stack_copy_bytes, size_t{16} << 10),
          fixed + options.stack_copy_bytes};
}

}  // namespace gsymprof
