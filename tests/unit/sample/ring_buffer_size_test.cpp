// Unit tests of the ring buffer's sizing rule (sampler.h: ring_buffer_bytes_for,
// record_bytes_for): big enough for half a second at the rate, never smaller than a few of the
// largest records per CPU, a power of two within the bounds.
#include <doctest/doctest.h>

#include "userspace/sample/sampler.h"

using gsymprof::kMaxRingBufferBytes;
using gsymprof::kMinRingBufferBytes;
using gsymprof::ring_buffer_bytes_for;

namespace {
bool power_of_two(size_t n) { return n && (n & (n - 1)) == 0; }
constexpr size_t kMiB = size_t{1} << 20;
}  // namespace

TEST_CASE("ring buffer size: holds half a second of every CPU's samples") {
  // 2 CPUs at 999 Hz with 16 KiB records: 32.7 MB/s, 16.4 MB half a second.
  const size_t bytes = ring_buffer_bytes_for(2, 999, 16 << 10, 16 << 10);
  CHECK(bytes == 16 * kMiB);
  CHECK(static_cast<double>(bytes) >= 2 * 999 * 16384 * gsymprof::kRingBufferSeconds);
  // Twice the CPUs or the rate: twice the buffer.
  CHECK(ring_buffer_bytes_for(4, 999, 16 << 10, 16 << 10) == 32 * kMiB);
  CHECK(ring_buffer_bytes_for(2, 1998, 16 << 10, 16 << 10) == 32 * kMiB);
}

TEST_CASE("ring buffer size: room for several of the largest records per CPU") {
  // A slow rate still fits kRingBufferMaxRecords 256 KiB copies per CPU.
  const size_t bytes = ring_buffer_bytes_for(2, 1, 1024, 256 << 10);
  CHECK(bytes >= 2 * gsymprof::kRingBufferMaxRecords * (256 << 10));
  CHECK(bytes == 4 * kMiB);
}

TEST_CASE("ring buffer size: the agent's sizing, seconds of records at low rates") {
  // 2 CPUs at 19 Hz, 16 KiB typical and 256 KiB largest records: 2 s of
  // records (1.2 MB) beats 2 of the largest per CPU (1 MB): 2 MiB, where the
  // default rule's 8 largest per CPU (4.2 MB) needs 8 MiB.
  CHECK(ring_buffer_bytes_for(2, 19, 16 << 10, (256 << 10) + 512, gsymprof::kAgentRingSizing) == 2 * kMiB);
  CHECK(ring_buffer_bytes_for(2, 19, 16 << 10, (256 << 10) + 512) == 8 * kMiB);
  // At 99 Hz the seconds rule sizes it: 6.5 MB, 8 MiB.
  CHECK(ring_buffer_bytes_for(2, 99, 16 << 10, (256 << 10) + 512, gsymprof::kAgentRingSizing) == 8 * kMiB);
}

TEST_CASE("ring buffer size: a power of two within the bounds") {
  CHECK(ring_buffer_bytes_for(1, 1, 64, 64) == kMinRingBufferBytes);
  CHECK(ring_buffer_bytes_for(0, 1, 64, 64) == kMinRingBufferBytes);  // no CPU count: one
  CHECK(ring_buffer_bytes_for(4096, 100000, 1 << 20, 1 << 20) == kMaxRingBufferBytes);
  for (size_t cpus : {1, 2, 3, 7, 64})
    for (uint32_t hz : {1u, 99u, 999u, 9999u})
      for (size_t record : {size_t{600}, size_t{1640}, size_t{17000}}) {
        const size_t bytes = ring_buffer_bytes_for(cpus, hz, record, record);
        CHECK(power_of_two(bytes));
        CHECK(bytes >= kMinRingBufferBytes);
        CHECK(bytes <= kMaxRingBufferBytes);
        // The smallest such power of two: half of it would not do.
        if (bytes > kMinRingBufferBytes && bytes < kMaxRingBufferBytes)
          CHECK(static_cast<double>(bytes / 2) <
                std::max(cpus * hz * record * gsymprof::kRingBufferSeconds,
                         static_cast<double>(cpus * gsymprof::kRingBufferMaxRecords * record)));
      }
}

TEST_CASE("ring buffer size: record sizes by call-graph mode") {
  gsymprof::SamplerOptions options;
  options.stack_copy_bytes = 0;  // frame pointers: one fixed record size
  auto [fp_typical, fp_largest] = gsymprof::record_bytes_for(options);
  CHECK(fp_typical == fp_largest);
  CHECK(fp_typical > 127 * 8);
  options.stack_copy_bytes = 256 << 10;  // the default copy: typical 16 KiB of it
  auto [typical, largest] = gsymprof::record_bytes_for(options);
  CHECK(largest - typical == (256 << 10) - (16 << 10));
  options.stack_copy_bytes = 4096;  // a small cap is also the typical copy
  auto [small_typical, small_largest] = gsymprof::record_bytes_for(options);
  CHECK(small_typical == small_largest);
  // The default session on this machine: 2 CPUs at 999 Hz get 32 MiB
  // (17 MB half a second, rounded up to a power of two), which dropped no
  // sample system-wide during a 2-job compile (tests/bench/README.md, Results).
  CHECK(ring_buffer_bytes_for(2, 999, typical, largest) == 32 * kMiB);
}
