// gsym/format/inline_info.cpp - InlineInfo: lookup walk, decode and encode (see inline_info.h).
#include "gsym/format/inline_info.h"

#include <algorithm>
#include <string>

namespace gsym {

void normalize_ranges(std::vector<AddressRange>& ranges) {
  // Runs for every inline node, whose ranges are nearly always normalized
  // already.
  std::erase_if(ranges, [](const AddressRange& r) { return r.end <= r.start; });
  if (!std::is_sorted(ranges.begin(), ranges.end())) std::sort(ranges.begin(), ranges.end());
  size_t kept = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (kept > 0 && ranges[i].start <= ranges[kept - 1].end)
      ranges[kept - 1].end = std::max(ranges[kept - 1].end, ranges[i].end);
    else
      ranges[kept++] = ranges[i];
  }
  ranges.resize(kept);
}

}  // namespace gsym

namespace gsym::detail {

namespace {

Error too_deep(uint64_t at) {
  return Error("InlineInfo nested deeper than " + std::to_string(kMaxInlineDepth), at);
}

// Steps over the rest of a subtree whose node header was just read (its
// children follow): counts open sibling lists, as LLVM ends a list at a raw
// range count of 0. `depth` = nodes already on the path, for the limit.
Status skip_subtree(DataCursor& c, size_t depth) {
  size_t open = 1;
  while (open > 0) {
    const uint64_t n = c.uleb();
    if (!c.ok()) return c.error("InlineInfo");
    if (n == 0) {
      --open;
      continue;
    }
    for (uint64_t r = 0; r < 2 * n && c.ok(); ++r) c.uleb();
    const bool kids = read_node_tail(c).has_children;
    if (!c.ok()) return c.error("InlineInfo");
    if (kids && ++open + depth > kMaxInlineDepth) return too_deep(c.offset());
  }
  return {};
}

}  // namespace

const InlineSkip* InlineSkips::find(uint64_t children_start) const {
  const InlineSkip* first = function_skips.data();
  const InlineSkip* last = first + function_skips.size();
  // The root's children come first: its skip, if any, is the first one.
  if (first != last && first->children_start == children_start) return first;
  const InlineSkip* it =
      std::lower_bound(first, last, children_start,
                       [](const InlineSkip& k, uint64_t off) { return k.children_start < off; });
  return it != last && it->children_start == children_start ? it : nullptr;
}

// Skips non-containing subtrees without building anything. Mirrors LLVM: the
// first containing sibling wins, a node whose ranges are all empty ends its
// sibling list.
Status walk_inline_tree(DataCursor c, uint64_t func_start, uint64_t addr, const InlineSkips& skips,
                        std::vector<LookupScratch::InlineStep>& chain) {
  uint64_t base = func_start;
  bool at_root = true;
  // Set when a child table led here: this node's skip, known without a search.
  const InlineSkip* linked_skip = nullptr;
  bool linked = false;
  while (true) {
    const bool came_linked = linked;
    linked = false;
    const uint64_t num_ranges = c.uleb();
    if (!c.ok()) return c.error("InlineInfo");
    if (num_ranges == 0) return {};
    bool contains = false, any = false;
    uint64_t first_start = UINT64_MAX;
    for (uint64_t r = 0; r < num_ranges; ++r) {
      const uint64_t start = base + c.uleb();
      const uint64_t size = c.uleb();
      if (!c.ok()) return c.error("InlineInfo ranges");
      if (size == 0) continue;
      any = true;
      first_start = std::min(first_start, start);
      if (addr >= start && addr - start < size && start + size > start) contains = true;
    }
    if (!any) return {};
    const InlineNodeTail tail = read_node_tail(c);
    if (!c.ok()) return c.error("InlineInfo");
    if (!contains) {
      if (at_root) return {};
      if (tail.has_children) {
        if (const InlineSkip* k = skips.find(c.offset()))
          c.skip(k->end - c.offset());
        else if (Status st = skip_subtree(c, chain.size()); !st)
          return st;
      }
      continue;  // next sibling
    }
    if (chain.size() >= kMaxInlineDepth) return too_deep(c.offset());
    chain.push_back({tail.name, first_start, static_cast<uint32_t>(tail.call_file),
                     static_cast<uint32_t>(tail.call_line)});
    if (!tail.has_children) return {};
    base = first_start;
    at_root = false;
    const InlineSkip* k = came_linked ? linked_skip : skips.find(c.offset());
    if (k && k->table_count) {
      // Jump straight to the one child holding addr, or stop: none does.
      const uint64_t* first = skips.child_starts + k->table_begin;
      const uint64_t* it = std::upper_bound(first, first + k->table_count, addr);
      if (it == first) return {};
      const ChildRange& hit = skips.child_ranges[static_cast<size_t>(it - 1 - skips.child_starts)];
      if (addr >= hit.end) return {};
      c.skip(hit.child - c.offset());
      linked = true;
      linked_skip = hit.child_skip == kNoSkip ? nullptr : skips.all_skips + hit.child_skip;
    }
  }
}

Expected<std::optional<InlineNode>> decode_inline_tree(DataCursor& c, uint64_t base, size_t depth,
                                                       const std::vector<AddressRange>* parent,
                                                       const DecodeContext& ctx) {
  if (depth >= kMaxInlineDepth) return too_deep(c.offset());
  const uint64_t at = c.offset();
  const uint64_t num_ranges = c.uleb();
  if (!c.ok()) return c.error("InlineInfo");
  // Each range takes at least two bytes: refuse counts the data cannot hold
  // before allocating anything.
  if (num_ranges > c.remaining() / 2)
    return Error("InlineInfo range count " + std::to_string(num_ranges) + " exceeds the data", at);
  std::vector<AddressRange> ranges;
  ranges.reserve(num_ranges);
  for (uint64_t r = 0; r < num_ranges; ++r) {
    const uint64_t start = base + c.uleb();
    const uint64_t size = c.uleb();
    if (!c.ok()) return c.error("InlineInfo ranges");
    if (ctx.strict && size != 0 && start + size < start)
      return Error("InlineInfo range wraps around", at);
    ranges.push_back({start, start + size});
  }
  normalize_ranges(ranges);
  if (ranges.empty()) return std::optional<InlineNode>();  // ends a sibling list
  if (ctx.strict && parent) {
    for (const AddressRange& r : ranges) {
      const bool inside = std::any_of(parent->begin(), parent->end(),
                                      [&](const AddressRange& p) { return p.contains(r); });
      if (!inside)
        return Error("InlineInfo range [" + hex_number(r.start) + ", " + hex_number(r.end) +
                         ") is not inside its parent's ranges",
                     at);
    }
  }
  InlineNode node;
  node.ranges = std::move(ranges);
  const uint64_t tail_at = c.offset();
  const InlineNodeTail tail = read_node_tail(c);
  if (!c.ok()) return c.error("InlineInfo");
  if (Status st = ctx.check_string(tail.name, tail_at + 1); !st) return st.error();
  if (Status st = ctx.check_file(tail.call_file, tail_at + 1 + c.string_offset_size()); !st)
    return st.error();
  node.name = std::string(ctx.string(tail.name));
  node.call_file = static_cast<uint32_t>(tail.call_file);
  node.call_line = static_cast<uint32_t>(tail.call_line);
  if (ctx.report) ++ctx.report->inline_nodes;
  if (tail.has_children) {
    const uint64_t child_base = node.ranges.front().start;
    while (true) {
      auto child = decode_inline_tree(c, child_base, depth + 1, &node.ranges, ctx);
      if (!child) return child.error();
      if (!*child) break;
      node.children.push_back(std::move(**child));
    }
  }
  return std::optional<InlineNode>(std::move(node));
}

}  // namespace gsym::detail

namespace gsym {

Status encode_inline_tree(ByteWriter& out, const InlineNode& node, uint64_t base,
                          const StringOffsets& strings) {
  if (node.ranges.empty()) return Error("inline node \"" + node.name + "\" has no ranges");
  out.uleb(node.ranges.size());
  for (const AddressRange& r : node.ranges) {
    if (r.start < base)
      return Error("inline range of \"" + node.name + "\" starts below its base " +
                   hex_number(base));
    out.uleb(r.start - base);
    out.uleb(r.size());
  }
  const bool has_children = !node.children.empty();
  out.u8(has_children ? 1 : 0);
  out.string_offset(strings.offset_of(node.name));
  out.uleb(node.call_file);
  out.uleb(node.call_line);
  if (has_children) {
    const uint64_t child_base = node.ranges.front().start;
    for (const InlineNode& child : node.children) {
      for (const AddressRange& r : child.ranges) {
        bool contained = false;
        for (const AddressRange& p : node.ranges) contained = contained || p.contains(r);
        if (!contained)
          return Error("inline range of \"" + child.name + "\" is not contained in its parent \"" +
                       node.name + "\"");
      }
      Status s = encode_inline_tree(out, child, child_base, strings);
      if (!s) return s;
    }
    out.uleb(0);  // ends the sibling list
  }
  return Status::success();
}

namespace {

// Encodes nodes[i] and its subtree; returns the index after the subtree.
// Recursion depth is bounded by the builder's inline depth limit.
size_t encode_flat_node(ByteWriter& out, std::span<const FlatInlineNode> nodes,
                        std::span<const AddressRange> ranges, size_t i, uint64_t base) {
  const FlatInlineNode& node = nodes[i++];
  const std::span<const AddressRange> own = ranges.subspan(node.ranges_begin, node.ranges_count);
  out.uleb(own.size());
  for (const AddressRange& r : own) {
    out.uleb(r.start - base);
    out.uleb(r.size());
  }
  out.u8(node.child_count ? 1 : 0);
  out.string_offset(node.name);
  out.uleb(node.call_file);
  out.uleb(node.call_line);
  if (node.child_count) {
    for (uint32_t c = 0; c < node.child_count; ++c)
      i = encode_flat_node(out, nodes, ranges, i, own.front().start);
    out.uleb(0);  // ends the sibling list
  }
  return i;
}

}  // namespace

void encode_flat_inline_tree(ByteWriter& out, std::span<const FlatInlineNode> nodes,
                             std::span<const AddressRange> ranges, uint64_t base) {
  if (!nodes.empty()) encode_flat_node(out, nodes, ranges, 0, base);
}

}  // namespace gsym
