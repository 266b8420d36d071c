// libFuzzer target: the BPF ring buffer's records -> events. The input is a
// run of records, each prefixed by a 16-bit length, decoded with one scratch
// (as the sampler does), so Python stacks pair with later samples. Any
// record must decode or be refused; what reaches the sink must stay within
// the limits bpf/profile.h sets.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "userspace/sample/ring_records.h"

namespace {

struct CheckingSink : gsymprof::EventSink {
  void on_sample(const gsymprof::RawSample& s) override {
    if (s.ips.size() > PROFILE_MAX_FRAMES || s.kernel_ips.size() > PROFILE_MAX_KERNEL_FRAMES ||
        s.python.frames.size() > PROFILE_MAX_PYTHON_FRAMES || s.comm.size() > PROFILE_COMM_LEN)
      std::abort();
  }
  void on_stack_copy(const gsymprof::RawStackCopy& c) override {
    if (c.kernel_ips.size() > PROFILE_MAX_KERNEL_FRAMES || c.python.frames.size() > PROFILE_MAX_PYTHON_FRAMES ||
        c.comm.size() > PROFILE_COMM_LEN)
      std::abort();
    volatile uint8_t sum = 0;
    for (uint8_t b : c.stack.stack) sum = static_cast<uint8_t>(sum + b);  // every byte readable
  }
  void on_short_waits(const gsymprof::RawShortWaits&) override {}
  void on_exec(uint32_t, uint64_t) override {}
  void on_mapping(const gsymprof::RawMapping&) override {}
  void on_fork(uint32_t, uint32_t, uint64_t) override {}
  void on_exit(uint32_t) override {}
  void on_lost(std::string_view, uint64_t) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gsymprof::RingRecordScratch scratch;
  CheckingSink sink;
  std::span<const uint8_t> rest(data, size);
  while (rest.size() >= 2) {
    const size_t length = std::min<size_t>(rest[0] | (rest[1] << 8), rest.size() - 2);
    (void)gsymprof::decode_ring_record(rest.subspan(2, length), scratch, sink);
    rest = rest.subspan(2 + length);
  }
  if (scratch.python.size() > gsymprof::RingRecordScratch::kMaxPendingPython) std::abort();
  return 0;
}
