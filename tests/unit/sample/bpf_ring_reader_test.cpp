// Unit tests of consume_ring (bpf_ring_reader.h) on memory laid out as the
// kernel lays out a BPF ring buffer: 8-byte headers (length, busy and
// discard bits), records 8-aligned, positions that only grow, data mapped
// once (a record may wrap past the end).
#include <doctest/doctest.h>

#include <linux/bpf.h>

#include <cstring>
#include <random>
#include <vector>

#include "userspace/sample/bpf_ring_reader.h"

using gsymprof::consume_ring;
using gsymprof::RingView;

namespace {

// A producer as the kernel's: reserve (busy), fill, commit or discard.
struct FakeRing {
  explicit FakeRing(size_t size) : data(size) {}
  std::vector<uint8_t> data;
  uint64_t producer = 0, consumer = 0;

  RingView view() { return {&producer, &consumer, data.data(), data.size()}; }
  // Writes a record of `bytes` at the producer position; returns its start.
  uint64_t put(const std::vector<uint8_t>& bytes, uint32_t flags = 0) {
    const uint64_t at = producer;
    const uint32_t header = static_cast<uint32_t>(bytes.size()) | flags;
    std::memcpy(&data[at & (data.size() - 1)], &header, 4);
    for (size_t i = 0; i < bytes.size(); ++i) data[(at + 8 + i) & (data.size() - 1)] = bytes[i];
    producer += (bytes.size() + 8 + 7) & ~size_t{7};
    return at;
  }
  void set_header_flags(uint64_t at, uint32_t flags) {
    uint32_t header = 0;
    std::memcpy(&header, &data[at & (data.size() - 1)], 4);
    header = (header & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) | flags;
    std::memcpy(&data[at & (data.size() - 1)], &header, 4);
  }
};

std::vector<uint8_t> record_of(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

struct Seen {
  std::vector<std::vector<uint8_t>> records;
  static void add(void* context, std::span<const uint8_t> record) {
    static_cast<Seen*>(context)->records.emplace_back(record.begin(), record.end());
  }
};

}  // namespace

TEST_CASE("bpf ring reader: every committed record in order, also across the end") {
  FakeRing ring(4096);
  std::vector<uint8_t> wrapped;
  uint64_t bad = 0;
  std::mt19937 random(7);
  std::vector<std::vector<uint8_t>> sent;
  size_t seen_total = 0;
  // Many laps of the ring: records of every size, some wrapping.
  for (int round = 0; round < 400; ++round) {
    const size_t free_bytes = ring.data.size() - (ring.producer - ring.consumer);
    const size_t size = 1 + random() % 1500;
    if (size + 16 <= free_bytes) {
      sent.push_back(record_of(size, static_cast<uint8_t>(round)));
      ring.put(sent.back());
    }
    if (random() % 3 == 0) {
      Seen seen;
      const size_t n = consume_ring(ring.view(), Seen::add, &seen, wrapped, bad);
      CHECK(n == seen.records.size());
      for (const auto& record : seen.records) {
        REQUIRE(seen_total < sent.size());
        CHECK(record == sent[seen_total]);
        ++seen_total;
      }
      CHECK(ring.consumer == ring.producer);
    }
  }
  CHECK(ring.producer > 4 * ring.data.size());  // it went round
  CHECK(bad == 0);
}

TEST_CASE("bpf ring reader: stops at a record still being written, skips discarded ones") {
  FakeRing ring(4096);
  std::vector<uint8_t> wrapped;
  uint64_t bad = 0;
  ring.put(record_of(10, 1));
  ring.put(record_of(20, 2), BPF_RINGBUF_DISCARD_BIT);
  const uint64_t busy = ring.put(record_of(30, 3), BPF_RINGBUF_BUSY_BIT);
  ring.put(record_of(40, 4));
  Seen seen;
  CHECK(consume_ring(ring.view(), Seen::add, &seen, wrapped, bad) == 1);
  REQUIRE(seen.records.size() == 1);
  CHECK(seen.records[0] == record_of(10, 1));
  CHECK(ring.consumer == busy);  // past the discarded record, at the busy one
  ring.set_header_flags(busy, 0);  // committed
  CHECK(consume_ring(ring.view(), Seen::add, &seen, wrapped, bad) == 2);
  REQUIRE(seen.records.size() == 3);
  CHECK(seen.records[1] == record_of(30, 3));
  CHECK(seen.records[2] == record_of(40, 4));
  CHECK(ring.consumer == ring.producer);
  CHECK(bad == 0);
}

namespace {

// One good record, then what no kernel writes at `at`: the walk hands over
// the good one, stops there and counts it.
void check_walk_stops_at_bad(FakeRing& ring, uint64_t at) {
  std::vector<uint8_t> wrapped;
  uint64_t bad = 0;
  Seen seen;
  CHECK(consume_ring(ring.view(), Seen::add, &seen, wrapped, bad) == 1);
  CHECK(seen.records.size() == 1);
  CHECK(bad == 1);
  CHECK(ring.consumer == at);
}

}  // namespace

TEST_CASE("bpf ring reader: an impossible record stops the walk, counted") {
  FakeRing ring(4096);
  ring.put(record_of(8, 1));
  SUBCASE("a header longer than the ring") {
    const uint64_t at = ring.producer;
    const uint32_t header = 5000;
    std::memcpy(&ring.data[at], &header, 4);
    ring.producer += 64;
    check_walk_stops_at_bad(ring, at);
  }
  SUBCASE("a record that would end past the producer position") {
    const uint64_t at = ring.put(record_of(100, 2));
    ring.producer = at + 16;  // inside the record: the kernel advances it by whole records
    check_walk_stops_at_bad(ring, at);
  }
}
