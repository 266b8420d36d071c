#include "userspace/output/frame_chains.h"

#include <charconv>
#include <cstdio>
#include <string>

namespace gsymprof {
namespace {

constexpr int kIndexDigits = 10;

std::string index_name(size_t index) {
  char text[24];
  std::snprintf(text, sizeof text, "%0*zu", kIndexDigits, index);
  return text;
}

}  // namespace

gsym::Expected<FrameChains> symbolize_frames(const Capture& capture, GsymLocator& locator,
                                             const SymbolizeOptions& options, const CaptureFrame* first) {
  FrameChains out;
  auto add_frame = [&](const CaptureFrame& frame) {
    if (out.numbers.try_emplace(frame, static_cast<uint32_t>(out.frames.size())).second)
      out.frames.push_back(frame);
  };
  if (first) add_frame(*first);
  for (const CaptureStack& stack : capture.stacks)
    if (stack.count != 0)
      for (const CaptureFrame& frame : stack.frames) add_frame(frame);

  Capture per_frame;
  per_frame.modules = capture.modules;
  per_frame.stacks.reserve(out.frames.size());
  for (size_t i = 0; i < out.frames.size(); ++i)
    per_frame.stacks.push_back({0, index_name(i), {out.frames[i]}, false, 1});
  per_frame.kernel = capture.kernel;
  per_frame.jit_symbols = capture.jit_symbols;
  per_frame.python_frames = capture.python_frames;
  SymbolizeOptions per_frame_options = options;
  per_frame_options.pid_in_comm = false;
  auto symbolized = symbolize(per_frame, locator, per_frame_options);
  if (!symbolized) return symbolized.error();
  out.symbolized = std::move(*symbolized);

  std::vector<bool> seen(out.frames.size(), false);
  out.chains.resize(out.frames.size());
  for (SymbolizedStack& stack : out.symbolized.stacks) {
    size_t index = 0;
    auto [end, ec] = std::from_chars(stack.comm.data(), stack.comm.data() + stack.comm.size(), index);
    if (ec != std::errc() || end != stack.comm.data() + stack.comm.size() || index >= out.frames.size() ||
        seen[index])
      return gsym::Error("unexpected symbolized stack '" + stack.comm + "'");
    seen[index] = true;
    out.chains[index] = std::move(stack.frames);
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) return gsym::Error("frame " + std::to_string(i) + " was not symbolized");
  out.symbolized.stacks.clear();
  return out;
}

SymbolizedFrame marker_frame(const std::string& name) {
  SymbolizedFrame frame;
  frame.kind = FrameKind::Truncated;
  frame.name = name;
  return frame;
}

}  // namespace gsymprof
