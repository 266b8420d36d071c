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

void LookupIndex::build(const Layout& layout) {
  build_line_checkpoints(layout);
  build_inline_skips(layout);
  build_address_buckets(layout);
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

namespace {

// Calls index_one(i, payload) for every function whose only record of `type`
// has at least `min_bytes`; index_one appends to `entries` and returns false
// to abandon the whole index. Returns where each function's entries begin
// (size n + 1), or nothing when abandoned.
template <class Entries, class IndexOne>
std::vector<uint32_t> index_functions(const Layout& layout, InfoType type, size_t min_bytes,
                                      const Entries& entries, IndexOne&& index_one) {
  const uint64_t n = layout.header.num_addresses;
  std::vector<uint32_t> begin(n + 1, 0);
  for (uint64_t i = 0; i < n; ++i) {
    begin[i] = static_cast<uint32_t>(entries.size());
    std::optional<DataCursor> found = single_record(layout, i, type);
    if (found && found->remaining() >= min_bytes && !index_one(i, *found)) return {};
  }
  begin[n] = static_cast<uint32_t>(entries.size());
  return begin;
}

}  // namespace

// Only well-formed programs with a single line table record get checkpoints;
// anything unusual keeps the plain path (and its exact errors).
void LookupIndex::build_line_checkpoints(const Layout& layout) {
  std::vector<uint32_t> begin = index_functions(
      layout, InfoType::LineTable, 2 * kCheckpointBytes, checkpoints_,
      [&](uint64_t i, DataCursor line_data) {
        add_line_checkpoints(line_data, layout.function_start(i));
        if (checkpoints_.size() <= UINT32_MAX) return true;
        checkpoints_.clear();
        return false;
      });
  if (!begin.empty() && !checkpoints_.empty()) {
    checkpoints_.shrink_to_fit();
    checkpoint_begin_ = std::move(begin);
  }
}

// One program's checkpoints; none when it is malformed or its rows are not
// in address order (the binary search over checkpoints needs that).
void LookupIndex::add_line_checkpoints(DataCursor line_data, uint64_t func_start) {
  const size_t mark = checkpoints_.size();
  const uint8_t* p = line_data.position();
  const uint8_t* const program_start = p;
  LineHeader h;
  if (!read_line_header_fast(p, line_data.end(), h)) return;
  const uint8_t* last = p;
  const bool ok = run_line_program(
      p, line_data.end(), h, func_start, 1, h.first_line,
      [&](uint64_t a, uint32_t f, uint32_t l, const uint8_t* at) {
        if (static_cast<size_t>(at - last) >= kCheckpointBytes) {
          checkpoints_.push_back(
              {a, line_data.offset() + static_cast<uint64_t>(at - program_start), f, l});
          last = at;
        }
        return true;
      });
  bool sorted = ok;
  for (size_t k = mark + 1; sorted && k < checkpoints_.size(); ++k)
    sorted = checkpoints_[k - 1].addr <= checkpoints_[k].addr;
  if (!sorted || checkpoints_.size() - mark > UINT32_MAX) checkpoints_.resize(mark);
}

// Only well-formed trees within the depth limit are indexed, so the plain
// path still reports every error.
void LookupIndex::build_inline_skips(const Layout& layout) {
  std::vector<uint32_t> begin = index_functions(
      layout, InfoType::Inline, 2 * kSkipMinBytes, skips_, [&](uint64_t i, DataCursor tree) {
        const size_t mark = skips_.size();
        const size_t table_mark = child_ranges_.size();
        TreeIndexer indexer(skips_, child_ranges_);
        if (!indexer.index(tree, layout.function_start(i)) || skips_.size() > UINT32_MAX) {
          skips_.resize(mark);
          child_ranges_.resize(table_mark);
        } else {
          link_child_tables(mark, table_mark);
        }
        return true;
      });
  if (!skips_.empty()) {
    skips_.shrink_to_fit();
    child_ranges_.shrink_to_fit();
    child_starts_.resize(child_ranges_.size());
    for (size_t i = 0; i < child_ranges_.size(); ++i) child_starts_[i] = child_ranges_[i].start;
    skip_begin_ = std::move(begin);
  }
}

// Sorts one tree's skips (from `skips_mark`) for the lookup's search and links
// each of its child-table entries (from `table_mark`) to its child's skip. A
// node's header precedes its children, so node offsets ascend with
// children_start.
void LookupIndex::link_child_tables(size_t skips_mark, size_t table_mark) {
  const auto first = skips_.begin() + static_cast<ptrdiff_t>(skips_mark);
  std::sort(first, skips_.end(), [](const InlineSkip& a, const InlineSkip& b) {
    return a.children_start < b.children_start;
  });
  for (size_t t = table_mark; t < child_ranges_.size(); ++t) {
    auto it = std::lower_bound(first, skips_.end(), child_ranges_[t].child,
                               [](const InlineSkip& k, uint64_t node) { return k.node < node; });
    if (it != skips_.end() && it->node == child_ranges_[t].child)
      child_ranges_[t].child_skip = static_cast<uint32_t>(it - skips_.begin());
  }
}

}  // namespace gsym::detail
