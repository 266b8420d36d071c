// Tests for userspace/sample/ring_records: BPF ring-buffer records, laid out
// as bpf/profile.h says, decode into the events the assembler takes
// (frame-pointer samples with kernel frames, stack copies with their bytes),
// and every record whose sizes or counts run past its bytes is refused.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "userspace/sample/ring_records.h"

using namespace gsymprof;

namespace {

struct Collected : EventSink {
  std::vector<std::vector<uint64_t>> user, kernel;
  std::vector<std::vector<uint8_t>> stacks;
  std::vector<UserRegisters> regs;
  std::vector<std::string> comms;
  std::vector<bool> flags;
  std::vector<OffCpuWait> waits;
  std::vector<RawShortWaits> short_waits;
  std::vector<std::string> short_comms;
  std::vector<std::vector<PythonFrameRef>> python;
  std::vector<bool> python_truncated;
  void on_sample(const RawSample& s) override {
    python.emplace_back(s.python.frames.begin(), s.python.frames.end());
    python_truncated.push_back(s.python.truncated);
    waits.push_back(s.off_cpu);
    user.emplace_back(s.ips.begin(), s.ips.end());
    kernel.emplace_back(s.kernel_ips.begin(), s.kernel_ips.end());
    comms.emplace_back(s.comm);
    flags.push_back(s.truncated);
  }
  void on_stack_copy(const RawStackCopy& c) override {
    python.emplace_back(c.python.frames.begin(), c.python.frames.end());
    python_truncated.push_back(c.python.truncated);
    stacks.emplace_back(c.stack.stack.begin(), c.stack.stack.end());
    kernel.emplace_back(c.kernel_ips.begin(), c.kernel_ips.end());
    regs.push_back(c.stack.regs);
    comms.emplace_back(c.comm);
    flags.push_back(c.copy_short);
    waits.push_back(c.off_cpu);
  }
  void on_short_waits(const RawShortWaits& w) override {
    short_waits.push_back(w);
    short_comms.emplace_back(w.comm);
  }
  void on_exec(uint32_t, uint64_t) override {}
  void on_mapping(const RawMapping&) override {}
  void on_fork(uint32_t, uint32_t, uint64_t) override {}
  void on_exit(uint32_t) override {}
  void on_lost(std::string_view, uint64_t) override {}
};

void fill_header(profile_event_header& h, uint32_t kind, uint32_t size) {
  h.kind = kind;
  h.size = size;
  h.tgid = 42;
  h.tid = 43;
  h.time_ns = 123456789;
  std::memcpy(h.comm, "worker\0\0\0\0\0\0\0\0\0", PROFILE_COMM_LEN);
}

std::vector<uint8_t> fp_record(uint32_t frames, uint32_t kernel_frames, uint32_t flags = 0) {
  profile_fp_stack_event e{};
  fill_header(e.header, PROFILE_EVENT_FP_STACK, sizeof(e));
  e.frame_count = frames;
  e.kernel_frame_count = kernel_frames;
  e.flags = flags;
  for (uint32_t i = 0; i < PROFILE_MAX_FRAMES; ++i) e.ips[i] = 0x400000 + i;
  for (uint32_t i = 0; i < PROFILE_MAX_KERNEL_FRAMES; ++i) e.kernel_ips[i] = 0xffffffff81000000ull + i;
  std::vector<uint8_t> bytes(sizeof(e));
  std::memcpy(bytes.data(), &e, sizeof(e));
  return bytes;
}

std::vector<uint8_t> python_record(uint32_t frames, uint32_t flags, uint32_t tid = 43,
                                   uint64_t time_ns = 123456789) {
  profile_python_stack_event e{};
  fill_header(e.header, PROFILE_EVENT_PYTHON_STACK, sizeof(e));
  e.header.tid = tid;
  e.header.time_ns = time_ns;
  e.frame_count = frames;
  e.flags = flags;
  for (uint32_t i = 0; i < PROFILE_MAX_PYTHON_FRAMES; ++i)
    e.frames[i] = {0x7f0000001000ull + 0x100 * i, static_cast<int32_t>(2 * i) - 2, i % 2 ? PROFILE_PYTHON_ENTRY : 0u};
  std::vector<uint8_t> bytes(sizeof(e));
  std::memcpy(bytes.data(), &e, sizeof(e));
  return bytes;
}

std::vector<uint8_t> copy_record(uint32_t stack_size, uint32_t kernel_frames, size_t extra = 0) {
  const size_t fixed = sizeof(profile_stack_copy_event);
  profile_stack_copy_event e{};
  fill_header(e.header, PROFILE_EVENT_STACK_COPY, static_cast<uint32_t>(fixed + stack_size + extra));
  e.ip = 0x401000, e.sp = 0x7ffd0000, e.bp = 0x7ffd0040;
  e.stack_size = stack_size;
  e.kernel_frame_count = kernel_frames;
  std::vector<uint8_t> bytes(fixed + stack_size + extra);
  std::memcpy(bytes.data(), &e, fixed);
  for (size_t i = fixed; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  return bytes;
}

}  // namespace

TEST_CASE("ring records: a frame-pointer sample with kernel frames") {
  Collected sink;
  RingRecordScratch scratch;
  auto bytes = fp_record(3, 2, PROFILE_STACK_TRUNCATED);
  CHECK(ring_record_time(bytes) == 123456789u);
  REQUIRE(decode_ring_record(bytes, scratch, sink) == RingRecordKind::Sample);
  REQUIRE(sink.user.size() == 1);
  CHECK(sink.user[0] == std::vector<uint64_t>{0x400000, 0x400001, 0x400002});
  CHECK(sink.kernel[0] == std::vector<uint64_t>{0xffffffff81000000ull, 0xffffffff81000001ull});
  CHECK(sink.comms[0] == "worker");
  CHECK(sink.flags[0]);
}

TEST_CASE("ring records: a stack copy carries its registers and exactly its valid bytes") {
  Collected sink;
  RingRecordScratch scratch;
  auto bytes = copy_record(64, 1, /*extra=*/16);  // the record holds more than is valid
  REQUIRE(decode_ring_record(bytes, scratch, sink) == RingRecordKind::Sample);
  REQUIRE(sink.stacks.size() == 1);
  CHECK(sink.stacks[0].size() == 64);
  CHECK(sink.stacks[0][0] == static_cast<uint8_t>(sizeof(profile_stack_copy_event)));
  CHECK(sink.regs[0] == UserRegisters{0x401000, 0x7ffd0000, 0x7ffd0040});
  CHECK(sink.kernel[0].size() == 1);
}

TEST_CASE("ring records: sizes and counts past the bytes are refused, never read") {
  Collected sink;
  RingRecordScratch scratch;
  auto fp = fp_record(PROFILE_MAX_FRAMES + 1, 0);
  CHECK(decode_ring_record(fp, scratch, sink) == RingRecordKind::Bad);
  fp = fp_record(1, PROFILE_MAX_KERNEL_FRAMES + 1);
  CHECK(decode_ring_record(fp, scratch, sink) == RingRecordKind::Bad);
  fp = fp_record(1, 1);
  // Every truncation of a good record is refused.
  for (size_t n = 0; n < fp.size(); ++n)
    CHECK(decode_ring_record(std::span<const uint8_t>(fp.data(), n), scratch, sink) == RingRecordKind::Bad);
  auto copy = copy_record(64, 0);
  uint32_t too_big = 65;  // stack_size past the record's size
  std::memcpy(copy.data() + offsetof(profile_stack_copy_event, stack_size), &too_big, 4);
  CHECK(decode_ring_record(copy, scratch, sink) == RingRecordKind::Bad);
  auto unknown = fp_record(1, 1);
  uint32_t kind = 99;
  std::memcpy(unknown.data(), &kind, 4);
  CHECK(decode_ring_record(unknown, scratch, sink) == RingRecordKind::Bad);
  CHECK(sink.user.empty());
  CHECK(sink.stacks.empty());
}

TEST_CASE("ring records: an off-CPU record carries its wait and its reason") {
  RingRecordScratch scratch;
  Collected sink;
  std::vector<uint8_t> record = fp_record(2, 3);
  profile_event_header header;
  std::memcpy(&header, record.data(), sizeof(header));
  header.off_cpu_ns = 150000000;
  header.off_cpu_state = PROFILE_OFF_CPU | 0x2;  // TASK_UNINTERRUPTIBLE
  std::memcpy(record.data(), &header, sizeof(header));
  REQUIRE(decode_ring_record(record, scratch, sink) == RingRecordKind::Sample);
  REQUIRE(sink.waits.size() == 1);
  CHECK(sink.waits[0] == OffCpuWait{OffCpuReason::DiskSleep, 150000000});

  // A CPU sample: the off-CPU fields say nothing without PROFILE_OFF_CPU.
  header.off_cpu_state = 0x1;
  std::memcpy(record.data(), &header, sizeof(header));
  REQUIRE(decode_ring_record(record, scratch, sink) == RingRecordKind::Sample);
  CHECK(sink.waits[1] == OffCpuWait{});
}

TEST_CASE("ring records: the kernel's task states name the off-CPU reasons") {
  CHECK(off_cpu_reason(0x1, false) == OffCpuReason::Sleep);
  CHECK(off_cpu_reason(0x2, false) == OffCpuReason::DiskSleep);
  CHECK(off_cpu_reason(0x2 | 0x100, false) == OffCpuReason::DiskSleep);  // TASK_KILLABLE
  CHECK(off_cpu_reason(0x2 | 0x400, false) == OffCpuReason::Idle);       // TASK_IDLE
  CHECK(off_cpu_reason(0x4 | 0x100, false) == OffCpuReason::Stopped);
  CHECK(off_cpu_reason(0x8, false) == OffCpuReason::Traced);
  CHECK(off_cpu_reason(0x40, false) == OffCpuReason::Other);  // TASK_PARKED
  CHECK(off_cpu_reason(0, false) == OffCpuReason::Runqueue);  // yielded
  CHECK(off_cpu_reason(0x1, true) == OffCpuReason::Runqueue); // preempted while going to sleep
  CHECK(short_wait_reason(PROFILE_OFF_CPU_PREEMPTED) == OffCpuReason::Runqueue);
  CHECK(short_wait_reason(0x1) == OffCpuReason::Sleep);
}

TEST_CASE("ring records: a short_waits entry becomes one RawShortWaits") {
  Collected sink;
  profile_short_wait_key key{42, 43, 0x1, 0};
  profile_short_wait_value value{};
  value.ns = 5000;
  value.count = 7;
  std::memcpy(value.comm, "worker", 6);
  deliver_short_waits(key, value, sink);
  REQUIRE(sink.short_waits.size() == 1);
  CHECK(sink.short_waits[0].pid == 42);
  CHECK(sink.short_waits[0].tid == 43);
  CHECK(sink.short_comms[0] == "worker");
  CHECK(sink.short_waits[0].reason == OffCpuReason::Sleep);
  CHECK(sink.short_waits[0].ns == 5000);
  CHECK(sink.short_waits[0].count == 7);
}

TEST_CASE("ring records: a Python stack goes with the next sample of its thread and time, only that one") {
  Collected sink;
  RingRecordScratch scratch;
  REQUIRE(decode_ring_record(python_record(3, PROFILE_PYTHON_TRUNCATED), scratch, sink) ==
          RingRecordKind::PythonStack);
  CHECK(sink.python.empty());  // nothing delivered until its sample
  // Another thread's sample in between (another CPU's record) takes nothing.
  auto other = fp_record(2, 0);
  profile_event_header header;
  std::memcpy(&header, other.data(), sizeof(header));
  header.tid = 99;
  std::memcpy(other.data(), &header, sizeof(header));
  REQUIRE(decode_ring_record(other, scratch, sink) == RingRecordKind::Sample);
  CHECK(sink.python.back().empty());
  REQUIRE(decode_ring_record(copy_record(64, 0), scratch, sink) == RingRecordKind::Sample);
  REQUIRE(sink.python.back().size() == 3);
  CHECK(sink.python.back()[0] == PythonFrameRef{0x7f0000001000ull, -2, false});
  CHECK(sink.python.back()[1] == PythonFrameRef{0x7f0000001100ull, 0, true});
  CHECK(sink.python_truncated.back());
  // Taken: the thread's next sample has none.
  REQUIRE(decode_ring_record(fp_record(1, 0), scratch, sink) == RingRecordKind::Sample);
  CHECK(sink.python.back().empty());
  // A stack whose sample was lost (another time) is not given to a later one.
  REQUIRE(decode_ring_record(python_record(2, 0, 43, 1), scratch, sink) == RingRecordKind::PythonStack);
  REQUIRE(decode_ring_record(fp_record(1, 0), scratch, sink) == RingRecordKind::Sample);
  CHECK(sink.python.back().empty());
}

TEST_CASE("ring records: a Python stack with more frames than it holds, or cut short, is refused") {
  Collected sink;
  RingRecordScratch scratch;
  CHECK(decode_ring_record(python_record(PROFILE_MAX_PYTHON_FRAMES + 1, 0), scratch, sink) == RingRecordKind::Bad);
  auto whole = python_record(1, 0);
  for (size_t n : {sizeof(profile_event_header), whole.size() - 1}) {
    auto cut = whole;
    cut.resize(n);
    profile_event_header header;
    std::memcpy(&header, cut.data(), sizeof(header));
    header.size = static_cast<uint32_t>(n);
    std::memcpy(cut.data(), &header, sizeof(header));
    CHECK(decode_ring_record(cut, scratch, sink) == RingRecordKind::Bad);
  }
}
