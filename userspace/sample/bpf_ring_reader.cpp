#include "userspace/sample/bpf_ring_reader.h"

#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gsymprof {

size_t consume_ring(const RingView& ring, RingRecordCallback callback, void* context,
                    std::vector<uint8_t>& wrapped, uint64_t& bad_headers) {
  const uint64_t mask = ring.size - 1;
  uint64_t consumer = __atomic_load_n(ring.consumer_pos, __ATOMIC_ACQUIRE);
  size_t records = 0;
  for (;;) {
    const uint64_t producer = __atomic_load_n(ring.producer_pos, __ATOMIC_ACQUIRE);
    if (consumer >= producer) return records;
    if (producer - consumer > ring.size) {
      ++bad_headers;  // more than the ring holds: no kernel gets here; stop, don't spin
      return records;
    }
    while (consumer < producer) {
      // Records start 8-aligned, so a header never wraps.
      const size_t at = static_cast<size_t>(consumer & mask);
      const uint32_t header =
          __atomic_load_n(reinterpret_cast<const uint32_t*>(ring.data + at), __ATOMIC_ACQUIRE);
      if (header & BPF_RINGBUF_BUSY_BIT) return records;  // still being written
      const uint32_t length = header & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
      const uint64_t span = (uint64_t{length} + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t{7};
      if (length > ring.size - BPF_RINGBUF_HDR_SZ || span > producer - consumer) {
        ++bad_headers;  // no kernel writes this: stop rather than read past the ring
        return records;
      }
      if (!(header & BPF_RINGBUF_DISCARD_BIT)) {
        const size_t start = (at + BPF_RINGBUF_HDR_SZ) & mask;
        std::span<const uint8_t> record;
        if (start + length <= ring.size) {
          record = {ring.data + start, length};
        } else {
          const size_t first = ring.size - start;
          wrapped.resize(length);
          std::memcpy(wrapped.data(), ring.data + start, first);
          std::memcpy(wrapped.data() + first, ring.data, length - first);
          record = {wrapped.data(), length};
        }
        callback(context, record);
        ++records;
      }
      consumer += span;
      __atomic_store_n(ring.consumer_pos, consumer, __ATOMIC_RELEASE);
    }
  }
}

gsym::Expected<std::unique_ptr<BpfRingReader>> BpfRingReader::open(int map_fd, size_t data_bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return gsym::Error("sysconf(_SC_PAGESIZE) failed");
  if (data_bytes == 0 || (data_bytes & (data_bytes - 1)) != 0 || data_bytes % static_cast<size_t>(page) != 0)
    return gsym::Error("ring buffer size " + std::to_string(data_bytes) + " is not a power-of-two number of pages");
  std::unique_ptr<BpfRingReader> reader(new BpfRingReader());
  reader->map_fd_ = map_fd;
  reader->page_size_ = static_cast<size_t>(page);
  // Page 0: the consumer position, ours to write. From page 1: the
  // producer position's page, then the data, mapped once.
  reader->consumer_page_ = mmap(nullptr, reader->page_size_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (reader->consumer_page_ == MAP_FAILED) {
    reader->consumer_page_ = nullptr;
    return gsym::Error(std::string("mmap of the ring buffer's consumer page: ") + std::strerror(errno));
  }
  reader->producer_and_data_ =
      mmap(nullptr, reader->page_size_ + data_bytes, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(page));
  if (reader->producer_and_data_ == MAP_FAILED) {
    reader->producer_and_data_ = nullptr;
    return gsym::Error(std::string("mmap of the ring buffer's data: ") + std::strerror(errno));
  }
  auto* base = static_cast<uint8_t*>(reader->producer_and_data_);
  reader->view_ = {reinterpret_cast<const uint64_t*>(base), static_cast<uint64_t*>(reader->consumer_page_),
                   base + reader->page_size_, data_bytes};
  return reader;
}

BpfRingReader::~BpfRingReader() {
  if (producer_and_data_) munmap(producer_and_data_, page_size_ + view_.size);
  if (consumer_page_) munmap(consumer_page_, page_size_);
}

size_t BpfRingReader::consume(RingRecordCallback callback, void* context) {
  return consume_ring(view_, callback, context, wrapped_, bad_headers_);
}

}  // namespace gsymprof
