// gsym/format/line_table.h - the LineTableInfo record (gsym/FORMAT.md §4): the
// line-program interpreter (a raw-pointer fast path and a checked one for
// the exact errors), the lookup of one address, the full decode and the
// encoder.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gsym/format/byte_writer.h"
#include "gsym/format/data_cursor.h"
#include "gsym/format/decode_context.h"
#include "gsym/base/expected.h"
#include "gsym/format/format.h"
#include "gsym/format/leb128.h"
#include "gsym/format/model.h"

namespace gsym::detail {

// MinDelta, the special-opcode line range and FirstLine.
struct LineHeader {
  int64_t min_delta = 0;
  uint64_t range = 1;  // special-opcode line range, clamped to 256 (ops are < 252)
  uint32_t first_line = 0;
};

// The line range MaxDelta - MinDelta + 1, clamped (MaxDelta >= MinDelta).
inline uint64_t special_op_range(int64_t min_delta, int64_t max_delta) {
  const uint64_t span = static_cast<uint64_t>(max_delta) - static_cast<uint64_t>(min_delta);
  return span >= 255 ? 256 : span + 1;
}

// Fast path: false on anything malformed (the checked decoder then reports it).
inline bool read_line_header_fast(const uint8_t*& p, const uint8_t* end, LineHeader& h) {
  int64_t max_delta;
  uint64_t first;
  if (!leb128::read_sleb_fast(p, end, h.min_delta) || !leb128::read_sleb_fast(p, end, max_delta) ||
      !leb128::read_uleb_fast(p, end, first) || max_delta < h.min_delta)
    return false;
  h.range = special_op_range(h.min_delta, max_delta);
  h.first_line = static_cast<uint32_t>(first);
  return true;
}

// Runs the line program from `p` with the given state. For every emitted row
// calls on_row(addr, file, line, position after the opcode); stops when it
// returns false (true result) or at EndSequence (true). Returns false when
// the program is malformed: the checked decoder then produces the exact error.
template <class OnRow>
inline bool run_line_program(const uint8_t* p, const uint8_t* end, const LineHeader& h,
                             uint64_t row_addr, uint32_t file, uint32_t line, OnRow&& on_row) {
  while (p < end) {
    const uint8_t op = *p++;
    if (op >= kFirstSpecialOp) {
      const uint64_t adj = op - kFirstSpecialOp;
      line += static_cast<uint32_t>(h.min_delta + static_cast<int64_t>(adj % h.range));
      row_addr += adj / h.range;
    } else if (op == kOpEndSequence) {
      return true;
    } else if (op == kOpSetFile) {
      uint64_t v;
      if (!leb128::read_uleb_fast(p, end, v)) return false;
      file = static_cast<uint32_t>(v);
      continue;
    } else if (op == kOpAdvancePC) {
      uint64_t v;
      if (!leb128::read_uleb_fast(p, end, v)) return false;
      row_addr += v;
    } else {
      int64_t v;
      if (!leb128::read_sleb_fast(p, end, v)) return false;
      line += static_cast<uint32_t>(v);
      continue;
    }
    if (!on_row(row_addr, file, line, p)) return true;
  }
  return false;  // no EndSequence
}

// Decoder state saved by the acceleration index (lookup_index.h) every so
// many bytes of a long program, so a lookup resumes near its address.
struct LineCheckpoint {
  uint64_t addr;    // address of the row just emitted
  uint64_t offset;  // absolute offset of the next opcode
  uint32_t file;
  uint32_t line;
};

// The row covering `addr` in the program `c` (LLVM >= 18: the last row at or
// before it wins), resuming at the last of `checkpoints` (ascending
// addresses; offsets into `data`) at or before it. No row, or file 0: the
// error "address 0x… is not in the line table".
Status lookup_line(DataCursor c, uint64_t func_start, uint64_t addr,
                   std::span<const LineCheckpoint> checkpoints, const uint8_t* data,
                   uint32_t& file, uint32_t& line);

// Every row, in program order; with ctx.strict, file indices and address
// order checked.
Status decode_line_table(DataCursor c, uint64_t func_start, std::vector<LineEntry>& rows,
                         const DecodeContext& ctx);

}  // namespace gsym::detail

namespace gsym {

// Line-table payload: delta window, then opcodes. `lines` non-empty,
// ascending, none below `func_start`.
Status encode_line_table(ByteWriter& out, std::span<const LineEntry> lines, uint64_t func_start);

}  // namespace gsym
