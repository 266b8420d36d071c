#include "userspace/sample/sampler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bpf/profile.h"
#include "bpf/profile.skel.h"
#include "userspace/base/parse_number.h"

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
  SampleSink* sink = nullptr;
  profile_bpf* skel = nullptr;
  ring_buffer* ring = nullptr;
  std::vector<bpf_link*> perf_links;
  std::vector<int> perf_fds;
  uint64_t bad_records = 0;
  uint64_t sample_records = 0, sample_record_bytes = 0;
  size_t ring_buffer_bytes = 0;
  std::array<uint64_t, PROFILE_MAX_FRAMES> ips{};
  std::array<uint64_t, PROFILE_MAX_KERNEL_FRAMES> kernel_ips{};
  std::string path_;

  ~State() {
    if (ring) ring_buffer__free(ring);
    for (bpf_link* link : perf_links) bpf_link__destroy(link);
    for (int fd : perf_fds) ::close(fd);
    if (skel) profile_bpf__destroy(skel);
  }

  static int on_record(void* context, void* data, size_t size) {
    auto* state = static_cast<State*>(context);
    state->deliver(static_cast<const uint8_t*>(data), size);
    return 0;
  }

  // The record's kernel IPs, copied (__u64 is not uint64_t's type).
  std::span<const uint64_t> kernel_frames(const __u64* source, uint32_t count) {
    std::memcpy(kernel_ips.data(), source, count * sizeof(uint64_t));
    return std::span<const uint64_t>(kernel_ips.data(), count);
  }

  // The path's components come leaf first (profile.h): join them root first.
  void deliver_mapping(const profile_mmap_event& event) {
    RawMapping mapping;
    mapping.pid = event.header.tgid;
    mapping.mm = event.mm;
    mapping.start = event.start;
    mapping.end = event.end;
    mapping.inode = event.inode;
    mapping.file_offset = event.inode ? event.file_offset : 0;
    mapping.dev_major = event.dev_major;
    mapping.dev_minor = event.dev_minor;
    mapping.file_size = event.file_size;
    mapping.mtime_ns = event.mtime_sec * 1000000000 + event.mtime_nsec;
    mapping.ctime_ns = event.ctime_sec * 1000000000 + event.ctime_nsec;
    mapping.readable = event.flags & PROFILE_MAP_READ;
    mapping.writable = event.flags & PROFILE_MAP_WRITE;
    mapping.shared = event.flags & PROFILE_MAP_SHARED;
    mapping.vdso = event.flags & PROFILE_MAP_VDSO;
    mapping.elf_loader = event.flags & PROFILE_MAP_ELF_LOADER;
    path_.clear();
    bool complete = (event.flags & PROFILE_MAP_PATH_COMPLETE) && event.path_size <= PROFILE_PATH_BYTES;
    if (event.inode) {
      std::string_view blob(event.path, std::min<size_t>(event.path_size, PROFILE_PATH_BYTES));
      std::vector<std::string_view> components;
      while (!blob.empty()) {
        size_t end = blob.find('\0');
        if (end == std::string_view::npos) {
          complete = false;  // cut inside a name
          break;
        }
        components.push_back(blob.substr(0, end));
        blob.remove_prefix(end + 1);
      }
      for (auto it = components.rbegin(); it != components.rend(); ++it) {
        path_ += '/';
        path_ += *it;
      }
      if (components.empty()) complete = false;
    }
    mapping.path = path_;
    mapping.path_complete = complete;
    sink->on_mapping(mapping);
  }

  void deliver(const uint8_t* data, size_t size) {
    profile_event_header header;
    if (size < sizeof(header)) {
      ++bad_records;
      return;
    }
    std::memcpy(&header, data, sizeof(header));
    if (header.size > size) {
      ++bad_records;
      return;
    }
    switch (header.kind) {
      case PROFILE_EVENT_FP_STACK: {
        if (header.size < sizeof(profile_fp_stack_event)) break;
        const auto* event = reinterpret_cast<const profile_fp_stack_event*>(data);
        if (event->frame_count > PROFILE_MAX_FRAMES ||
            event->kernel_frame_count > PROFILE_MAX_KERNEL_FRAMES)
          break;
        ++sample_records;
        sample_record_bytes += header.size;
        RawSample sample;
        sample.pid = header.tgid;
        sample.tid = header.tid;
        sample.comm = std::string_view(header.comm, strnlen(header.comm, sizeof(header.comm)));
        // __u64 is unsigned long long, uint64_t unsigned long: copy, not cast.
        std::memcpy(ips.data(), event->ips, event->frame_count * sizeof(uint64_t));
        sample.ips = std::span<const uint64_t>(ips.data(), event->frame_count);
        sample.truncated = (event->flags & PROFILE_STACK_TRUNCATED) != 0;
        sample.kernel_ips = kernel_frames(event->kernel_ips, event->kernel_frame_count);
        sink->on_sample(sample);
        return;
      }
      case PROFILE_EVENT_EXEC: {
        if (header.size < sizeof(profile_exec_event)) break;
        profile_exec_event event;
        std::memcpy(&event, data, sizeof(event));
        sink->on_exec(header.tgid, event.mm);
        return;
      }
      case PROFILE_EVENT_MMAP: {
        if (header.size < sizeof(profile_mmap_event)) break;
        profile_mmap_event event;
        std::memcpy(&event, data, sizeof(event));
        if (event.start >= event.end) break;
        deliver_mapping(event);
        return;
      }
      case PROFILE_EVENT_FORK: {
        if (header.size < sizeof(profile_fork_event)) break;
        profile_fork_event event;
        std::memcpy(&event, data, sizeof(event));
        sink->on_fork(header.tgid, event.child_tgid, event.child_mm);
        return;
      }
      case PROFILE_EVENT_EXIT:
        sink->on_exit(header.tgid);
        return;
      case PROFILE_EVENT_STACK_COPY: {
        const size_t fixed = offsetof(profile_stack_copy_event, stack);
        if (header.size < fixed) break;
        profile_stack_copy_event event;
        std::memcpy(&event, data, fixed);
        if (event.stack_size > header.size - fixed ||
            event.kernel_frame_count > PROFILE_MAX_KERNEL_FRAMES)
          break;
        ++sample_records;
        sample_record_bytes += header.size;
        RawStackCopy copy;
        copy.pid = header.tgid;
        copy.tid = header.tid;
        copy.comm = std::string_view(header.comm, strnlen(header.comm, sizeof(header.comm)));
        copy.stack.regs = {event.ip, event.sp, event.bp};
        copy.stack.stack_start = event.sp;
        copy.stack.stack = std::span<const uint8_t>(data + fixed, event.stack_size);
        copy.copy_short = (event.flags & PROFILE_STACK_TRUNCATED) != 0;
        copy.kernel_ips = kernel_frames(event.kernel_ips, event.kernel_frame_count);
        sink->on_stack_copy(copy);
        return;
      }
      default:
        break;
    }
    ++bad_records;
  }
};

Sampler::Sampler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Sampler::~Sampler() = default;

gsym::Expected<std::unique_ptr<Sampler>> Sampler::start(const SamplerOptions& options,
                                                         SampleSink& sink) {
  libbpf_set_print(libbpf_print);
  last_libbpf_message().clear();
  if (options.frequency_hz == 0) return gsym::Error("frequency must be at least 1 Hz");

  std::ifstream online_file("/sys/devices/system/cpu/online");
  std::stringstream online_text;
  online_text << online_file.rdbuf();
  auto cpus = parse_cpu_list(online_text.str());
  if (!cpus) return gsym::Error("/sys/devices/system/cpu/online: " + cpus.error().message);

  size_t ring_bytes = options.ring_buffer_bytes;
  if (ring_bytes == 0) {
    auto [typical, largest] = record_bytes_for(options);
    ring_bytes = ring_buffer_bytes_for(cpus->size(), options.frequency_hz, typical, largest);
  }
  if (!is_power_of_two(ring_bytes) || ring_bytes < 4096)
    return gsym::Error("ring buffer size must be a power of two >= 4096");

  auto state = std::make_unique<State>();
  state->sink = &sink;
  state->skel = profile_bpf__open();
  if (!state->skel) return bpf_error("cannot open the BPF program", errno);
  if (options.stack_copy_bytes % 8 != 0 || options.stack_copy_bytes > PROFILE_MAX_STACK_COPY)
    return gsym::Error("stack copy size must be a multiple of 8 up to " +
                       std::to_string(PROFILE_MAX_STACK_COPY));
  state->skel->rodata->sample_mode =
      options.stack_copy_bytes ? PROFILE_MODE_STACK_COPY : PROFILE_MODE_FRAME_POINTER;
  state->skel->rodata->stack_copy_bytes = options.stack_copy_bytes;
  state->skel->rodata->wakeup_bytes = ring_bytes / 4;
  state->skel->rodata->filter_by_tgid = options.filter_by_tgid;
  state->skel->rodata->follow_forks = options.follow_forks;
  state->skel->rodata->kernel_stacks = options.kernel_stacks;
  int err = bpf_map__set_max_entries(state->skel->maps.events, static_cast<uint32_t>(ring_bytes));
  if (err) return bpf_error("cannot size the ring buffer", err);
  state->ring_buffer_bytes = ring_bytes;
  err = profile_bpf__load(state->skel);
  if (err) return bpf_error("cannot load the BPF program", err);

  for (uint32_t tgid : options.target_tgids) {
    uint8_t one = 1;
    if (bpf_map__update_elem(state->skel->maps.target_tgids, &tgid, sizeof(tgid), &one,
                             sizeof(one), BPF_ANY))
      return bpf_error("cannot add target pid " + std::to_string(tgid), errno);
  }

  state->ring = ring_buffer__new(bpf_map__fd(state->skel->maps.events), State::on_record,
                                 state.get(), nullptr);
  if (!state->ring) return bpf_error("cannot create the ring buffer reader", errno);

  // The side-band (fork, exec, mmap, exit) first, so no sample can precede
  // the events that explain its mappings.
  struct {
    bpf_program* program;
    bpf_link** link;
    const char* what;
  } sideband[] = {
      {state->skel->progs.note_fork, &state->skel->links.note_fork, "the fork tracepoint"},
      {state->skel->progs.note_exec, &state->skel->links.note_exec, "the exec tracepoint"},
      {state->skel->progs.note_mmap, &state->skel->links.note_mmap, "the system call exit tracepoint"},
      {state->skel->progs.note_exit, &state->skel->links.note_exit, "the exit tracepoint"},
  };
  for (const auto& program : sideband) {
    *program.link = bpf_program__attach(program.program);
    if (!*program.link) return bpf_error(std::string("cannot attach ") + program.what, errno);
  }

  for (int cpu : *cpus) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = options.frequency_hz;
    int fd = static_cast<int>(
        syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno == ENODEV) continue;  // went offline meanwhile
      int saved = errno;
      std::string what = "perf_event_open(cpu-clock, cpu " + std::to_string(cpu) + ", " +
                         std::to_string(options.frequency_hz) + " Hz)";
      if (saved == EINVAL)
        return gsym::Error(what + ": " + std::strerror(saved) +
                           " (frequency above kernel.perf_event_max_sample_rate?)");
      return bpf_error(what, saved);
    }
    state->perf_fds.push_back(fd);
    bpf_link* link = bpf_program__attach_perf_event(state->skel->progs.sample_stack, fd);
    if (!link) return bpf_error("cannot attach to cpu " + std::to_string(cpu), errno);
    state->perf_links.push_back(link);
  }
  if (state->perf_links.empty()) return gsym::Error("no online CPU to sample");
  return std::unique_ptr<Sampler>(new Sampler(std::move(state)));
}

gsym::Status Sampler::add_target(uint32_t tgid) {
  uint8_t one = 1;
  if (bpf_map__update_elem(state_->skel->maps.target_tgids, &tgid, sizeof(tgid), &one,
                           sizeof(one), BPF_ANY))
    return bpf_error("cannot add target pid " + std::to_string(tgid), errno);
  return {};
}

gsym::Expected<int> Sampler::poll(int timeout_ms) {
  int n = ring_buffer__poll(state_->ring, timeout_ms);
  if (n == -EINTR) n = 0;
  if (n < 0) return bpf_error("ring buffer poll", n);
  // Most records are submitted without a wakeup (wakeup_bytes in
  // profile.bpf.c), so epoll does not report them: read them after the wait.
  int more = ring_buffer__consume(state_->ring);
  if (more == -EINTR) more = 0;
  if (more < 0) return bpf_error("ring buffer read", more);
  return n + more;
}

gsym::Expected<int> Sampler::drain() {
  int n = ring_buffer__consume(state_->ring);
  if (n == -EINTR) return 0;
  if (n < 0) return bpf_error("ring buffer read", n);
  return n;
}

SamplerCounters Sampler::counters() const {
  SamplerCounters result;
  result.bad_records = state_->bad_records;
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
  return result;
}

uint64_t Sampler::sideband_lost() const {
  int ncpus = libbpf_num_possible_cpus();
  if (ncpus <= 0) return 0;
  std::vector<uint64_t> values(static_cast<size_t>(ncpus));
  uint32_t key = PROFILE_COUNTER_SIDEBAND_LOST;
  if (bpf_map__lookup_elem(state_->skel->maps.counters, &key, sizeof(key), values.data(),
                           values.size() * sizeof(uint64_t), 0))
    return 1;  // unknown: assume lost, so /proc is read again
  uint64_t lost = 0;
  for (uint64_t v : values) lost += v;
  return lost;
}

size_t Sampler::cpus_attached() const { return state_->perf_links.size(); }
size_t Sampler::ring_buffer_bytes() const { return state_->ring_buffer_bytes; }

size_t ring_buffer_bytes_for(size_t cpus, uint32_t frequency_hz, size_t typical_record_bytes,
                             size_t max_record_bytes) {
  const double per_second = static_cast<double>(std::max<size_t>(cpus, 1)) * frequency_hz *
                            static_cast<double>(typical_record_bytes);
  double want = std::max(per_second * kRingBufferSeconds,
                         static_cast<double>(std::max<size_t>(cpus, 1)) * kRingBufferMaxRecords *
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
