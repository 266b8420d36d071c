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
  if (frame.kind == FrameKind::Python) out += "_[p]";
}

}  // namespace

std::string sanitize_folded_name(std::string_view name) {
  std::string out;
  append_sanitized(out, name);
  return out;
}

const std::string& most_sampled_comm(const std::map<std::string, uint64_t>& comms) {
  auto best = comms.begin();
  for (auto it = comms.begin(); it != comms.end(); ++it)
    if (it->second > best->second) best = it;
  return best->first;
}

std::string folded_frame(const SymbolizedFrame& frame) {
  std::string out;
  append_frame(out, frame);
  return out;
}

namespace {

// The stacks' folded texts ("comm;root;...;leaf") in sorted order, counts of
// equal texts summed, without building the texts: each stack is a sequence
// of pieces (its sanitized comm, then ";" and a distinct frame's text per
// frame) compared bytewise across piece boundaries, so a profile's text
// exists once, in the output, not also line by line beside it.
class FoldedStacks {
 public:
  explicit FoldedStacks(const SymbolizeResult& result) : result_(result) {
    frames_.reserve(result.frames.size());
    for (const SymbolizedFrame& frame : result.frames) frames_.push_back(folded_frame(frame));
    comms_.reserve(result.stacks.size());
    for (const SymbolizedStack& stack : result.stacks) comms_.push_back(sanitize_folded_name(stack.comm));
    for (uint32_t i = 0; i < result.stacks.size(); ++i)
      if (result.stacks[i].count != 0) order_.push_back(i);
    std::sort(order_.begin(), order_.end(), [this](uint32_t a, uint32_t b) { return compare(a, b) < 0; });
  }

  // Calls emit(stack index of the first of the equal texts, summed count) per
  // distinct text, in order.
  template <class Emit>
  void for_each(Emit&& emit) const {
    for (size_t i = 0; i < order_.size();) {
      uint64_t count = 0;
      size_t j = i;
      for (; j < order_.size() && compare(order_[i], order_[j]) == 0; ++j) count += result_.stacks[order_[j]].count;
      emit(order_[i], count);
      i = j;
    }
  }

  size_t text_size(uint32_t stack) const {
    size_t size = comms_[stack].size();
    for (uint32_t id : result_.stacks[stack].frames) size += frames_.at(id).size() + 1;
    return size;
  }

  void append_text(std::string& out, uint32_t stack) const {
    out += comms_[stack];
    for (uint32_t id : result_.stacks[stack].frames) {
      out += ';';
      out += frames_.at(id);
    }
  }

 private:
  // Walks a stack's text piece by piece.
  struct Cursor {
    const FoldedStacks& self;
    uint32_t stack;
    size_t piece = 0;  // 0: comm; 2k+1: ';' before frame k; 2k+2: frame k
    std::string_view rest;
    Cursor(const FoldedStacks& s, uint32_t i) : self(s), stack(i), rest(s.comms_[i]) {}
    // The next non-empty run of bytes ("" at the end).
    std::string_view next() {
      const auto& frames = self.result_.stacks[stack].frames;
      while (rest.empty()) {
        ++piece;
        const size_t frame = (piece - 1) / 2;
        if (frame >= frames.size()) return {};
        rest = piece % 2 ? std::string_view(";") : std::string_view(self.frames_.at(frames[frame]));
      }
      return rest;
    }
  };

  int compare(uint32_t a, uint32_t b) const {
    if (a == b) return 0;
    Cursor x(*this, a), y(*this, b);
    for (;;) {
      std::string_view p = x.next(), q = y.next();
      if (p.empty() || q.empty()) return p.empty() ? (q.empty() ? 0 : -1) : 1;
      const size_t n = std::min(p.size(), q.size());
      if (int c = p.substr(0, n).compare(q.substr(0, n)); c != 0) return c;
      x.rest.remove_prefix(n);
      y.rest.remove_prefix(n);
    }
  }

  const SymbolizeResult& result_;
  std::vector<std::string> frames_;  // distinct frames' texts, sanitized once
  std::vector<std::string> comms_;   // per stack (short: no heap)
  std::vector<uint32_t> order_;      // stacks with a count, sorted by text
};

}  // namespace

std::vector<FoldedLine> fold_stacks(const SymbolizeResult& result) {
  const FoldedStacks stacks(result);
  std::vector<FoldedLine> lines;
  stacks.for_each([&](uint32_t stack, uint64_t count) {
    FoldedLine line;
    line.stack.reserve(stacks.text_size(stack));
    stacks.append_text(line.stack, stack);
    line.count = count;
    lines.push_back(std::move(line));
  });
  return lines;
}

std::string folded_text(const SymbolizeResult& result) {
  const FoldedStacks stacks(result);
  size_t size = 0;
  stacks.for_each([&](uint32_t stack, uint64_t) { size += stacks.text_size(stack) + 22; });
  std::string out;
  out.reserve(size);
  stacks.for_each([&](uint32_t stack, uint64_t count) {
    stacks.append_text(out, stack);
    out += ' ';
    out += std::to_string(count);
    out += '\n';
  });
  return out;
}

}  // namespace gsymprof
