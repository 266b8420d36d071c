// gsym/reader/lookup_index.h - the acceleration index a Reader builds once at open
// (one pass over the records) and never changes: address buckets, line-table
// checkpoints and inline skip tables. Anything malformed gets no entry, so
// it takes the plain path and its exact errors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gsym/format/inline_info.h"
#include "gsym/format/line_table.h"
#include "gsym/reader/reader_layout.h"

namespace gsym::detail {

class LookupIndex {
 public:
  void build(const Layout& layout);
  // Heap bytes the index holds (its vectors' capacity).
  size_t memory_bytes() const {
    return bucket_first_.capacity() * sizeof(uint32_t) + checkpoints_.capacity() * sizeof(LineCheckpoint) +
           checkpoint_begin_.capacity() * sizeof(uint32_t) + skips_.capacity() * sizeof(InlineSkip) +
           skip_begin_.capacity() * sizeof(uint32_t) + child_ranges_.capacity() * sizeof(ChildRange) +
           child_starts_.capacity() * sizeof(uint64_t);
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

  std::span<const LineCheckpoint> line_checkpoints(size_t function) const {
    if (checkpoint_begin_.empty()) return {};
    return {checkpoints_.data() + checkpoint_begin_[function],
            checkpoints_.data() + checkpoint_begin_[function + 1]};
  }

  InlineSkips inline_skips(size_t function) const {
    InlineSkips view;
    if (skip_begin_.empty()) return view;
    view.function_skips = {skips_.data() + skip_begin_[function],
                           skips_.data() + skip_begin_[function + 1]};
    view.all_skips = skips_.data();
    view.child_ranges = child_ranges_.data();
    view.child_starts = child_starts_.data();
    return view;
  }

 private:
  void build_address_buckets(const Layout& layout);
  void build_line_checkpoints(const Layout& layout);
  void add_line_checkpoints(DataCursor line_data, uint64_t func_start);
  void build_inline_skips(const Layout& layout);
  void link_child_tables(size_t skips_mark, size_t table_mark);

  // For addresses bucketed by their high bits, the first table entry of each
  // bucket, so a lookup binary-searches a few entries instead of the whole
  // table (fewer cache misses when lookups jump between functions). Only
  // for sorted tables.
  std::vector<uint32_t> bucket_first_;  // size buckets + 1; empty = no index
  unsigned bucket_shift_ = 0;

  // For functions with long line programs, the decoder state every
  // ~kCheckpointBytes of program.
  std::vector<LineCheckpoint> checkpoints_;
  std::vector<uint32_t> checkpoint_begin_;  // per function, size n+1; empty = none

  // Inline subtrees of at least kSkipMinBytes, and for nodes with
  // kChildTableMin+ pairwise disjoint children, their ranges sorted by start.
  std::vector<InlineSkip> skips_;
  std::vector<uint32_t> skip_begin_;  // per function, size n+1; empty = none
  std::vector<ChildRange> child_ranges_;
  // child_ranges_[i].start, packed: the binary search over a big node's
  // children touches a quarter of the cache lines.
  std::vector<uint64_t> child_starts_;
};

}  // namespace gsym::detail
