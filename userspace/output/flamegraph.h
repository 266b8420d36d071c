// userspace/output/flamegraph.h - folded stacks -> self-contained interactive SVG
// flame graph.
//
// Input: folded text ("frame;frame;... COUNT" per line, FlameGraph's
// collapsed format). Output: one SVG document with no external resources:
// frames as boxes whose widths are proportional to samples (root at the
// bottom, children sorted by name), a <title> tooltip per box ("NAME (N
// samples, P%)"), an inline script for click-to-zoom, a search box that
// highlights matches and reports the matched share, and colours by frame
// kind: functions red, inlined ("_[i]") aqua, kernel ("_[k]") orange,
// JIT ("_[j]") green, Python ("_[p]") yellow, unresolved ("[unknown]",
// "[truncated]", "module+0x...") grey, unless the caller colours and
// describes each frame itself (FlamegraphOptions::frame_style: the
// differential graph of profile_diff.h).
// Deterministic: the same input gives the same bytes (colours are a hash of
// the name, never random). Text is XML-escaped; bytes that are not valid
// UTF-8 or not allowed in XML become U+FFFD.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/output/folded_output.h"

namespace gsymprof {

// How one frame is drawn when a graph colours by something other than the
// frame's kind (the differential graph, profile_diff.h).
struct FlameFrameStyle {
  std::string fill;    // an SVG colour, "rgb(R,G,B)"
  std::string detail;  // the tooltip is "NAME (DETAIL)"; DETAIL must not contain " ("
};

// One entry of the legend row: a swatch and its label, or (fill "") a note.
struct FlameLegendEntry {
  std::string label;
  std::string fill;
};

// Function frames in red-yellow (time on the CPU, flamegraph.pl's "hot"), or
// in blues (time off it, flamegraph.pl's "io" palette).
enum class FlamePalette : uint8_t { Hot, Cool };

struct FlamegraphOptions {
  std::string title = "Flame Graph";
  std::string unit = "samples";  // what the counts are: "samples", or "ns"
  FlamePalette palette = FlamePalette::Hot;
  uint32_t width = 1200;      // pixels
  double min_frame_px = 0.1;  // narrower frames (and their children) are left out
  // Optional: each drawn frame's colour and tooltip, from its stack (the
  // folded prefix "frame;...;frame" up to and including it, root first; ""
  // for the root box "all") and its sample count. Unset: coloured by kind,
  // tooltip "N samples, P%". Called once per drawn frame, in drawing order.
  std::function<FlameFrameStyle(std::string_view stack, uint64_t samples)> frame_style;
  // The legend row; empty: one swatch per frame kind.
  std::vector<FlameLegendEntry> legend;
};

// Parses folded text: one "STACK COUNT" per line (count after the last
// space, an unsigned decimal), frames separated by ';'. Empty lines are
// skipped; a trailing '\r' is ignored. Equal stacks are summed. Error:
// "line N: ..." for a line without a valid count or an empty stack.
gsym::Expected<std::vector<FoldedLine>> parse_folded(std::string_view text);

enum class FlameFrameKind : uint8_t { Function, Inlined, Kernel, Unresolved, Jit, Python };

// By the FlameGraph suffix conventions and gsymprof's unresolved names.
FlameFrameKind classify_flame_frame(std::string_view name);

// Escapes &, <, >, " and ' and replaces invalid UTF-8 and characters XML
// forbids (control characters but tab/newline/CR, U+FFFE, U+FFFF) with U+FFFD.
std::string xml_escape(std::string_view text);

// "1,234,567": counts as the tooltips print them.
std::string with_thousands(uint64_t value);

// Only the UTF-8 part of xml_escape: markup characters are left alone.
std::string sanitize_xml_text(std::string_view text);

// The SVG document for `stacks` (which need not be sorted or unique). An
// empty input renders a graph saying there are no samples. Error: the total
// sample count overflows 64 bits.
gsym::Expected<std::string> render_flamegraph_svg(const std::vector<FoldedLine>& stacks,
                                                  const FlamegraphOptions& options = {});

// parse_folded + render + atomic write to `path` (errors name what failed:
// "line N: ..." for the input, "PATH: ..." for the output).
gsym::Status write_flamegraph_svg(std::string_view folded_text, const std::string& path,
                                  const FlamegraphOptions& options);

}  // namespace gsymprof
