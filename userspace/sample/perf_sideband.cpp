#include "userspace/sample/perf_sideband.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "userspace/perf_data/perf_data_format.h"
#include "userspace/sample/sampler.h"

namespace gsymprof {

namespace {

constexpr uint32_t kProtRead = 1, kProtWrite = 2;
constexpr uint32_t kMapShared = 1;
constexpr std::string_view kDeletedSuffix = " (deleted)";

}  // namespace

bool sideband_event_from_record(const PerfRecord& record, SidebandEvent& out) {
  out = SidebandEvent{};
  out.time_ns = record.id.time;
  switch (record.type) {
    case PERF_RECORD_MMAP2: {
      const PerfRecord::Mmap& m = record.mmap;
      if (!m.executable || m.len == 0 || m.addr + m.len < m.addr) return false;
      out.kind = SidebandEvent::Kind::Mapping;
      out.pid = m.pid;
      RawMapping& r = out.mapping;
      r.pid = m.pid;
      r.start = m.addr;
      r.end = m.addr + m.len;
      r.time_ns = record.id.time;
      std::string_view name = m.filename;
      r.vdso = name == "[vdso]";
      const bool file = m.has_inode && m.ino != 0 && perf_mapping_names_file(name);
      if (file) {
        r.inode = m.ino;
        r.dev_major = m.maj;
        r.dev_minor = m.min;
        r.file_offset = m.pgoff;
        if (name.size() > kDeletedSuffix.size() && name.ends_with(kDeletedSuffix)) {
          name.remove_suffix(kDeletedSuffix.size());
          r.deleted = true;
        }
        out.path.assign(name);
        r.path_complete = !r.deleted;
      }
      r.readable = m.prot & kProtRead;
      r.writable = m.prot & kProtWrite;
      r.shared = m.flags & kMapShared;
      return true;
    }
    case PERF_RECORD_COMM:
      if (!record.comm.exec || record.comm.pid != record.comm.tid) return false;
      out.kind = SidebandEvent::Kind::Exec;
      out.pid = record.comm.pid;
      return true;
    case PERF_RECORD_FORK:
      // A thread shares its process's tgid: only new processes matter.
      if (record.task.pid == record.task.ppid || record.task.pid != record.task.tid) return false;
      out.kind = SidebandEvent::Kind::Fork;
      out.pid = record.task.ppid;
      out.child = record.task.pid;
      return true;
    case PERF_RECORD_EXIT:
      if (record.task.pid != record.task.tid) return false;  // a thread
      out.kind = SidebandEvent::Kind::Exit;
      out.pid = record.task.pid;
      return true;
    default:
      return false;
  }
}

void SidebandTargets::add(uint32_t pid, uint64_t time_ns) { since_[pid] = time_ns; }

bool SidebandTargets::accept(const SidebandEvent& event) {
  if (!filter_) return true;
  if (event.kind == SidebandEvent::Kind::Fork) {
    const bool parent = since_.contains(event.pid);
    auto child = since_.find(event.child);
    if (parent && follow_forks_) {
      if (child == since_.end()) since_.emplace(event.child, event.time_ns);
      return true;
    }
    // A pid reused after a target exited is not a target, unless it was made
    // one after this fork (gsymprof's own held child of `-- CMD`).
    if (child != since_.end() && child->second <= event.time_ns) since_.erase(child);
    return false;
  }
  return since_.contains(event.pid);
}

struct PerfSideband::Ring {
  int fd = -1;
  void* base = MAP_FAILED;
  size_t mapped = 0;
  size_t data_size = 0;
  ~Ring() {
    if (base != MAP_FAILED) munmap(base, mapped);
  }
  perf_event_mmap_page* page() const { return static_cast<perf_event_mmap_page*>(base); }
  const uint8_t* data() const { return static_cast<const uint8_t*>(base) + page()->data_offset; }
};

PerfSideband::~PerfSideband() {
  rings_.clear();
  for (int fd : fds_) ::close(fd);
}

gsym::Expected<std::unique_ptr<PerfSideband>> PerfSideband::open(std::span<const int> cpus,
                                                                 size_t ring_pages) {
  if (ring_pages == 0 || (ring_pages & (ring_pages - 1)))
    return gsym::Error("side-band ring pages must be a power of two");
  std::unique_ptr<PerfSideband> sideband(new PerfSideband());
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.mmap = 1;
  attr.mmap2 = 1;
  attr.comm = 1;
  attr.comm_exec = 1;
  attr.task = 1;
  attr.sample_id_all = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  attr.wakeup_events = 1;  // every record wakes the reader: short processes
  sideband->attr_.type = attr.type;
  sideband->attr_.config = attr.config;
  sideband->attr_.sample_type = attr.sample_type;
  sideband->attr_.flags = perf_data::kAttrFlagSampleIdAll;
  const long page = sysconf(_SC_PAGESIZE);
  for (int cpu : cpus) {
    int fd = static_cast<int>(
        syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno == ENODEV) continue;  // went offline meanwhile
      return gsym::Error("perf_event_open(dummy side-band event, cpu " + std::to_string(cpu) +
                         "): " + std::strerror(errno));
    }
    sideband->fds_.push_back(fd);
    auto ring = std::make_unique<Ring>();
    ring->fd = fd;
    ring->data_size = ring_pages * static_cast<size_t>(page);
    ring->mapped = ring->data_size + static_cast<size_t>(page);
    ring->base = mmap(nullptr, ring->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring->base == MAP_FAILED)
      return gsym::Error("mmap of the side-band ring (cpu " + std::to_string(cpu) +
                         "): " + std::strerror(errno));
    // data_size from the page itself (kernels since 4.1 fill it in).
    if (ring->page()->data_size) ring->data_size = ring->page()->data_size;
    sideband->rings_.push_back(std::move(ring));
  }
  if (sideband->rings_.empty()) return gsym::Error("no online CPU for the side-band");
  return sideband;
}

void PerfSideband::read_ring(Ring& ring, std::vector<SidebandEvent>& out) {
  perf_event_mmap_page* page = ring.page();
  const uint64_t head = std::atomic_ref<__u64>(page->data_head).load(std::memory_order_acquire);
  uint64_t tail = page->data_tail;
  const uint8_t* data = ring.data();
  const uint64_t size = ring.data_size;
  while (tail < head) {
    perf_event_header header;
    uint8_t bytes[sizeof(header)];
    for (size_t i = 0; i < sizeof(header); ++i) bytes[i] = data[(tail + i) % size];
    std::memcpy(&header, bytes, sizeof(header));
    if (header.size < sizeof(header) || header.size > head - tail) {
      ++bad_records_;  // cannot happen with a sane kernel: resynchronize
      tail = head;
      break;
    }
    // A record may wrap around the ring's end: copy it whole.
    const uint64_t begin = (tail + sizeof(header)) % size;
    const size_t body_size = header.size - sizeof(header);
    std::span<const uint8_t> body;
    if (begin + body_size <= size) {
      body = std::span<const uint8_t>(data + begin, body_size);
    } else {
      wrapped_.resize(body_size);
      const size_t first = static_cast<size_t>(size - begin);
      std::memcpy(wrapped_.data(), data + begin, first);
      std::memcpy(wrapped_.data() + first, data, body_size - first);
      body = wrapped_;
    }
    tail += header.size;
    if (header.type == PERF_RECORD_LOST) {
      if (body.size() >= 16) {
        uint64_t lost;
        std::memcpy(&lost, body.data() + 8, sizeof(lost));
        lost_ += lost;
      } else {
        ++lost_;
      }
      continue;
    }
    if (header.type != PERF_RECORD_MMAP2 && header.type != PERF_RECORD_COMM &&
        header.type != PERF_RECORD_FORK && header.type != PERF_RECORD_EXIT)
      continue;  // e.g. THROTTLE: nothing to learn
    PerfRecord record;
    if (!decode_perf_record(attr_, header.type, header.misc, body, 0, record)) {
      ++bad_records_;
      continue;
    }
    SidebandEvent event;
    if (sideband_event_from_record(record, event)) out.push_back(std::move(event));
  }
  std::atomic_ref<__u64>(page->data_tail).store(tail, std::memory_order_release);
}

uint64_t PerfSideband::read() {
  const uint64_t now = monotonic_ns();
  std::vector<SidebandEvent> fresh;
  for (auto& ring : rings_) read_ring(*ring, fresh);
  if (fresh.empty()) return now;
  // Each ring is in time order; across CPUs they interleave.
  std::stable_sort(fresh.begin(), fresh.end(),
                   [](const SidebandEvent& a, const SidebandEvent& b) { return a.time_ns < b.time_ns; });
  // Usually all of them are newer than what is pending.
  const bool append = pending_.empty() || pending_.back().time_ns <= fresh.front().time_ns;
  for (SidebandEvent& event : fresh) pending_.push_back(std::move(event));
  if (!append)
    std::stable_sort(pending_.begin(), pending_.end(), [](const SidebandEvent& a, const SidebandEvent& b) {
      return a.time_ns < b.time_ns;
    });
  return now;
}

void PerfSideband::deliver_until(uint64_t time_ns, SidebandTargets& targets, EventSink& sink) {
  while (!pending_.empty() && pending_.front().time_ns <= time_ns) {
    SidebandEvent event = std::move(pending_.front());
    pending_.pop_front();
    if (!targets.accept(event)) continue;
    switch (event.kind) {
      case SidebandEvent::Kind::Mapping:
        event.mapping.path = event.path;
        sink.on_mapping(event.mapping);
        break;
      case SidebandEvent::Kind::Exec:
        sink.on_exec(event.pid, 0);
        break;
      case SidebandEvent::Kind::Fork:
        sink.on_fork(event.pid, event.child, 0);
        break;
      case SidebandEvent::Kind::Exit:
        sink.on_exit(event.pid);
        break;
    }
  }
}

}  // namespace gsymprof
