// gsym/reader/lookup_index.cpp - building the acceleration index (see lookup_index.h).
#include "gsym/reader/lookup_index.h"

#include <algorithm>
#include <optional>

namespace gsym::detail {

namespace {

// A checkpoint about every this many bytes of line program.
constexpr size_t kCheckpointBytes = 48;
// Inline subtrees shorter than this are cheaper to step over than to look up.
constexpr uint64_t kSkipMinBytes = 16;
// Nodes with fewer children scan them.
constexpr size_t kChildTableMin = 4;

// The payload of function i's only record of `type`, or nullopt when it has
// none, several, or a malformed record list (the plain path reports those).
std::optional<DataCursor> single_record(const Layout& layout, uint64_t i, InfoType type) {
  DataCursor c = layout.cursor_at(layout.info_offset(i));
  c.skip(4 + layout.string_offset_size());  // Size, Name
  std::optional<DataCursor> found;
  int count = 0;
  while (c.ok()) {
    const uint32_t record_type = c.u32();
    const uint32_t length = c.u32();
    if (!c.ok() || length > c.remaining()) break;
    DataCursor payload = c.sub(length);
    if (record_type == static_cast<uint32_t>(InfoType::EndOfList)) break;
    if (record_type == static_cast<uint32_t>(type)) {
      found = payload;
      ++count;
    }
  }
  if (count != 1) return std::nullopt;
  return found;
}

// One inline tree's skips and child tables, appended to the index's vectors.
// Mirrors the lookup's skip rules (a raw range count of 0 ends a sibling
// list); index() is false for a malformed tree or one past the depth limit.
class TreeIndexer {
 public:
  TreeIndexer(std::vector<InlineSkip>& skips, std::vector<ChildRange>& child_ranges)
      : skips_(skips), child_ranges_(child_ranges) {}

  bool index(DataCursor tree, uint64_t func_start) {
    uint64_t base = func_start;
    do {
      const uint64_t node_at = tree.offset();
      const uint64_t num_ranges = tree.uleb();
      if (!tree.ok()) return false;
      if (num_ranges == 0) {
        if (open_.empty()) break;
        close_level(tree.offset());
        continue;
      }
      if (!open_.empty()) base = open_.back().base;
      uint64_t first_start = UINT64_MAX;
      bool any = false, wraps = false;
      const size_t before = pending_.size();
      for (uint64_t r = 0; r < num_ranges && tree.ok(); ++r) {
        const uint64_t start = base + tree.uleb();
        const uint64_t size = tree.uleb();
        if (size == 0) continue;
        any = true;
        wraps |= start + size < start;
        first_start = std::min(first_start, start);
        if (!open_.empty()) pending_.push_back({start, start + size, node_at});
      }
      const bool kids = read_node_tail(tree).has_children;
      if (!tree.ok() || (kids && open_.size() + 2 >= kMaxInlineDepth)) return false;
      // A child whose ranges are all empty ends its sibling list in LLVM's
      // walk; the table cannot express that, so that level gets none.
      if (!open_.empty() && (!any || wraps)) {
        open_.back().disjoint_ok = false;
        pending_.resize(before);
      }
      if (!any && open_.empty()) break;
      if (kids) open_.push_back({node_at, tree.offset(), first_start, pending_.size(), any});
    } while (!open_.empty());
    return true;
  }

 private:
  struct Level {
    uint64_t node;  // the parent node's offset
    uint64_t children_start;
    uint64_t base;        // children's ranges are relative to this
    size_t pending_mark;  // where this level's children start in `pending_`
    bool disjoint_ok;     // every child has a non-empty, non-wrapping range
  };

  // The innermost open level's children ended at `end`: its skip, with a
  // child table when its children are many and pairwise disjoint.
  void close_level(uint64_t end) {
    Level& level = open_.back();
    InlineSkip skip{level.children_start, end, level.node};
    auto first = pending_.begin() + static_cast<ptrdiff_t>(level.pending_mark);
    const size_t count = static_cast<size_t>(pending_.end() - first);
    if (level.disjoint_ok && count >= kChildTableMin) {
      std::sort(first, pending_.end(),
                [](const ChildRange& a, const ChildRange& b) { return a.start < b.start; });
      bool disjoint = true;
      for (auto it = first + 1; disjoint && it < pending_.end(); ++it)
        disjoint = it->start >= (it - 1)->end;
      if (disjoint && child_ranges_.size() + count <= UINT32_MAX) {
        skip.table_begin = static_cast<uint32_t>(child_ranges_.size());
        skip.table_count = static_cast<uint32_t>(count);
        child_ranges_.insert(child_ranges_.end(), first, pending_.end());
      }
    }
    if (end - level.children_start >= kSkipMinBytes || skip.table_count) skips_.push_back(skip);
    pending_.resize(level.pending_mark);
    open_.pop_back();
  }

  std::vector<InlineSkip>& skips_;
  std::vector<ChildRange>& child_ranges_;
  std::vector<Level> open_;
  std::vector<ChildRange> pending_;
};

}  // namespace

const FunctionIndex LookupIndex::kNone{};
const FunctionIndex LookupIndex::kSeenOnce{};

void LookupIndex::build(const Layout& layout) {
  build_address_buckets(layout);
  function_count_ = layout.header.num_addresses;
  // Value-initialized: every slot starts as nullptr (never looked up).
  functions_ = std::make_unique<std::atomic<const FunctionIndex*>[]>(function_count_);
}

void LookupIndex::build_address_buckets(const Layout& layout) {
  const uint64_t n = layout.header.num_addresses;
  if (n < 64 || n >= UINT32_MAX) return;
  for (uint64_t i = 1; i < n; ++i)
    if (layout.addr_offset(i) < layout.addr_offset(i - 1)) return;  // unsorted: plain search only
  const uint64_t max_rel = layout.addr_offset(n - 1);
  unsigned shift = 0;
  while (shift < 63 && (max_rel >> shift) + 1 > n) ++shift;  // about one entry per bucket
  const uint64_t buckets = (max_rel >> shift) + 1;
  bucket_first_.resize(buckets + 1);
  uint64_t i = 0;
  for (uint64_t b = 0; b <= buckets; ++b) {
    while (i < n && (layout.addr_offset(i) >> shift) < b) ++i;
    bucket_first_[b] = static_cast<uint32_t>(i);
  }
  bucket_shift_ = shift;
}

const FunctionIndex& LookupIndex::first_or_second_lookup(const Layout& layout, size_t i,
                                                        const FunctionIndex* seen) const {
  if (seen == nullptr) {
    const FunctionIndex* expected = nullptr;
    if (functions_[i].compare_exchange_strong(expected, &kSeenOnce, std::memory_order_acquire,
                                              std::memory_order_acquire))
      return kSeenOnce;
    if (expected != &kSeenOnce) return *expected;  // another thread indexed it meanwhile
  }
  std::lock_guard lock(build_mutex_);
  const FunctionIndex* current = functions_[i].load(std::memory_order_acquire);
  if (current != &kSeenOnce) return *current;
  FunctionIndex built = index_function(layout, i);
  const FunctionIndex* result = &kNone;
  if (!built.checkpoints.empty() || !built.skips.empty()) {
    built_.push_back(std::move(built));
    built_bytes_.fetch_add(built_.back().memory_bytes(), std::memory_order_relaxed);
    result = &built_.back();
  }
  functions_[i].store(result, std::memory_order_release);
  return *result;
}

namespace {

// One program's checkpoints; none when it is malformed or its rows are not
// in address order (the binary search over checkpoints needs that). Only
// well-formed programs get checkpoints; anything unusual keeps the plain
// path (and its exact errors).
std::vector<LineCheckpoint> line_checkpoints(DataCursor line_data, uint64_t func_start) {
  std::vector<LineCheckpoint> checkpoints;
  const uint8_t* p = line_data.position();
  const uint8_t* const program_start = p;
  LineHeader h;
  if (!read_line_header_fast(p, line_data.end(), h)) return {};
  const uint8_t* last = p;
  const bool ok = run_line_program(
      p, line_data.end(), h, func_start, 1, h.first_line,
      [&](uint64_t a, uint32_t f, uint32_t l, const uint8_t* at) {
        if (static_cast<size_t>(at - last) >= kCheckpointBytes) {
          checkpoints.push_back({a, line_data.offset() + static_cast<uint64_t>(at - program_start), f, l});
          last = at;
        }
        return true;
      });
  if (!ok) return {};
  for (size_t k = 1; k < checkpoints.size(); ++k)
    if (checkpoints[k - 1].addr > checkpoints[k].addr) return {};
  checkpoints.shrink_to_fit();
  return checkpoints;
}

// Sorts one tree's skips for the lookup's search and links each child-table
// entry to its child's skip. A node's header precedes its children, so node
// offsets ascend with children_start.
void link_child_tables(FunctionIndex& index) {
  std::sort(index.skips.begin(), index.skips.end(), [](const InlineSkip& a, const InlineSkip& b) {
    return a.children_start < b.children_start;
  });
  for (ChildRange& range : index.child_ranges) {
    auto it = std::lower_bound(index.skips.begin(), index.skips.end(), range.child,
                               [](const InlineSkip& k, uint64_t node) { return k.node < node; });
    if (it != index.skips.end() && it->node == range.child)
      range.child_skip = static_cast<uint32_t>(it - index.skips.begin());
  }
}

}  // namespace

FunctionIndex LookupIndex::index_function(const Layout& layout, size_t i) {
  FunctionIndex index;
  const uint64_t start = layout.function_start(i);
  std::optional<DataCursor> lines = single_record(layout, i, InfoType::LineTable);
  if (lines && lines->remaining() >= 2 * kCheckpointBytes) index.checkpoints = line_checkpoints(*lines, start);
  // Only well-formed trees within the depth limit are indexed, so the plain
  // path still reports every error.
  std::optional<DataCursor> tree = single_record(layout, i, InfoType::Inline);
  if (tree && tree->remaining() >= 2 * kSkipMinBytes) {
    TreeIndexer indexer(index.skips, index.child_ranges);
    if (!indexer.index(*tree, start) || index.skips.size() >= kNoSkip) {
      index.skips = {};
      index.child_ranges = {};
    } else {
      link_child_tables(index);
      index.skips.shrink_to_fit();
      index.child_ranges.shrink_to_fit();
      index.child_starts.reserve(index.child_ranges.size());
      for (const ChildRange& range : index.child_ranges) index.child_starts.push_back(range.start);
    }
  }
  return index;
}

}  // namespace gsym::detail
