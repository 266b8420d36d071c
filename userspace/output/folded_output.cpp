#include "userspace/output/folded_output.h"

#include <algorithm>

#include "userspace/base/text_escape.h"

namespace gsymprof {

namespace {

// Appends `name` sanitized without a temporary string: ';' -> ':' so a name
// cannot split a frame, and control characters and invalid UTF-8 escaped as
// "\xHH" (escape_control) so it cannot split a line ('\n', '\r'), carry a
// NUL or drive the terminal the folded text is shown on. The escaping never
// makes a ';', so the order of the two steps does not matter.
void append_sanitized(std::string& out, std::string_view name) {
  size_t first = out.size();
  append_escaped_control(out, name);
  for (size_t i = first; i < out.size(); ++i)
    if (out[i] == ';') out[i] = ':';
}

void append_frame(std::string& out, const SymbolizedFrame& frame) {
  append_sanitized(out, frame.name);
  if (frame.inlined) out += "_[i]";
  if (frame.kind == FrameKind::Kernel) out += "_[k]";
  if (frame.kind == FrameKind::Jit) out += "_[j]";
}

}  // namespace

std::string sanitize_folded_name(std::string_view name) {
  std::string out;
  append_sanitized(out, name);
  return out;
}

std::string folded_frame(const SymbolizedFrame& frame) {
  std::string out;
  append_frame(out, frame);
  return out;
}

std::vector<FoldedLine> fold_stacks(const SymbolizeResult& result) {
  // Each distinct frame is sanitized once, not at every occurrence.
  std::vector<std::string> frames;
  frames.reserve(result.frames.size());
  for (const SymbolizedFrame& frame : result.frames) frames.push_back(folded_frame(frame));
  std::vector<FoldedLine> lines;
  lines.reserve(result.stacks.size());
  for (const SymbolizedStack& stack : result.stacks) {
    if (stack.count == 0) continue;
    FoldedLine line;
    size_t size = stack.comm.size();
    for (uint32_t id : stack.frames) size += frames.at(id).size() + 1;
    line.stack.reserve(size);
    append_sanitized(line.stack, stack.comm);
    for (uint32_t id : stack.frames) {
      line.stack += ';';
      line.stack += frames[id];
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

std::string folded_text(const SymbolizeResult& result) {
  std::vector<FoldedLine> lines = fold_stacks(result);
  size_t size = 0;
  for (const FoldedLine& line : lines) size += line.stack.size() + 22;
  std::string out;
  out.reserve(size);
  for (FoldedLine& line : lines) {
    out += line.stack;
    std::string().swap(line.stack);  // release as we go: the text can be large
    out += ' ';
    out += std::to_string(line.count);
    out += '\n';
  }
  return out;
}

}  // namespace gsymprof
