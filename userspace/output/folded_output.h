// userspace/output/folded_output.h - symbolized stacks -> folded-stack text
// (FlameGraph's "collapsed" format).
//
// Input: a SymbolizeResult (symbolize.h). Output: one line per unique folded
// stack, "comm;root;...;leaf COUNT\n", sorted bytewise by the part before
// the count, counts of stacks with equal text summed. Deterministic.
//
// Frame names: inlined frames get the suffix "_[i]", kernel frames "_[k]",
// JIT frames "_[j]", Python frames "_[p]". Inside comm and names,
// control characters (C0 including tab and newline, DEL, C1) and invalid
// UTF-8 bytes become \xHH (escape_control, text_escape.h) and ';' becomes
// ':', so a name can never split a frame or a line nor drive a terminal. Spaces are kept (flamegraph.pl splits the count off at
// the last space).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

// `name` escaped (escape_control) with ';' -> ':'.
std::string sanitize_folded_name(std::string_view name);

// The comm with the most samples of a thread's `comms` (name -> samples, not
// empty; the smallest name among equals): what names the thread.
const std::string& most_sampled_comm(const std::map<std::string, uint64_t>& comms);

// A frame as it appears in a folded line: sanitized name and its suffix
// ("_[i]" if inlined, "_[k]", "_[j]", "_[p]" by kind).
std::string folded_frame(const SymbolizedFrame& frame);

struct FoldedLine {
  std::string stack;  // "comm;root;...;leaf"
  uint64_t count = 0;
  bool operator==(const FoldedLine&) const = default;
};

// Unique folded stacks of result.stacks (frame ids into result.frames; any
// order, repeats allowed), sorted bytewise by `stack`, counts summed.
std::vector<FoldedLine> fold_stacks(const SymbolizeResult& result);

// The complete folded text ("" when there are no stacks).
std::string folded_text(const SymbolizeResult& result);

}  // namespace gsymprof
