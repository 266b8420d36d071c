// gsym/format/record_encode.h - encoders for one FunctionInfo record and its parts,
// byte for byte as LLVM 22's writer (gsym/FORMAT.md §3-§6): the record
// itself, merged functions and call sites here; the line table and the
// inline tree in line_table.h and inline_info.h. Inputs are
// expected to be validated already (Builder::add_function); the encoders still
// refuse what would produce a corrupt record instead of writing it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "gsym/format/byte_writer.h"
#include "gsym/base/expected.h"
#include "gsym/format/format.h"
#include "gsym/format/inline_info.h"
#include "gsym/format/line_table.h"
#include "gsym/format/model.h"

namespace gsym {

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
