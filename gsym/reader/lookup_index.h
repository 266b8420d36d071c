// gsym/reader/lookup_index.h - the acceleration index of a Reader: address
// buckets, built at open (one pass over the address table), and per function
// its line-table checkpoints and inline skip tables, built the second time a
// lookup lands in that function. A process that looks up a few addresses in
// a big file pays for the functions it names twice, not for the whole file
// (cppcheck's 11 MB GSYM: 50 ms at open). Anything malformed gets no entry,
// so it takes the plain path and its exact errors.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "gsym/format/inline_info.h"
#include "gsym/format/line_table.h"
#include "gsym/reader/reader_layout.h"

namespace gsym::detail {

// One function's checkpoints and inline skips; empty = the plain path.
// Indexes inside it (InlineSkip::table_begin, ChildRange::child_skip) are
// into its own vectors.
struct FunctionIndex {
  // For a long line program, the decoder state every ~kCheckpointBytes.
  std::vector<LineCheckpoint> checkpoints;
  // Inline subtrees of at least kSkipMinBytes, sorted by children_start, and
  // for nodes with kChildTableMin+ pairwise disjoint children, their ranges
  // sorted by start.
  std::vector<InlineSkip> skips;
  std::vector<ChildRange> child_ranges;
  // child_ranges[i].start, packed: the binary search over a big node's
  // children touches a quarter of the cache lines.
  std::vector<uint64_t> child_starts;

  std::span<const LineCheckpoint> line_checkpoints() const { return checkpoints; }
  InlineSkips inline_skips() const {
    return {skips, skips.data(), child_ranges.data(), child_starts.data()};
  }
  size_t memory_bytes() const {
    return sizeof(FunctionIndex) + checkpoints.capacity() * sizeof(LineCheckpoint) +
           skips.capacity() * sizeof(InlineSkip) + child_ranges.capacity() * sizeof(ChildRange) +
           child_starts.capacity() * sizeof(uint64_t);
  }
};

// Safe to use from many threads at once: a function's index is built under
// a lock and published with release/acquire; once published it never changes.
class LookupIndex {
 public:
  LookupIndex() = default;
  LookupIndex(const LookupIndex&) = delete;
  LookupIndex& operator=(const LookupIndex&) = delete;

  // At open: the address buckets, and a slot per function.
  void build(const Layout& layout);
  // Heap bytes the index holds, including every function index built so far.
  size_t memory_bytes() const {
    return bucket_first_.capacity() * sizeof(uint32_t) +
           function_count_ * sizeof(std::atomic<const FunctionIndex*>) +
           built_bytes_.load(std::memory_order_relaxed);
  }

  // The address-table entries [first, first + count) that can hold the
  // greatest start <= base + rel (entries before them are all below rel,
  // entries after all above); false when there are no buckets.
  bool bucket(uint64_t rel, uint64_t num_addresses, uint64_t& first, uint64_t& count) const {
    if (bucket_first_.empty()) return false;
    const uint64_t b = rel >> bucket_shift_;
    const uint64_t buckets = bucket_first_.size() - 1;
    if (b >= buckets) {
      first = num_addresses - 1;
      count = 1;
    } else {
      first = bucket_first_[b];
      count = bucket_first_[b + 1] - first;
    }
    return true;
  }

  // Function i's index (i < the layout's function count). Empty on its first
  // lookup, which takes the plain path: for one address that is cheaper than
  // indexing the whole function. Built on the second.
  const FunctionIndex& function(const Layout& layout, size_t i) const {
    if (i >= function_count_) return kNone;
    const FunctionIndex* built = functions_[i].load(std::memory_order_acquire);
    if (built != nullptr && built != &kSeenOnce) return *built;
    return first_or_second_lookup(layout, i, built);
  }

 private:
  static const FunctionIndex kNone;      // nothing worth indexing (or no index)
  static const FunctionIndex kSeenOnce;  // looked up once: the plain path

  void build_address_buckets(const Layout& layout);
  const FunctionIndex& first_or_second_lookup(const Layout& layout, size_t i,
                                              const FunctionIndex* seen) const;
  static FunctionIndex index_function(const Layout& layout, size_t i);

  // For addresses bucketed by their high bits, the first table entry of each
  // bucket, so a lookup binary-searches a few entries instead of the whole
  // table (fewer cache misses when lookups jump between functions). Only
  // for sorted tables.
  std::vector<uint32_t> bucket_first_;  // size buckets + 1; empty = no index
  unsigned bucket_shift_ = 0;

  size_t function_count_ = 0;  // 0 = no per-function index
  std::unique_ptr<std::atomic<const FunctionIndex*>[]> functions_;
  mutable std::mutex build_mutex_;
  mutable std::deque<FunctionIndex> built_;  // what non-kNone slots point to
  mutable std::atomic<size_t> built_bytes_{0};
};

}  // namespace gsym::detail
