// gsym/encode_records.cpp - FunctionInfo record encoders (see record_encode.h).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gsym/record_encode.h"

namespace gsym {
namespace {

constexpr uint8_t kOpEndSequence = 0x00;
constexpr uint8_t kOpSetFile = 0x01;
constexpr uint8_t kOpAdvancePC = 0x02;
constexpr uint8_t kOpAdvanceLine = 0x03;
constexpr int64_t kFirstSpecialOp = 0x04;
// Widest line-delta window a special opcode covers (LLVM's MaxLineRange).
constexpr int64_t kMaxLineRange = 14;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

struct DeltaCount {
  int64_t delta;
  uint32_t count;
};

// Chooses [min, max] of the line deltas special opcodes will cover: all of
// them when they span <= 14, else the first window of width 14 holding the
// most deltas; a single positive small delta gets min 0 (LLVM's rules).
std::pair<int64_t, int64_t> line_delta_window(std::span<const LineEntry> lines) {
  if (lines.size() == 1) return {0, 0};
  std::vector<DeltaCount> histogram;  // sorted by delta
  int64_t min_delta = std::numeric_limits<int64_t>::max();
  int64_t max_delta = std::numeric_limits<int64_t>::min();
  for (size_t i = 1; i < lines.size(); ++i) {
    int64_t delta = int64_t(lines[i].line) - int64_t(lines[i - 1].line);
    auto pos = std::lower_bound(histogram.begin(), histogram.end(), delta,
                                [](const DeltaCount& d, int64_t v) { return d.delta < v; });
    if (pos != histogram.end() && pos->delta == delta)
      ++pos->count;
    else
      histogram.insert(pos, DeltaCount{delta, 1});
    min_delta = std::min(min_delta, delta);
    max_delta = std::max(max_delta, delta);
  }
  if (max_delta - min_delta > kMaxLineRange) {
    size_t best_first = 0, best_last = 0;
    uint64_t best_count = 0;
    for (size_t first = 0; first < histogram.size(); ++first) {
      uint64_t count = 0;
      size_t end = first;
      while (end < histogram.size() &&
             histogram[end].delta - histogram[first].delta <= kMaxLineRange)
        count += histogram[end++].count;
      if (count > best_count) {
        best_first = first;
        best_last = end - 1;
        best_count = count;
      }
    }
    min_delta = histogram[best_first].delta;
    max_delta = histogram[best_last].delta;
  }
  if (min_delta == max_delta && min_delta > 0 && min_delta < kMaxLineRange) min_delta = 0;
  return {min_delta, max_delta};
}

}  // namespace

Status encode_line_table(ByteWriter& out, std::span<const LineEntry> lines,
                         uint64_t func_start) {
  if (lines.empty()) return Error("cannot encode an empty line table");
  auto [min_delta, max_delta] = line_delta_window(lines);
  out.sleb(min_delta);
  out.sleb(max_delta);
  out.uleb(lines.front().line);

  LineEntry prev{func_start, 1, lines.front().line};
  const int64_t line_range = max_delta - min_delta + 1;
  for (const LineEntry& row : lines) {
    if (row.address < func_start)
      return Error("line row address " + hex(row.address) +
                   " is below the function start " + hex(func_start));
    if (row.address < prev.address)
      return Error("line rows are not in ascending address order at " + hex(row.address));
    const uint64_t addr_delta = row.address - prev.address;
    // Same arithmetic as LLVM: a decrease is taken modulo 2^32 as int32, so
    // the decoder's u32 line wraps back to the right value.
    int64_t line_delta = 0;
    if (row.line > prev.line)
      line_delta = int64_t(row.line - prev.line);
    else if (prev.line > row.line)
      line_delta = -int64_t(static_cast<int32_t>(prev.line - row.line));
    if (row.file != prev.file) {
      out.u8(kOpSetFile);
      out.uleb(row.file);
    }
    bool special = line_delta >= min_delta && line_delta <= max_delta && addr_delta <= 255;
    int64_t op = 0;
    if (special) {
      op = (line_delta - min_delta) + int64_t(addr_delta) * line_range + kFirstSpecialOp;
      special = op >= 0 && op <= 255;
    }
    if (special) {
      out.u8(static_cast<uint8_t>(op));
    } else {
      if (line_delta != 0) {
        out.u8(kOpAdvanceLine);
        out.sleb(line_delta);
      }
      out.u8(kOpAdvancePC);
      out.uleb(addr_delta);
    }
    prev = row;
  }
  out.u8(kOpEndSequence);
  return Status::success();
}

Status encode_inline_tree(ByteWriter& out, const InlineNode& node, uint64_t base,
                          const StringOffsets& strings) {
  if (node.ranges.empty()) return Error("inline node \"" + node.name + "\" has no ranges");
  out.uleb(node.ranges.size());
  for (const AddressRange& r : node.ranges) {
    if (r.start < base)
      return Error("inline range of \"" + node.name + "\" starts below its base " + hex(base));
    out.uleb(r.start - base);
    out.uleb(r.size());
  }
  const bool has_children = !node.children.empty();
  out.u8(has_children ? 1 : 0);
  out.u32(strings.offset_of(node.name));
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
  out.u32(node.name);
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

void encode_call_sites(ByteWriter& out, std::span<const CallSite> call_sites,
                       const StringOffsets& strings) {
  out.u32(static_cast<uint32_t>(call_sites.size()));
  for (const CallSite& cs : call_sites) {
    out.u64(cs.return_offset);
    out.u8(cs.flags);
    out.u32(static_cast<uint32_t>(cs.match_regex.size()));
    for (const std::string& regex : cs.match_regex) out.u32(strings.offset_of(regex));
  }
}

namespace {

// Writes the InfoType header with a length placeholder; returns where the
// payload starts so the length can be patched.
uint64_t begin_info(ByteWriter& out, InfoType type) {
  out.u32(static_cast<uint32_t>(type));
  out.u32(0);
  return out.tell();
}

void end_info(ByteWriter& out, uint64_t payload_start) {
  out.fixup_u32(payload_start - 4, static_cast<uint32_t>(out.tell() - payload_start));
}

// A record's size, name and line table: what both function forms share.
// `name_text` (may be null) names the function in errors.
Status encode_record_start(ByteWriter& out, AddressRange range, uint32_t name,
                           std::span<const LineEntry> lines, bool pad, const std::string* name_text) {
  const uint64_t size = range.size();
  if (range.end < range.start || size > UINT32_MAX)
    return Error((name_text ? "function \"" + *name_text + "\"" : "function at " + hex(range.start)) +
                 " has an unencodable range");
  if (name == 0) return Error("function at " + hex(range.start) + " has an empty name");
  if (pad) out.align_to(4);
  out.u32(static_cast<uint32_t>(size));
  out.u32(name);
  if (!lines.empty()) {
    uint64_t at = begin_info(out, InfoType::LineTable);
    Status s = encode_line_table(out, lines, range.start);
    if (!s) return s;
    end_info(out, at);
  }
  return Status::success();
}

}  // namespace

Status encode_function_info(ByteWriter& out, const Function& function,
                            const StringOffsets& strings, bool pad) {
  if (Status s = encode_record_start(out, function.range, strings.offset_of(function.name),
                                     function.lines, pad, &function.name);
      !s)
    return s;
  if (function.inline_tree) {
    uint64_t at = begin_info(out, InfoType::Inline);
    Status s = encode_inline_tree(out, *function.inline_tree, function.range.start, strings);
    if (!s) return s;
    end_info(out, at);
  }
  if (!function.merged.empty()) {
    uint64_t at = begin_info(out, InfoType::MergedFunctions);
    out.u32(static_cast<uint32_t>(function.merged.size()));
    for (const Function& merged : function.merged) {
      out.u32(0);
      const uint64_t record_start = out.tell();
      Status s = encode_function_info(out, merged, strings, /*pad=*/false);
      if (!s) return s;
      out.fixup_u32(record_start - 4, static_cast<uint32_t>(out.tell() - record_start));
    }
    end_info(out, at);
  }
  if (!function.call_sites.empty()) {
    uint64_t at = begin_info(out, InfoType::CallSites);
    encode_call_sites(out, function.call_sites, strings);
    end_info(out, at);
  }
  out.u32(static_cast<uint32_t>(InfoType::EndOfList));
  out.u32(0);
  return Status::success();
}

Status encode_flat_function_info(ByteWriter& out, AddressRange range, uint32_t name,
                                 std::span<const LineEntry> lines,
                                 std::span<const FlatInlineNode> nodes,
                                 std::span<const AddressRange> ranges) {
  if (Status s = encode_record_start(out, range, name, lines, /*pad=*/true, nullptr); !s) return s;
  if (!nodes.empty()) {
    uint64_t at = begin_info(out, InfoType::Inline);
    encode_flat_inline_tree(out, nodes, ranges, range.start);
    end_info(out, at);
  }
  out.u32(static_cast<uint32_t>(InfoType::EndOfList));
  out.u32(0);
  return Status::success();
}

}  // namespace gsym
