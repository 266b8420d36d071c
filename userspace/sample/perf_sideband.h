// userspace/sample/perf_sideband.h - stage: the kernel's own side-band
// records (what perf learns mappings from) for every process, read live.
//
// One software "dummy" perf event per CPU, which never samples, asks the
// kernel for MMAP2 (each executable mapping, as it is made, with its device,
// inode and path), COMM with the exec flag, FORK and EXIT records, stamped
// with CLOCK_MONOTONIC (bpf_ktime_get_ns's clock). No program of ours runs
// for them and nothing runs on system calls that change no address space;
// they exist on every kernel perf works on. Each CPU's ring wakes the reader
// at every record, so a process that lives 2 ms is read while it lives.
//
// Order with the samples (which come through the BPF ring buffer): a record
// is written before the system call that made it returns, so it is in its
// ring before any later sample of that process is taken. Sampler reads these
// rings again whenever a sample is newer than the last read, and delivers
// every record older than the sample first (deliver_until).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/base/monotonic_clock.h"
#include "userspace/perf_data/perf_data_reader.h"
#include "userspace/events/events.h"

namespace gsymprof {

class EventSink;

// One decoded side-band record, owning its strings (held until its turn).
struct SidebandEvent {
  enum class Kind { Mapping, Exec, Fork, Exit };
  Kind kind = Kind::Mapping;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint32_t pid = 0;      // the process (Fork: the parent)
  uint32_t child = 0;    // Fork: the new process
  // Mapping: the fields of RawMapping, path owned here.
  RawMapping mapping;
  std::string path;
};

// Turns one perf record (as PerfRecord decodes it) into a side-band event;
// false for records that are none (a thread's fork or exit, a comm change
// without exec, a non-executable mapping). Free of I/O: unit-tested.
bool sideband_event_from_record(const PerfRecord& record, SidebandEvent& out);

// Which processes' events matter: with a filter, the targets and (with
// follow_forks) their descendants, mirroring the BPF program's follow_fork.
class SidebandTargets {
 public:
  SidebandTargets(bool filter, bool follow_forks) : filter_(filter), follow_forks_(follow_forks) {}
  // `pid` became a target at `time_ns` (a later fork record's verdict on an
  // older fork of the same pid must not undo it).
  void add(uint32_t pid, uint64_t time_ns);
  // Applies `event` (a fork may add or drop its child); returns whether it
  // concerns a target.
  bool accept(const SidebandEvent& event);

 private:
  bool filter_, follow_forks_;
  std::unordered_map<uint32_t, uint64_t> since_;  // pid -> when it became a target
};

class PerfSideband {
 public:
  // Opens one dummy event per CPU in `cpus` with a ring of `ring_pages`
  // (a power of two) data pages. Errors are one line, naming what failed.
  static gsym::Expected<std::unique_ptr<PerfSideband>> open(std::span<const int> cpus,
                                                             size_t ring_pages);
  ~PerfSideband();
  PerfSideband(const PerfSideband&) = delete;
  PerfSideband& operator=(const PerfSideband&) = delete;

  // The rings' descriptors, readable when records wait (for epoll).
  const std::vector<int>& fds() const { return fds_; }
  // Moves every record in the rings into the pending queue, in time order.
  // Returns the CLOCK_MONOTONIC time taken before reading: every record of
  // an event that happened before it is now pending or delivered.
  uint64_t read();
  // Hands `sink` the pending events no newer than `time_ns` that concern a
  // target; all of them with UINT64_MAX.
  void deliver_until(uint64_t time_ns, SidebandTargets& targets, EventSink& sink);
  // Records the kernel dropped (its LOST records) and records that did not
  // decode: user space then re-reads /proc.
  uint64_t lost() const { return lost_; }
  uint64_t bad_records() const { return bad_records_; }

 private:
  PerfSideband() = default;
  struct Ring;
  void read_ring(Ring& ring, std::vector<SidebandEvent>& out);

  std::vector<int> fds_;
  std::vector<std::unique_ptr<Ring>> rings_;
  PerfEventAttr attr_;
  std::deque<SidebandEvent> pending_;
  std::vector<uint8_t> wrapped_;  // a record split by the ring's end
  uint64_t lost_ = 0, bad_records_ = 0;
};

}  // namespace gsymprof
