// gsym/format/line_table.cpp - LineTableInfo: lookup, decode and encode (see line_table.h).
#include "gsym/format/line_table.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace gsym::detail {

namespace {

// The checked interpreter: the slow path of a lookup and the full decode.
struct LineProgram {
  LineHeader header;
  uint64_t addr = 0;  // the state: the last row's address, file and line
  uint32_t file = 1;
  uint32_t line = 0;

  // Reads MinDelta, MaxDelta and FirstLine.
  Status start(DataCursor& c, uint64_t func_start) {
    header.min_delta = c.sleb();
    const int64_t max_delta = c.sleb();
    header.first_line = static_cast<uint32_t>(c.uleb());
    if (!c.ok()) return c.error("line table header");
    if (max_delta < header.min_delta)
      return Error("line table MaxDelta " + std::to_string(max_delta) + " < MinDelta " +
                       std::to_string(header.min_delta),
                   c.offset());
    header.range = special_op_range(header.min_delta, max_delta);
    addr = func_start;
    file = 1;
    line = header.first_line;
    return {};
  }

  enum class Step : uint8_t { Row, NoRow, End, Bad };

  // Executes one opcode; Row means a row (addr, file, line) was emitted.
  Step step(DataCursor& c) {
    const uint8_t op = c.u8();
    if (!c.ok()) return Step::Bad;
    switch (op) {
      case kOpEndSequence:
        return Step::End;
      case kOpSetFile:
        file = static_cast<uint32_t>(c.uleb());
        return c.ok() ? Step::NoRow : Step::Bad;
      case kOpAdvancePC:
        addr += c.uleb();
        return c.ok() ? Step::Row : Step::Bad;
      case kOpAdvanceLine:
        line += static_cast<uint32_t>(c.sleb());
        return c.ok() ? Step::NoRow : Step::Bad;
      default: {
        const uint64_t adj = op - kFirstSpecialOp;
        line += static_cast<uint32_t>(header.min_delta + static_cast<int64_t>(adj % header.range));
        addr += adj / header.range;
        return Step::Row;
      }
    }
  }
};

Error line_program_error(const DataCursor& c) {
  if (c.failure() == DataCursor::Failure::LebTooLong) return c.error("line table");
  return Error("line table: EOF found before EndSequence", c.failure_offset());
}

Error not_in_line_table(uint64_t addr) {
  return Error("address " + hex_number(addr) + " is not in the line table");
}

// The checked path of lookup_line: the exact error of a malformed program.
Status lookup_line_checked(DataCursor c, uint64_t func_start, uint64_t addr, uint32_t& file,
                           uint32_t& line) {
  LineProgram lp;
  if (Status st = lp.start(c, func_start); !st) return st;
  bool found = false;
  while (true) {
    const LineProgram::Step step = lp.step(c);
    if (step == LineProgram::Step::Row) {
      if (addr < lp.addr) break;
      file = lp.file;
      line = lp.line;
      found = true;
    } else if (step == LineProgram::Step::End) {
      break;
    } else if (step == LineProgram::Step::Bad) {
      return line_program_error(c);
    }
  }
  if (!found || file == 0) return not_in_line_table(addr);
  return {};
}

}  // namespace

Status lookup_line(DataCursor c, uint64_t func_start, uint64_t addr,
                   std::span<const LineCheckpoint> checkpoints, const uint8_t* data,
                   uint32_t& file, uint32_t& line) {
  // Fast path: resume from the last checkpoint at or before addr (if this
  // function has any), else run from the start.
  const uint8_t* p = c.position();
  LineHeader h;
  if (read_line_header_fast(p, c.end(), h)) {
    bool found = false;
    uint64_t row_addr = func_start;
    uint32_t row_file = 1, row_line = h.first_line;
    const auto it = std::upper_bound(
        checkpoints.begin(), checkpoints.end(), addr,
        [](uint64_t a, const LineCheckpoint& cp) { return a < cp.addr; });
    if (it != checkpoints.begin()) {
      const LineCheckpoint& cp = *(it - 1);
      found = true;
      row_addr = cp.addr;
      row_file = file = cp.file;
      row_line = line = cp.line;
      p = data + cp.offset;
    }
    const bool ok = run_line_program(p, c.end(), h, row_addr, row_file, row_line,
                                     [&](uint64_t a, uint32_t f, uint32_t l, const uint8_t*) {
                                       if (addr < a) return false;
                                       found = true;
                                       file = f;
                                       line = l;
                                       return true;
                                     });
    if (ok) {
      if (!found || file == 0) return not_in_line_table(addr);
      return {};
    }
  }
  return lookup_line_checked(c, func_start, addr, file, line);
}

Status decode_line_table(DataCursor c, uint64_t func_start, std::vector<LineEntry>& rows,
                         const DecodeContext& ctx) {
  LineProgram lp;
  if (Status st = lp.start(c, func_start); !st) return st;
  while (true) {
    const uint64_t at = c.offset();
    const LineProgram::Step step = lp.step(c);
    if (step == LineProgram::Step::End) return {};
    if (step == LineProgram::Step::Bad) return line_program_error(c);
    if (step != LineProgram::Step::Row) continue;
    if (ctx.strict) {
      if (Status st = ctx.check_file(lp.file, at); !st) return st;
      if (lp.addr < func_start || (!rows.empty() && lp.addr < rows.back().address))
        return Error("line table address " + hex_number(lp.addr) + " wraps around", at);
    }
    rows.push_back({lp.addr, lp.file, lp.line});
  }
}

}  // namespace gsym::detail

namespace gsym {

namespace {

struct DeltaCount {
  int64_t delta;
  uint32_t count;
};

// Chooses [min, max] of the line deltas special opcodes will cover: all of
// them when they span <= 14, else the first window of width 14 (lowest
// start among the deltas that occur) holding the most deltas; a single
// positive small delta gets min 0 (LLVM's rules).
// Counted without inserting into a sorted histogram (that was 7% of a C++
// conversion): most tables span <= 14 and need no counts at all; else small
// deltas are counted in an array and only the far ones (a jump between a
// header's lines and the source's) are sorted.
std::pair<int64_t, int64_t> line_delta_window(std::span<const LineEntry> lines) {
  if (lines.size() == 1) return {0, 0};
  auto delta_at = [&](size_t i) { return int64_t(lines[i].line) - int64_t(lines[i - 1].line); };
  int64_t min_delta = std::numeric_limits<int64_t>::max();
  int64_t max_delta = std::numeric_limits<int64_t>::min();
  for (size_t i = 1; i < lines.size(); ++i) {
    const int64_t delta = delta_at(i);
    min_delta = std::min(min_delta, delta);
    max_delta = std::max(max_delta, delta);
  }
  if (max_delta - min_delta > kMaxLineRange) {
    // The histogram, ascending: far deltas below -kNear sorted, counts of
    // near ones (|delta| <= kNear, all zero between calls), far ones above.
    constexpr int64_t kNear = 1024;
    thread_local std::array<uint32_t, 2 * kNear + 1> near_counts{};
    // Bit per near delta seen (all zero between calls): the histogram visits
    // those only, not every delta between the lowest and the highest.
    thread_local std::array<uint64_t, (2 * kNear + 1 + 63) / 64> near_seen{};
    thread_local std::vector<int64_t> far;
    thread_local std::vector<DeltaCount> histogram;
    // Reserved first: nothing below throws once near_counts is touched.
    far.clear();
    far.reserve(lines.size());
    histogram.clear();
    histogram.reserve(lines.size());
    for (size_t i = 1; i < lines.size(); ++i) {
      const int64_t delta = delta_at(i);
      if (delta < -kNear || delta > kNear) {
        far.push_back(delta);
        continue;
      }
      const size_t slot = size_t(delta + kNear);
      ++near_counts[slot];
      near_seen[slot / 64] |= uint64_t{1} << (slot % 64);
    }
    std::sort(far.begin(), far.end());
    auto add_far = [&](auto first, auto last) {
      for (auto it = first; it != last; ++it) {
        if (!histogram.empty() && histogram.back().delta == *it)
          ++histogram.back().count;
        else
          histogram.push_back({*it, 1});
      }
    };
    const auto far_split = std::lower_bound(far.begin(), far.end(), int64_t{0});
    add_far(far.begin(), far_split);
    for (size_t word = 0; word < near_seen.size(); ++word) {
      for (uint64_t bits = near_seen[word]; bits; bits &= bits - 1) {
        const size_t slot = word * 64 + size_t(std::countr_zero(bits));
        histogram.push_back({int64_t(slot) - kNear, near_counts[slot]});
        near_counts[slot] = 0;
      }
      near_seen[word] = 0;
    }
    add_far(far_split, far.end());
    // Each delta in turn as the window's first; [first, end) are those
    // within 14 of it (end only moves forward).
    size_t best_first = 0, best_last = 0, end = 0;
    uint64_t best_count = 0, count = 0;
    for (size_t first = 0; first < histogram.size(); ++first) {
      while (end < histogram.size() && histogram[end].delta - histogram[first].delta <= kMaxLineRange)
        count += histogram[end++].count;
      if (count > best_count) {
        best_first = first;
        best_last = end - 1;
        best_count = count;
      }
      count -= histogram[first].count;
    }
    min_delta = histogram[best_first].delta;
    max_delta = histogram[best_last].delta;
    // A long-lived thread (the agent's) keeps no huge scratch after an
    // outsized table.
    constexpr size_t kKeep = size_t{1} << 16;
    if (far.capacity() > kKeep) std::vector<int64_t>().swap(far);
    if (histogram.capacity() > kKeep) std::vector<DeltaCount>().swap(histogram);
  }
  if (min_delta == max_delta && min_delta > 0 && min_delta < kMaxLineRange) min_delta = 0;
  return {min_delta, max_delta};
}

}  // namespace

Status encode_line_table(ByteWriter& out, std::span<const LineEntry> lines,
                         uint64_t func_start) {
  if (lines.empty()) return Error("cannot encode an empty line table");
  auto [min_delta, max_delta] = line_delta_window(lines);
  // Encoded into a scratch buffer through a pointer, then appended: a
  // vector's push_back per byte reloads its end after every store (a byte
  // store may alias it). Room for the header and the longest row (SetFile,
  // AdvanceLine, AdvancePC) per row, plus EndSequence.
  constexpr size_t kMaxRowBytes = 3 + 3 * kMaxLebBytes;
  // Grown without zero-filling (every byte read back is written first).
  thread_local std::unique_ptr<uint8_t[]> scratch;
  thread_local size_t scratch_size = 0;
  const size_t room = (lines.size() + 1) * kMaxRowBytes;
  if (scratch_size < room) {
    scratch.reset();
    scratch = std::make_unique_for_overwrite<uint8_t[]>(room);
    scratch_size = room;
  }
  uint8_t* p = scratch.get();
  p = leb128::write_sleb(p, min_delta);
  p = leb128::write_sleb(p, max_delta);
  p = leb128::write_uleb(p, lines.front().line);

  LineEntry prev{func_start, 1, lines.front().line};
  const int64_t line_range = max_delta - min_delta + 1;
  for (const LineEntry& row : lines) {
    if (row.address < func_start)
      return Error("line row address " + hex_number(row.address) +
                   " is below the function start " + hex_number(func_start));
    if (row.address < prev.address)
      return Error("line rows are not in ascending address order at " + hex_number(row.address));
    const uint64_t addr_delta = row.address - prev.address;
    // Same arithmetic as LLVM: a decrease is taken modulo 2^32 as int32, so
    // the decoder's u32 line wraps back to the right value.
    int64_t line_delta = 0;
    if (row.line > prev.line)
      line_delta = int64_t(row.line - prev.line);
    else if (prev.line > row.line)
      line_delta = -int64_t(static_cast<int32_t>(prev.line - row.line));
    if (row.file != prev.file) {
      *p++ = kOpSetFile;
      p = leb128::write_uleb(p, row.file);
    }
    bool special = line_delta >= min_delta && line_delta <= max_delta && addr_delta <= 255;
    int64_t op = 0;
    if (special) {
      op = (line_delta - min_delta) + int64_t(addr_delta) * line_range + kFirstSpecialOp;
      special = op >= 0 && op <= 255;
    }
    if (special) {
      *p++ = static_cast<uint8_t>(op);
    } else {
      if (line_delta != 0) {
        *p++ = kOpAdvanceLine;
        p = leb128::write_sleb(p, line_delta);
      }
      *p++ = kOpAdvancePC;
      p = leb128::write_uleb(p, addr_delta);
    }
    prev = row;
  }
  *p++ = kOpEndSequence;
  out.raw(std::span<const uint8_t>(scratch.get(), p));
  // A long-lived thread (the agent's) keeps no huge scratch after an
  // outsized table (4 MiB: tables of over 120,000 rows).
  if (scratch_size > (size_t{4} << 20)) {
    scratch.reset();
    scratch_size = 0;
  }
  return Status::success();
}

}  // namespace gsym
