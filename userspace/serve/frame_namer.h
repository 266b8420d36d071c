// userspace/serve/frame_namer.h - one request's naming of locations, shared
// by the pprof and OTLP decoders: (GNU build ID, mapping, address) -> the
// inline chain innermost first (as pprof's Location.line and OTLP's
// Location.lines order it: the last is the function the others were
// inlined into), or why not. Each build ID is asked of the store once per
// request; past the deadline nothing more is looked up.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gsym/reader/reader.h"
#include "userspace/base/build_id.h"
#include "userspace/serve/serve_metrics.h"
#include "userspace/serve/symbol_store.h"

namespace gsymprof {

// Views into the namer's caches and the GSYMs it holds: valid as long as
// the FrameNamer that filled them. A name, system name or file is one view
// for every line that has it, in one request.
struct NamedLine {
  std::string_view name;         // demangled
  std::string_view system_name;  // as the symbol table has it ("" = same as name)
  std::string_view file;         // "directory/basename", or ""
  uint32_t line = 0;             // 0 = unknown
};

struct MappingView {
  uint64_t memory_start = 0, memory_limit = 0, file_offset = 0;
};

class FrameNamer {
 public:
  FrameNamer(SymbolStore& store, std::chrono::steady_clock::time_point deadline);

  // Fills `lines` (cleared first) and returns Named, or the reason.
  FrameOutcome name(const BuildId& id, const MappingView& mapping, uint64_t address, std::vector<NamedLine>& lines);

  // Counts one outcome (the decoders count what they decide themselves too).
  void count(FrameOutcome outcome) { ++counts_[static_cast<size_t>(outcome)]; }
  const FrameCounts& counts() const { return counts_; }

 private:
  struct PairHash {
    size_t operator()(const std::pair<const char*, const char*>& p) const {
      return std::hash<const char*>()(p.first) * 31 + std::hash<const char*>()(p.second);
    }
  };

  SymbolStore& store_;
  std::chrono::steady_clock::time_point deadline_;
  std::map<BuildId, StoreLookup> modules_;
  // By where the GSYMs held in modules_ keep the strings (a string of a
  // GSYM's string table is one address for all its uses): the demangled
  // name ("" = the same as the symbol; a view into the GSYM's shared
  // DemangleCache, or into kept_), the file's "directory/basename".
  std::unordered_map<const char*, std::string_view> demangled_;
  std::deque<std::string> kept_;
  std::unordered_map<std::pair<const char*, const char*>, std::string, PairHash> files_;
  gsym::LookupScratch scratch_;
  FrameCounts counts_{};
  uint32_t since_clock_ = 0;
  bool late_ = false;
};

}  // namespace gsymprof
