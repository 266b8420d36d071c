// userspace/sample/ring_records.h - stage: the BPF ring buffer's records
// (bpf/profile.h) -> events (events.h). Pure over bytes: unit-tested and
// fuzzed without BPF. Every size in a record is checked against its bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "bpf/profile.h"
#include "userspace/events/events.h"

namespace gsymprof {

// Where decoded IPs live while the sink runs (a record's __u64 arrays are
// copied: __u64 is not uint64_t's type, and the bytes may be unaligned).
struct RingRecordScratch {
  std::array<uint64_t, PROFILE_MAX_FRAMES> ips{};
  std::array<uint64_t, PROFILE_MAX_KERNEL_FRAMES> kernel_ips{};
  // Python stacks waiting for their sample (the next record of the same
  // thread with the same time; other CPUs' records may come between), by
  // tid. One whose sample was lost is replaced by the thread's next one.
  struct PendingPython {
    uint64_t time_ns = 0;
    std::vector<PythonFrameRef> frames;
    bool truncated = false, unreadable = false;
  };
  std::unordered_map<uint32_t, PendingPython> python;
  // Bound on `python`: past it, entries whose samples never came are dropped.
  static constexpr size_t kMaxPendingPython = 4096;
  // The matched stack, during the sink call. A Python stack whose sample
  // was lost is dropped: the sample's loss is counted (ringbuf_full).
  std::vector<PythonFrameRef> python_frames;
};

// The record's time (bpf_ktime_get_ns, CLOCK_MONOTONIC), if it has a header.
std::optional<uint64_t> ring_record_time(std::span<const uint8_t> record);

enum class RingRecordKind { Sample, PythonStack, Bad };

// The reason of a switch-out as the BPF side encodes it (task state bits,
// PROFILE_OFF_CPU_PREEMPTED).
OffCpuReason short_wait_reason(uint32_t state);

// Hands `sink` one entry of the short_waits map.
void deliver_short_waits(const profile_short_wait_key& key, const profile_short_wait_value& value,
                         EventSink& sink);

// Hands `sink` the sample in `record`, with the Python stack that came just
// before it for the same thread and time. A Python stack record is kept in
// `scratch` for its sample (PythonStack). Bad: too short, a size or count
// past its bytes, or a kind this reader does not know (the caller counts it).
RingRecordKind decode_ring_record(std::span<const uint8_t> record, RingRecordScratch& scratch,
                                  EventSink& sink);

}  // namespace gsymprof
