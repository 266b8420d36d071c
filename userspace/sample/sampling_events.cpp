#include "userspace/sample/sampling_events.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "userspace/base/parse_number.h"

namespace gsymprof {
namespace {

perf_event_attr cpu_clock(uint32_t frequency_hz, bool inherit, bool enabled = true) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = frequency_hz;
  // Threads and children created after the event is attached get their own
  // copy, with the program (the kernel copies the parent's).
  attr.inherit = inherit;
  attr.disabled = !enabled;
  return attr;
}

int open_event(perf_event_attr& attr, pid_t pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

std::string rate_error(const std::string& what, int error, uint32_t frequency_hz) {
  std::string message = what + " (" + std::to_string(frequency_hz) + " Hz): " + std::strerror(error);
  if (error == EINVAL) message += " (frequency above kernel.perf_event_max_sample_rate?)";
  if (error == EPERM || error == EACCES) message += "; run as root";
  return message;
}

}  // namespace

gsym::Expected<std::vector<uint32_t>> process_threads(uint32_t tgid) {
  const std::string path = "/proc/" + std::to_string(tgid) + "/task";
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int saved = errno;  // before the message's allocations
    return gsym::Error::from_errno(saved, path + ": " + std::strerror(saved));
  }
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    int saved = errno;
    ::close(fd);
    return gsym::Error::from_errno(saved, path + ": " + std::strerror(saved));
  }
  std::vector<uint32_t> tids;
  while (const dirent* entry = ::readdir(dir)) {
    if (auto tid = parse_unsigned<uint32_t>(entry->d_name); tid && *tid) tids.push_back(*tid);
  }
  ::closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

SamplingEvents::SamplingEvents(bpf_program* program, uint32_t frequency_hz)
    : program_(program), frequency_hz_(frequency_hz) {}

SamplingEvents::~SamplingEvents() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
  for (int fd : fds_) ::close(fd);
}

gsym::Status SamplingEvents::attach(int fd, const std::string& what) {
  fds_.push_back(fd);
  bpf_link* link = bpf_program__attach_perf_event(program_, fd);
  if (!link) return gsym::Error("cannot attach the sampling program to " + what + ": " + std::strerror(errno));
  links_.push_back(link);
  return gsym::Status::success();
}

gsym::Status SamplingEvents::attach_cpus(const std::vector<int>& cpus, bool enabled) {
  for (int cpu : cpus) {
    perf_event_attr attr = cpu_clock(frequency_hz_, false, enabled);
    int fd = open_event(attr, -1, cpu);
    if (fd < 0) {
      if (errno == ENODEV) continue;  // went offline meanwhile
      return gsym::Error(rate_error("perf_event_open(cpu-clock, cpu " + std::to_string(cpu) + ")", errno,
                                    frequency_hz_));
    }
    if (auto status = attach(fd, "cpu " + std::to_string(cpu)); !status) return status;
  }
  if (links_.empty()) return gsym::Error("no online CPU to sample");
  return gsym::Status::success();
}

gsym::Status SamplingEvents::enable() {
  for (int fd : fds_)
    if (::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
      return gsym::Error(std::string("cannot enable a sampling event: ") + std::strerror(errno));
  return gsym::Status::success();
}

gsym::Status SamplingEvents::attach_process(uint32_t tgid) {
  auto tids = process_threads(tgid);
  if (!tids) return tids.error();
  size_t attached = 0;
  for (uint32_t tid : *tids) {
    perf_event_attr attr = cpu_clock(frequency_hz_, true);
    int fd = open_event(attr, static_cast<pid_t>(tid), -1);
    if (fd < 0) {
      if (errno == ESRCH) continue;  // the thread exited meanwhile
      return gsym::Error(rate_error("perf_event_open(cpu-clock, thread " + std::to_string(tid) + ")", errno,
                                    frequency_hz_));
    }
    if (auto status = attach(fd, "thread " + std::to_string(tid)); !status) return status;
    ++attached;
  }
  if (attached == 0)
    return gsym::Error(gsym::ErrorCode::NotFound, "process " + std::to_string(tgid) + " has exited");
  return gsym::Status::success();
}

}  // namespace gsymprof
