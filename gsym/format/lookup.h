// gsym/format/lookup.h - what a lookup fills and returns: frames (innermost
// first, views into the GSYM bytes), the options, the caller's reusable
// scratch. The record decoders (line_table, inline_info) fill them; the
// Reader (reader/reader.h, which includes this header) hands them out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gsym/format/model.h"  // AddressRange

namespace gsym {

// One frame of a lookup, innermost first. Views point into the GSYM bytes and
// stay valid as long as the Reader (and its storage) lives.
struct LookupFrame {
  std::string_view name;
  std::string_view directory;
  std::string_view basename;
  uint32_t line = 0;     // 0 = unknown
  uint64_t offset = 0;   // address - start of this frame's function/inline range
  bool inlined = false;  // true for every frame but the outermost
};

struct LookupOptions {
  bool line_information = true;  // false: names and offsets only
  bool inline_frames = true;     // false: only the concrete function
};

// Caller-owned, reused across lookups so steady-state lookups allocate
// nothing. Holds no state between calls; one per thread.
class LookupScratch {
 public:
  LookupScratch() = default;
  explicit LookupScratch(size_t inline_depth) { reserve(inline_depth); }
  void reserve(size_t inline_depth) {
    frames.reserve(inline_depth + 1);
    inline_chain.reserve(inline_depth + 1);
  }

  // One containing inline-tree node on the path from the root to the deepest
  // node covering the address (filled by lookup_into, root first).
  struct InlineStep {
    uint64_t name = 0;         // string offset
    uint64_t first_start = 0;  // lowest start of the node's ranges
    uint32_t call_file = 0;    // file-table index
    uint32_t call_line = 0;
  };

  // Results of the last lookup_into (frames, innermost first) and internal
  // working storage; contents are replaced by every call.
  std::vector<LookupFrame> frames;
  std::vector<InlineStep> inline_chain;
};

struct LookupResult {
  uint64_t address = 0;
  AddressRange function;            // the top-level function's range
  std::vector<LookupFrame> frames;  // innermost first, never empty
};

}  // namespace gsym
