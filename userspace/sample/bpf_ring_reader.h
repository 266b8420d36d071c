// userspace/sample/bpf_ring_reader.h - stage: the BPF ring buffer's bytes
// -> one callback per committed record (ring_records.h decodes them).
//
// libbpf's ring_buffer maps the data area twice, back to back, as the kernel
// allows, so a record that wraps reads as one piece. That doubles the page
// tables set up and torn down per session (a sixth of a 10 s profile's CPU
// at 9999 Hz, with a 256 MiB ring) and shows every page twice in the RSS.
// This reader maps the data once and copies the rare record that wraps.
// The walk over positions and headers (consume_ring) is free of I/O:
// unit-tested on memory laid out as the kernel lays it out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gsym/base/expected.h"

namespace gsymprof {

// One committed, not discarded record's bytes (valid during the call).
using RingRecordCallback = void (*)(void* context, std::span<const uint8_t> record);

// The consumer's view of a ring: the two positions (the kernel's producer
// position, ours to advance; read and written with acquire/release order,
// as the kernel pairs them) and the data area, a power of two in size.
struct RingView {
  const uint64_t* producer_pos = nullptr;
  uint64_t* consumer_pos = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Hands every record committed between the consumer and producer positions
// to `callback`, in order, advancing the consumer position past each (so
// the producer may reuse its space at once); stops at a record still being
// written. A record that wraps is copied into `wrapped`. Returns the
// records handed over; a header whose length cannot be (longer than the
// ring, or past the producer position), or positions further apart than
// the ring is long, stop the walk and count in `bad_headers`.
size_t consume_ring(const RingView& ring, RingRecordCallback callback, void* context,
                    std::vector<uint8_t>& wrapped, uint64_t& bad_headers);

class BpfRingReader {
 public:
  // Maps the ring of BPF_MAP_TYPE_RINGBUF map `map_fd` (`data_bytes`, its
  // max_entries). The descriptor stays the caller's.
  static gsym::Expected<std::unique_ptr<BpfRingReader>> open(int map_fd, size_t data_bytes);
  ~BpfRingReader();
  BpfRingReader(const BpfRingReader&) = delete;
  BpfRingReader& operator=(const BpfRingReader&) = delete;

  // Readable (EPOLLIN) when the kernel woke the consumer: the map's own fd.
  int wait_fd() const { return map_fd_; }
  size_t consume(RingRecordCallback callback, void* context);
  uint64_t bad_headers() const { return bad_headers_; }

 private:
  BpfRingReader() = default;
  int map_fd_ = -1;
  void* consumer_page_ = nullptr;
  void* producer_and_data_ = nullptr;
  size_t page_size_ = 0;
  RingView view_;  // its size: the data's, as mapped
  std::vector<uint8_t> wrapped_;
  uint64_t bad_headers_ = 0;
};

}  // namespace gsymprof
