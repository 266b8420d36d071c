// gsym/format/encode_records.cpp - FunctionInfo record encoders (see record_encode.h).
#include <string>

#include "gsym/format/record_encode.h"

namespace gsym {

void encode_call_sites(ByteWriter& out, std::span<const CallSite> call_sites,
                       const StringOffsets& strings) {
  out.u32(static_cast<uint32_t>(call_sites.size()));
  for (const CallSite& cs : call_sites) {
    out.u64(cs.return_offset);
    out.u8(cs.flags);
    out.u32(static_cast<uint32_t>(cs.match_regex.size()));
    for (const std::string& regex : cs.match_regex) out.string_offset(strings.offset_of(regex));
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
    return Error((name_text ? "function \"" + *name_text + "\"" : "function at " + hex_number(range.start)) +
                 " has an unencodable range");
  if (name == 0) return Error("function at " + hex_number(range.start) + " has an empty name");
  if (pad) out.align_to(4);
  out.u32(static_cast<uint32_t>(size));
  out.string_offset(name);
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
