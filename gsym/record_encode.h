// gsym/record_encode.h - encoders for one FunctionInfo record and its parts,
// byte for byte as LLVM 22's writer (gsym-format.md §3-§6). Inputs are
// expected to be validated already (Builder::add_function); the encoders still
// refuse what would produce a corrupt record instead of writing it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "gsym/byte_writer.h"
#include "gsym/expected.h"
#include "gsym/model.h"

namespace gsym {

// Resolves an already-interned string to its string-table offset.
class StringOffsets {
 public:
  virtual uint32_t offset_of(std::string_view s) const = 0;

 protected:
  ~StringOffsets() = default;
};

// InfoType values of FunctionInfo records.
enum class InfoType : uint32_t {
  EndOfList = 0,
  LineTable = 1,
  Inline = 2,
  MergedFunctions = 3,
  CallSites = 4,
};

// Line-table payload (§4.2): delta window, then opcodes. `lines` non-empty,
// ascending, none below `func_start`.
Status encode_line_table(ByteWriter& out, std::span<const LineEntry> lines,
                         uint64_t func_start);

// One inline node and its subtree (§5.1); ranges relative to `base`.
// Children are relative to this node's first range start.
Status encode_inline_tree(ByteWriter& out, const InlineNode& node, uint64_t base,
                          const StringOffsets& strings);

// The same for a flat pre-order tree (see FlatInlineNode): nodes[0] and its
// subtree; names are string offsets already. Validated input expected.
void encode_flat_inline_tree(ByteWriter& out, std::span<const FlatInlineNode> nodes,
                             std::span<const AddressRange> ranges, uint64_t base);

// CallSiteInfo payload (§6.2).
void encode_call_sites(ByteWriter& out, std::span<const CallSite> call_sites,
                       const StringOffsets& strings);

// A complete FunctionInfo record (§3). Top-level records are aligned to 4
// first (`pad`); records nested in MergedFunctionsInfo are not.
Status encode_function_info(ByteWriter& out, const Function& function,
                            const StringOffsets& strings, bool pad);

// A complete top-level FunctionInfo record of a flat function (name, line
// table, inline tree; ranges_begin of the nodes index `ranges`).
Status encode_flat_function_info(ByteWriter& out, AddressRange range, uint32_t name,
                                 std::span<const LineEntry> lines,
                                 std::span<const FlatInlineNode> nodes,
                                 std::span<const AddressRange> ranges);

}  // namespace gsym
