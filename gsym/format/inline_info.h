// gsym/format/inline_info.h - the InlineInfo record (gsym/FORMAT.md §5): node
// parsing, the lookup walk to the deepest node holding an address (with the
// acceleration index's skip tables), the full decode and the encoders.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gsym/format/byte_writer.h"
#include "gsym/format/data_cursor.h"
#include "gsym/format/decode_context.h"
#include "gsym/base/expected.h"
#include "gsym/format/model.h"
#include "gsym/format/lookup.h"  // LookupScratch

namespace gsym {

// LLVM's AddressRanges: sorted, empty ranges dropped, intersecting and
// touching ranges merged.
void normalize_ranges(std::vector<AddressRange>& ranges);

}  // namespace gsym

namespace gsym::detail {

// What follows a node's ranges: HasChildren, Name, CallFile, CallLine.
struct InlineNodeTail {
  bool has_children = false;
  uint64_t name = 0;  // string offset
  uint64_t call_file = 0;
  uint64_t call_line = 0;
};

inline InlineNodeTail read_node_tail(DataCursor& c) {
  InlineNodeTail t;
  t.has_children = c.u8() != 0;
  t.name = c.string_offset();
  t.call_file = c.uleb();
  t.call_line = c.uleb();
  return t;
}

// Where an inline subtree's children start and where the subtree ends, so a
// lookup steps over a non-containing subtree without decoding it; built at
// open by the acceleration index (lookup_index.h) for subtrees of at least
// kSkipMinBytes.
struct InlineSkip {
  uint64_t children_start;  // absolute offset of the first child
  uint64_t end;             // absolute offset after the children's terminator
  uint64_t node = 0;        // absolute offset of the node these children belong to
  // Children's ranges sorted by start, when they are pairwise disjoint
  // (then at most one child holds an address): [table_begin, +table_count).
  uint32_t table_begin = 0;
  uint32_t table_count = 0;
};

inline constexpr uint32_t kNoSkip = UINT32_MAX;

struct ChildRange {
  uint64_t start;
  uint64_t end;
  uint64_t child;  // absolute offset of the child node
  // The child's own InlineSkip (index into all skips), so a descent needs no
  // search per level; kNoSkip = the child has none.
  uint32_t child_skip = kNoSkip;
};

// One function's skips (sorted by children_start) and the tables they use.
struct InlineSkips {
  std::span<const InlineSkip> function_skips;
  const InlineSkip* all_skips = nullptr;  // what ChildRange::child_skip indexes
  const ChildRange* child_ranges = nullptr;
  const uint64_t* child_starts = nullptr;  // child_ranges[i].start, packed

  const InlineSkip* find(uint64_t children_start) const;
};

// Walks the tree `c` to the deepest node containing `addr`, appending each
// containing node (root first) to `chain`.
Status walk_inline_tree(DataCursor c, uint64_t func_start, uint64_t addr, const InlineSkips& skips,
                        std::vector<LookupScratch::InlineStep>& chain);

// One node and its subtree, ranges relative to `base`; nullopt for a node
// whose ranges are all empty (it ends a sibling list). With ctx.strict, every
// range inside `parent`'s (when given) and every reference checked.
Expected<std::optional<InlineNode>> decode_inline_tree(DataCursor& c, uint64_t base, size_t depth,
                                                       const std::vector<AddressRange>* parent,
                                                       const DecodeContext& ctx);

}  // namespace gsym::detail

namespace gsym {

// One inline node and its subtree; ranges relative to `base`. Children are
// relative to this node's first range start.
Status encode_inline_tree(ByteWriter& out, const InlineNode& node, uint64_t base,
                          const StringOffsets& strings);

// The same for a flat pre-order tree (see FlatInlineNode): nodes[0] and its
// subtree; names are string offsets already. Validated input expected.
void encode_flat_inline_tree(ByteWriter& out, std::span<const FlatInlineNode> nodes,
                             std::span<const AddressRange> ranges, uint64_t base);

}  // namespace gsym
