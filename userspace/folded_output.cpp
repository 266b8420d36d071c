#include "userspace/folded_output.h"

#include <algorithm>

namespace gsymprof {

std::string sanitize_folded_name(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == ';') c = ':';
    else if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::string folded_frame(const SymbolizedFrame& frame) {
  std::string out = sanitize_folded_name(frame.name);
  if (frame.inlined) out += "_[i]";
  return out;
}

std::vector<FoldedLine> fold_stacks(const std::vector<SymbolizedStack>& stacks) {
  std::vector<FoldedLine> lines;
  lines.reserve(stacks.size());
  for (const SymbolizedStack& stack : stacks) {
    if (stack.count == 0) continue;
    FoldedLine line;
    line.stack = sanitize_folded_name(stack.comm);
    for (const SymbolizedFrame& frame : stack.frames) {
      line.stack += ';';
      line.stack += folded_frame(frame);
    }
    line.count = stack.count;
    lines.push_back(std::move(line));
  }
  std::sort(lines.begin(), lines.end(),
            [](const FoldedLine& a, const FoldedLine& b) { return a.stack < b.stack; });
  // Stacks that differ only in file, line or module fold to the same text.
  std::vector<FoldedLine> merged;
  merged.reserve(lines.size());
  for (FoldedLine& line : lines) {
    if (!merged.empty() && merged.back().stack == line.stack)
      merged.back().count += line.count;
    else
      merged.push_back(std::move(line));
  }
  return merged;
}

std::string folded_text(const std::vector<SymbolizedStack>& stacks) {
  std::string out;
  for (const FoldedLine& line : fold_stacks(stacks)) {
    out += line.stack;
    out += ' ';
    out += std::to_string(line.count);
    out += '\n';
  }
  return out;
}

}  // namespace gsymprof
