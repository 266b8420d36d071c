// libFuzzer target: the BPF ring buffer's consumer walk (bpf_ring_reader.h)
// over any bytes. The input is the producer and consumer positions (8 bytes
// each; the consumer 8-aligned, as the kernel keeps it) and then the ring's
// data, cut to a power of two. Every record handed over must lie in the
// data or the wrap buffer, the consumer position only grows and never
// passes the producer's, and the walk ends.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "userspace/sample/bpf_ring_reader.h"

namespace {

struct Check {
  size_t records = 0, bytes = 0;
  static void add(void* context, std::span<const uint8_t> record) {
    auto* check = static_cast<Check*>(context);
    volatile uint8_t sum = 0;
    for (uint8_t b : record) sum = static_cast<uint8_t>(sum + b);  // every byte readable
    ++check->records;
    check->bytes += record.size();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16 + 8) return 0;
  uint64_t producer = 0, consumer = 0;
  std::memcpy(&producer, data, 8);
  std::memcpy(&consumer, data + 8, 8);
  consumer &= ~uint64_t{7};
  size_t ring_size = 8;
  while (ring_size * 2 <= size - 16) ring_size *= 2;
  std::vector<uint8_t> ring(data + 16, data + 16 + ring_size);  // aligned, as the mapping is
  const uint64_t consumer_before = consumer;
  gsymprof::RingView view{&producer, &consumer, ring.data(), ring.size()};
  std::vector<uint8_t> wrapped;
  uint64_t bad = 0;
  Check check;
  const size_t n = gsymprof::consume_ring(view, Check::add, &check, wrapped, bad);
  if (n != check.records || consumer < consumer_before) std::abort();
  if (consumer != consumer_before && consumer > producer) std::abort();  // never past the producer
  return 0;
}
