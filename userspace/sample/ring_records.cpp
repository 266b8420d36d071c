#include "userspace/sample/ring_records.h"

#include <cstddef>
#include <cstring>
#include <string_view>

namespace gsymprof {
namespace {

std::string_view comm_of(const char (&comm)[PROFILE_COMM_LEN]) {
  return std::string_view(comm, strnlen(comm, sizeof(comm)));
}
std::string_view comm_of(const profile_event_header& header) { return comm_of(header.comm); }

OffCpuWait off_cpu_of(const profile_event_header& header) {
  if (!(header.off_cpu_state & PROFILE_OFF_CPU)) return {};
  return {short_wait_reason(header.off_cpu_state), header.off_cpu_ns};
}

std::span<const uint64_t> copy_ips(const uint8_t* source, uint32_t count, uint64_t* target) {
  std::memcpy(target, source, count * sizeof(uint64_t));
  return std::span<const uint64_t>(target, count);
}

// The Python stack recorded for this sample, if one waits in `scratch`.
PythonStackRef take_python(const profile_event_header& header, RingRecordScratch& scratch) {
  auto it = scratch.python.find(header.tid);
  if (it == scratch.python.end()) return {};
  PythonStackRef stack;
  if (it->second.time_ns == header.time_ns) {
    scratch.python_frames.swap(it->second.frames);
    stack.frames = scratch.python_frames;
    stack.truncated = it->second.truncated;
    stack.unreadable = it->second.unreadable;
  }
  scratch.python.erase(it);
  return stack;
}

RingRecordKind decode_python_stack(std::span<const uint8_t> record, const profile_event_header& header,
                                   RingRecordScratch& scratch) {
  if (header.size < sizeof(profile_python_stack_event)) return RingRecordKind::Bad;
  const size_t counts = offsetof(profile_python_stack_event, frame_count);
  uint32_t frame_count, flags;
  std::memcpy(&frame_count, record.data() + counts, 4);
  std::memcpy(&flags, record.data() + counts + 4, 4);
  if (frame_count > PROFILE_MAX_PYTHON_FRAMES) return RingRecordKind::Bad;
  if (scratch.python.size() >= RingRecordScratch::kMaxPendingPython && !scratch.python.contains(header.tid))
    scratch.python.clear();
  RingRecordScratch::PendingPython& pending = scratch.python[header.tid];
  pending.time_ns = header.time_ns;
  pending.truncated = (flags & PROFILE_PYTHON_TRUNCATED) != 0;
  pending.unreadable = (flags & PROFILE_PYTHON_UNREADABLE) != 0;
  pending.frames.clear();
  const uint8_t* at = record.data() + offsetof(profile_python_stack_event, frames);
  for (uint32_t i = 0; i < frame_count; ++i, at += sizeof(profile_python_frame)) {
    profile_python_frame frame;
    std::memcpy(&frame, at, sizeof(frame));
    pending.frames.push_back({frame.code, frame.instr_offset, (frame.flags & PROFILE_PYTHON_ENTRY) != 0});
  }
  return RingRecordKind::PythonStack;
}

RingRecordKind decode_fp_stack(std::span<const uint8_t> record, const profile_event_header& header,
                               RingRecordScratch& scratch, EventSink& sink) {
  if (header.size < sizeof(profile_fp_stack_event)) return RingRecordKind::Bad;
  const size_t counts = offsetof(profile_fp_stack_event, frame_count);
  uint32_t frame_count, flags, kernel_frame_count;
  std::memcpy(&frame_count, record.data() + counts, 4);
  std::memcpy(&flags, record.data() + counts + 4, 4);
  std::memcpy(&kernel_frame_count, record.data() + counts + 8, 4);
  if (frame_count > PROFILE_MAX_FRAMES || kernel_frame_count > PROFILE_MAX_KERNEL_FRAMES)
    return RingRecordKind::Bad;
  RawSample sample;
  sample.pid = header.tgid;
  sample.tid = header.tid;
  sample.comm = comm_of(header);
  sample.ips = copy_ips(record.data() + offsetof(profile_fp_stack_event, ips), frame_count,
                        scratch.ips.data());
  sample.truncated = (flags & PROFILE_STACK_TRUNCATED) != 0;
  sample.kernel_ips = copy_ips(record.data() + offsetof(profile_fp_stack_event, kernel_ips),
                               kernel_frame_count, scratch.kernel_ips.data());
  sample.off_cpu = off_cpu_of(header);
  sample.time_ns = header.time_ns;
  sample.python = take_python(header, scratch);
  sink.on_sample(sample);
  return RingRecordKind::Sample;
}

RingRecordKind decode_stack_copy(std::span<const uint8_t> record, const profile_event_header& header,
                                 RingRecordScratch& scratch, EventSink& sink) {
  const size_t fixed = offsetof(profile_stack_copy_event, stack);
  if (header.size < fixed) return RingRecordKind::Bad;
  // The registers and counts only: the 512 bytes of kernel_ips behind them
  // are read where valid (copy_ips), not copied whole; each line of a
  // record is a cache miss here (another CPU wrote it).
  profile_stack_copy_event event;
  std::memcpy(&event, record.data(), offsetof(profile_stack_copy_event, kernel_ips));
  if (event.stack_size > header.size - fixed || event.kernel_frame_count > PROFILE_MAX_KERNEL_FRAMES)
    return RingRecordKind::Bad;
  RawStackCopy copy;
  copy.pid = header.tgid;
  copy.tid = header.tid;
  copy.comm = comm_of(header);
  copy.stack.regs = {event.ip, event.sp, event.bp};
  copy.stack.stack_start = event.sp;
  copy.stack.stack = record.subspan(fixed, event.stack_size);
  copy.copy_short = (event.flags & PROFILE_STACK_TRUNCATED) != 0;
  copy.kernel_ips = copy_ips(record.data() + offsetof(profile_stack_copy_event, kernel_ips),
                             event.kernel_frame_count, scratch.kernel_ips.data());
  copy.off_cpu = off_cpu_of(header);
  copy.time_ns = header.time_ns;
  copy.python = take_python(header, scratch);
  sink.on_stack_copy(copy);
  return RingRecordKind::Sample;
}

}  // namespace

OffCpuReason short_wait_reason(uint32_t state) {
  return off_cpu_reason(state & PROFILE_TASK_STATE_MASK, (state & PROFILE_OFF_CPU_PREEMPTED) != 0);
}

void deliver_short_waits(const profile_short_wait_key& key, const profile_short_wait_value& value,
                         EventSink& sink) {
  RawShortWaits waits;
  waits.pid = key.tgid;
  waits.tid = key.tid;
  waits.comm = comm_of(value.comm);
  waits.reason = short_wait_reason(key.state);
  waits.ns = value.ns;
  waits.count = value.count;
  sink.on_short_waits(waits);
}

std::optional<uint64_t> ring_record_time(std::span<const uint8_t> record) {
  if (record.size() < sizeof(profile_event_header)) return std::nullopt;
  uint64_t time;
  std::memcpy(&time, record.data() + offsetof(profile_event_header, time_ns), sizeof(time));
  return time;
}

RingRecordKind decode_ring_record(std::span<const uint8_t> record, RingRecordScratch& scratch,
                                  EventSink& sink) {
  profile_event_header header;
  if (record.size() < sizeof(header)) return RingRecordKind::Bad;
  std::memcpy(&header, record.data(), sizeof(header));
  if (header.size > record.size() || header.size < sizeof(header)) return RingRecordKind::Bad;
  record = record.first(header.size);
  switch (header.kind) {
    case PROFILE_EVENT_FP_STACK:
      return decode_fp_stack(record, header, scratch, sink);
    case PROFILE_EVENT_STACK_COPY:
      return decode_stack_copy(record, header, scratch, sink);
    case PROFILE_EVENT_PYTHON_STACK:
      return decode_python_stack(record, header, scratch);
    default:
      return RingRecordKind::Bad;
  }
}

}  // namespace gsymprof
