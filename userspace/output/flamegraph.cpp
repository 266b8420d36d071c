#include "gsym/base/file_io.h"
#include "userspace/output/flamegraph.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

// Geometry (pixels). Frames are drawn bottom-up: the root sits just above
// the details line.
constexpr double kXPad = 10;
constexpr double kFrameHeight = 16;
constexpr double kTopPad = 58;     // title, legend, search box
constexpr double kBottomPad = 30;  // details / matched line
constexpr double kFontSize = 12;
constexpr double kCharWidth = kFontSize * 0.59;  // average Verdana advance

constexpr std::string_view kSuffixes[] = {"_[i]", "_[k]", "_[j]", "_[p]", "_[w]"};

std::string_view strip_suffix(std::string_view name) {
  for (std::string_view suffix : kSuffixes)
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      return name.substr(0, name.size() - suffix.size());
  return name;
}

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The first `max_code_points` code points of already-escaped-safe text.
size_t code_points(std::string_view text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) ++n;
  return n;
}

// `text` must be valid UTF-8 (the output of sanitize_utf8).
std::string first_code_points(std::string_view text, size_t count) {
  size_t n = 0, i = 0;
  for (; i < text.size(); ++i)
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80 && n++ == count) break;
  return std::string(text.substr(0, i));
}

// Valid, XML-allowed UTF-8: everything else becomes U+FFFD.
std::string sanitize_utf8(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t length = decode_utf8(text, i, &cp);
    bool allowed = length > 0 && (cp >= 0x20 || cp == '\t' || cp == '\n' || cp == '\r') &&
                   cp != 0xFFFE && cp != 0xFFFF;
    if (allowed) out.append(text.substr(i, length));
    else out.append(kReplacement);
    i += length > 0 ? length : 1;
  }
  return out;
}

std::string escape_markup(std::string_view clean) {
  std::string out;
  out.reserve(clean.size());
  for (char c : clean) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// The visible label for a frame `px` wide, as the script computes it.
std::string fit_label(std::string_view clean_name, double px) {
  double chars = std::floor((px - 6) / kCharWidth);
  if (!(chars >= 3)) return "";
  size_t max_chars = chars > 1e6 ? 1000000 : static_cast<size_t>(chars);
  if (code_points(clean_name) <= max_chars) return std::string(clean_name);
  return first_code_points(clean_name, max_chars - 2) + "..";
}

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string frame_color(std::string_view name, FlameFrameKind kind, bool is_root,
                        FlamePalette palette = FlamePalette::Hot) {
  uint64_t hash = fnv1a(strip_suffix(name));
  auto unit = [&](int shift) { return static_cast<double>((hash >> shift) & 0xFF) / 255.0; };
  double v1 = unit(8), v2 = unit(24), v3 = unit(40);
  int r, g, b;
  if (is_root) {
    r = 200, g = 200, b = 205;
  } else {
    switch (kind) {
      case FlameFrameKind::Inlined:  // aqua
        r = 50 + static_cast<int>(60 * v1), g = 165 + static_cast<int>(55 * v1),
        b = 165 + static_cast<int>(55 * v1);
        break;
      case FlameFrameKind::Kernel:  // orange
        r = 190 + static_cast<int>(65 * v3), g = 90 + static_cast<int>(65 * v3), b = 0;
        break;
      case FlameFrameKind::Jit:  // green, as flamegraph.pl's java palette draws _[j]
        r = 50 + static_cast<int>(60 * v1), g = 200 + static_cast<int>(55 * v1),
        b = 50 + static_cast<int>(60 * v1);
        break;
      case FlameFrameKind::Python:  // yellow: apart from red native code and orange kernel
        r = 215 + static_cast<int>(40 * v1), g = 195 + static_cast<int>(45 * v1),
        b = 40 + static_cast<int>(50 * v2);
        break;
      case FlameFrameKind::Unresolved: {  // grey
        int grey = 150 + static_cast<int>(40 * v1);
        r = g = b = grey;
        break;
      }
      case FlameFrameKind::Function:
      default:
        if (palette == FlamePalette::Cool) {  // blue, as flamegraph.pl's io palette
          r = 80 + static_cast<int>(60 * v1), g = r, b = 190 + static_cast<int>(55 * v2);
          break;
        } else {  // red, as flamegraph.pl's palettes draw native user code
        int other = 50 + static_cast<int>(80 * v2);
        r = 200 + static_cast<int>(55 * v1), g = other, b = other;
        break;
        }
    }
  }
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

struct Node {
  std::string_view name;
  uint64_t total = 0;
  uint32_t depth = 0;
  std::map<std::string_view, uint32_t> children;  // by name: stable order
};

constexpr const char* kStyle = R"(<style type="text/css">
text { font-family: Verdana, "DejaVu Sans", sans-serif; font-size: 12px; fill: rgb(0,0,0); }
#title { font-size: 17px; text-anchor: middle; }
#frames g { cursor: pointer; }
#frames text { pointer-events: none; }
#frames g:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }
#frames g.parent { opacity: 0.5; }
.button { cursor: pointer; fill: rgb(6,69,173); text-decoration: underline; }
.hidden { display: none; }
#matched { text-anchor: end; }
</style>
)";

// Click a frame to zoom into it (its ancestors stay, dimmed, at full width);
// "Reset Zoom" or Escape zooms out. The search box takes a regular
// expression (case-insensitive; invalid ones are matched literally) and
// highlights matching frames, reporting the share of samples under them.
constexpr const char* kScript = R"JS(<script type="text/ecmascript"><![CDATA[
(function () {
  "use strict";
  var svg = document.documentElement;
  var graphWidth = +svg.getAttribute("data-graph-width");
  var xpad = +svg.getAttribute("data-xpad");
  var charWidth = +svg.getAttribute("data-char-width");
  var total = +svg.getAttribute("data-total");
  var details = document.getElementById("details");
  var matched = document.getElementById("matched");
  var reset = document.getElementById("reset");
  var searchBox = document.getElementById("search");
  var frames = [];
  var groups = document.getElementById("frames").children;
  for (var i = 0; i < groups.length; i++) {
    var g = groups[i];
    var tip = g.getElementsByTagName("title")[0].textContent;
    var name = tip.slice(0, tip.lastIndexOf(" ("));
    var rect = g.getElementsByTagName("rect")[0];
    g.setAttribute("data-index", String(i));
    frames.push({
      g: g, rect: rect, text: g.getElementsByTagName("text")[0], tip: tip, name: name,
      label: name.replace(/_\[[ikjpw]\]$/, ""), fill: rect.getAttribute("fill"),
      s: +g.getAttribute("data-s"), n: +g.getAttribute("data-n"), d: +g.getAttribute("data-d")
    });
  }

  function fit(label, px) {
    var chars = Math.floor((px - 6) / charWidth);
    if (!(chars >= 3)) return "";
    var points = Array.from(label);
    if (points.length <= chars) return label;
    return points.slice(0, chars - 2).join("") + "..";
  }

  function layout(s0, n0, d0) {
    frames.forEach(function (f) {
      var inside = f.d >= d0 && f.s >= s0 && f.s + f.n <= s0 + n0;
      var above = f.d < d0 && f.s <= s0 && f.s + f.n >= s0 + n0;
      if (!inside && !above) { f.g.classList.add("hidden"); return; }
      f.g.classList.remove("hidden");
      f.g.classList.toggle("parent", above);
      var x = inside ? xpad + (f.s - s0) / n0 * graphWidth : xpad;
      var w = inside ? f.n / n0 * graphWidth : graphWidth;
      f.rect.setAttribute("x", x.toFixed(2));
      f.rect.setAttribute("width", w.toFixed(2));
      f.text.setAttribute("x", (x + 3).toFixed(2));
      f.text.textContent = fit(f.label, w);
    });
  }

  function zoom(f) {
    layout(f.s, f.n, f.d);
    reset.classList.toggle("hidden", f.d === 0 && f.n === total);
  }

  function unzoom() {
    layout(0, total, 0);
    reset.classList.add("hidden");
  }

  function search(term) {
    var re = null;
    if (term) {
      try { re = new RegExp(term, "i"); }
      catch (e) { re = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
    }
    var ranges = [];
    frames.forEach(function (f) {
      var hit = re !== null && re.test(f.name);
      f.rect.setAttribute("fill", hit ? "rgb(230,0,230)" : f.fill);
      f.g.classList.toggle("match", hit);
      if (hit) ranges.push([f.s, f.s + f.n]);
    });
    // Samples under at least one match; nested matches count once.
    ranges.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var covered = 0, end = -Infinity;
    ranges.forEach(function (r) {
      if (r[0] >= end) { covered += r[1] - r[0]; end = r[1]; }
      else if (r[1] > end) { covered += r[1] - end; end = r[1]; }
    });
    matched.textContent = re === null ? "" :
        "Matched: " + (total > 0 ? 100 * covered / total : 0).toFixed(2) + "%";
  }

  function frameOf(target) {
    var g = target && target.closest ? target.closest("#frames > g") : null;
    return g ? frames[+g.getAttribute("data-index")] : null;
  }

  var container = document.getElementById("frames");
  container.addEventListener("click", function (e) {
    var f = frameOf(e.target);
    if (f) zoom(f);
  });
  container.addEventListener("mouseover", function (e) {
    var f = frameOf(e.target);
    details.textContent = f ? f.tip : "";
  });
  container.addEventListener("mouseout", function () { details.textContent = ""; });
  reset.addEventListener("click", unzoom);
  searchBox.addEventListener("input", function () { search(searchBox.value); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { unzoom(); return; }
    if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); searchBox.focus(); }
  });
})();
]]></script>
)JS";

// The prefix tree of the stacks (names are views into them); nodes[0] is
// the root, "all".
struct FlameTree {
  std::vector<Node> nodes;
  uint32_t max_depth = 0;
};

gsym::Expected<FlameTree> build_flame_tree(const std::vector<FoldedLine>& stacks) {
  FlameTree tree;
  std::vector<Node>& nodes = tree.nodes;
  nodes.resize(1);
  nodes[0].name = "all";
  for (const FoldedLine& line : stacks) {
    if (line.count == 0) continue;
    if (nodes[0].total > std::numeric_limits<uint64_t>::max() - line.count)
      return gsym::Error("sample counts overflow 64 bits");
    nodes[0].total += line.count;
    uint32_t current = 0;
    std::string_view rest = line.stack;
    for (;;) {
      size_t semicolon = rest.find(';');
      std::string_view name = rest.substr(0, semicolon);
      auto found = nodes[current].children.find(name);
      uint32_t child_index;
      if (found != nodes[current].children.end()) {
        child_index = found->second;
      } else {
        child_index = static_cast<uint32_t>(nodes.size());
        nodes[current].children.emplace(name, child_index);
        Node child;
        child.name = name;
        child.depth = nodes[current].depth + 1;
        tree.max_depth = std::max(tree.max_depth, child.depth);
        nodes.push_back(std::move(child));
      }
      current = child_index;
      nodes[current].total += line.count;  // cannot overflow: bounded by the root's total
      if (semicolon == std::string_view::npos) break;
      rest = rest.substr(semicolon + 1);
    }
  }
  return tree;
}

struct Geometry {
  double graph_width, image_width, image_height;
};

// Everything above the frames: the document, style, title, legend, search
// box and the details / matched lines.
void put_svg_head(std::string& svg, const Geometry& g, uint64_t total, const FlamegraphOptions& options) {
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  svg += "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(g.image_width, 0) +
         "\" height=\"" + fixed(g.image_height, 0) + "\" viewBox=\"0 0 " + fixed(g.image_width, 0) + " " +
         fixed(g.image_height, 0) + "\" data-graph-width=\"" + fixed(g.graph_width, 0) +
         "\" data-xpad=\"" + fixed(kXPad, 0) + "\" data-char-width=\"" + fixed(kCharWidth, 2) +
         "\" data-total=\"" + std::to_string(total) + "\">\n";
  svg += kStyle;
  svg += "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
         "<stop stop-color=\"#eeeeee\" offset=\"5%\"/><stop stop-color=\"#eeeeb0\" offset=\"95%\"/>"
         "</linearGradient></defs>\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + fixed(g.image_width, 0) + "\" height=\"" +
         fixed(g.image_height, 0) + "\" fill=\"url(#background)\"/>\n";
  svg += "<text id=\"title\" x=\"" + fixed(g.image_width / 2, 0) + "\" y=\"24\">" + xml_escape(options.title) +
         "</text>\n";
  svg += "<text id=\"reset\" class=\"button hidden\" x=\"" + fixed(kXPad, 0) +
         "\" y=\"24\">Reset Zoom</text>\n";

  // Legend: the options' entries, else one swatch per frame kind.
  std::vector<FlameLegendEntry> legend = options.legend;
  if (legend.empty()) {
    struct KindEntry {
      const char* label;
      const char* sample_name;
      FlameFrameKind kind;
    };
    constexpr KindEntry kKinds[] = {
        {"function", "function", FlameFrameKind::Function},
        {"inlined _[i]", "inlined", FlameFrameKind::Inlined},
        {"kernel _[k]", "kernel", FlameFrameKind::Kernel},
        {"JIT _[j]", "jit", FlameFrameKind::Jit},
        {"Python _[p]", "python", FlameFrameKind::Python},
        {"unresolved", "[unknown]", FlameFrameKind::Unresolved},
    };
    for (const KindEntry& entry : kKinds)
      legend.push_back({entry.label, frame_color(entry.sample_name, entry.kind, false, options.palette)});
  }
  // A given legend may have white swatches (the differential graph's "unchanged").
  const std::string outline = options.legend.empty() ? "" : " stroke=\"rgb(120,120,120)\" stroke-width=\"0.5\"";
  double legend_x = kXPad;
  svg += "<g id=\"legend\">\n";
  for (const FlameLegendEntry& entry : legend) {
    if (!entry.fill.empty()) {
      svg += "<rect x=\"" + fixed(legend_x, 0) + "\" y=\"36\" width=\"12\" height=\"12\" fill=\"" +
             xml_escape(entry.fill) + "\"" + outline + "/>";
      legend_x += 16;
    }
    svg += "<text x=\"" + fixed(legend_x, 0) + "\" y=\"46\">" + xml_escape(entry.label) + "</text>\n";
    legend_x += 8 * static_cast<double>(code_points(entry.label)) + 16;
  }
  svg += "</g>\n";
  svg += "<foreignObject x=\"" + fixed(g.image_width - kXPad - 240, 0) +
         "\" y=\"30\" width=\"240\" height=\"24\"><input xmlns=\"http://www.w3.org/1999/xhtml\" "
         "id=\"search\" type=\"search\" placeholder=\"Search (regex)\" "
         "style=\"box-sizing:border-box;width:100%;height:22px;font:12px Verdana,sans-serif\"/>"
         "</foreignObject>\n";
  svg += "<text id=\"details\" x=\"" + fixed(kXPad, 0) + "\" y=\"" + fixed(g.image_height - 10, 0) +
         "\"> </text>\n";
  svg += "<text id=\"matched\" x=\"" + fixed(g.image_width - kXPad, 0) + "\" y=\"" +
         fixed(g.image_height - 10, 0) + "\"></text>\n";
}

// The default look of a frame: coloured by kind, "N samples, P%" (or "N ns, P%").
FlameFrameStyle kind_style(const Node& node, bool is_root, uint64_t total, const FlamegraphOptions& options) {
  double percent = static_cast<double>(node.total) / static_cast<double>(total) * 100;
  const std::string unit = options.unit != "samples" ? " " + options.unit + ", "
                           : node.total == 1        ? " sample, "
                                                    : " samples, ";
  return {frame_color(node.name, classify_flame_frame(node.name), is_root, options.palette),
          with_thousands(node.total) + unit + fixed(percent, 2) + "%"};
}

// One frame's box: tooltip, rectangle and label, `start` samples from the left.
void put_frame(std::string& svg, const Node& node, const FlameFrameStyle& style, uint64_t start,
               uint64_t total, double width, const Geometry& g) {
  double x = kXPad + static_cast<double>(start) / static_cast<double>(total) * g.graph_width;
  double y = g.image_height - kBottomPad - (node.depth + 1) * kFrameHeight;
  std::string clean = sanitize_utf8(node.name);
  svg += "<g data-s=\"" + std::to_string(start) + "\" data-n=\"" + std::to_string(node.total) +
         "\" data-d=\"" + std::to_string(node.depth) + "\"><title>" + escape_markup(clean) + " (" +
         xml_escape(style.detail) + ")</title><rect x=\"" + fixed(x, 2) + "\" y=\"" + fixed(y, 0) +
         "\" width=\"" + fixed(width, 2) + "\" height=\"" + fixed(kFrameHeight - 1, 0) +
         "\" rx=\"2\" fill=\"" + xml_escape(style.fill) + "\"/><text x=\"" +
         fixed(x + 3, 2) + "\" y=\"" + fixed(y + kFrameHeight - 4.5, 1) + "\">" +
         escape_markup(fit_label(sanitize_utf8(strip_suffix(node.name)), width)) + "</text></g>\n";
}

// Every frame at least min_frame_px wide, in a pre-order walk with children
// by name (the order the script's zoom expects).
void put_frames(std::string& svg, const std::vector<Node>& nodes, const FlamegraphOptions& options,
                const Geometry& g) {
  const uint64_t total = nodes[0].total;
  struct Pending {
    uint32_t node;
    uint64_t start;        // in samples from the left
    size_t parent_length;  // of `stack` at the node's parent
  };
  std::vector<Pending> work{{0, 0, 0}};
  std::vector<std::pair<uint32_t, uint64_t>> children;
  std::string stack;  // the folded prefix up to the node (only for options.frame_style)
  while (!work.empty()) {
    Pending item = work.back();
    work.pop_back();
    const Node& node = nodes[item.node];
    double width = static_cast<double>(node.total) / static_cast<double>(total) * g.graph_width;
    if (width < options.min_frame_px) continue;
    if (options.frame_style) {
      stack.resize(item.parent_length);
      if (item.node != 0) {
        if (!stack.empty()) stack += ';';
        stack += node.name;
      }
      put_frame(svg, node, options.frame_style(stack, node.total), item.start, total, width, g);
    } else {
      put_frame(svg, node, kind_style(node, item.node == 0, total, options), item.start, total, width, g);
    }
    // Push children in reverse name order so they are emitted in order.
    children.clear();
    uint64_t child_start = item.start;
    for (const auto& [name, index] : node.children) {
      children.emplace_back(index, child_start);
      child_start += nodes[index].total;
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      work.push_back({it->first, it->second, stack.size()});
  }
}

}  // namespace

std::string with_thousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string xml_escape(std::string_view text) { return escape_markup(sanitize_utf8(text)); }

std::string sanitize_xml_text(std::string_view text) { return sanitize_utf8(text); }

FlameFrameKind classify_flame_frame(std::string_view name) {
  if (name.ends_with("_[i]")) return FlameFrameKind::Inlined;
  if (name.ends_with("_[k]")) return FlameFrameKind::Kernel;
  if (name.ends_with("_[j]")) return FlameFrameKind::Jit;
  if (name.ends_with("_[p]")) return FlameFrameKind::Python;
  if (name == "[unknown]" || name == "[truncated]") return FlameFrameKind::Unresolved;
  // "module+0xOFFSET": a module known, the address not named.
  size_t plus = name.rfind("+0x");
  if (plus != std::string_view::npos && plus > 0 && plus + 3 < name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(plus + 3), name.end(), is_hex_digit))
    return FlameFrameKind::Unresolved;
  return FlameFrameKind::Function;
}

gsym::Expected<std::vector<FoldedLine>> parse_folded(std::string_view text) {
  std::map<std::string_view, uint64_t> counts;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    auto bad = [&](const std::string& what) {
      return gsym::Error("line " + std::to_string(line_number) + ": " + what);
    };
    size_t space = line.rfind(' ');
    if (space == std::string_view::npos) return bad("no sample count (expected \"STACK COUNT\")");
    std::string_view stack = line.substr(0, space), digits = line.substr(space + 1);
    if (digits.empty() || digits.size() > 20 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      // Escaped: the error goes to a terminal and the input is anyone's file.
      return bad("sample count \"" + escape_control(digits.substr(0, 32)) +
                 "\" is not an unsigned integer");
    uint64_t count = 0;
    for (char c : digits) {
      uint64_t digit = static_cast<uint64_t>(c - '0');
      if (count > (std::numeric_limits<uint64_t>::max() - digit) / 10)
        return bad("sample count does not fit in 64 bits");
      count = count * 10 + digit;
    }
    if (stack.empty()) return bad("empty stack");
    uint64_t& sum = counts[stack];
    if (sum > std::numeric_limits<uint64_t>::max() - count)
      return bad("sample counts overflow 64 bits");
    sum += count;
  }
  std::vector<FoldedLine> lines;
  lines.reserve(counts.size());
  for (const auto& [stack, count] : counts)
    if (count > 0) lines.push_back(FoldedLine{std::string(stack), count});
  return lines;
}

gsym::Expected<std::string> render_flamegraph_svg(const std::vector<FoldedLine>& stacks,
                                                  const FlamegraphOptions& options) {
  gsym::Expected<FlameTree> tree = build_flame_tree(stacks);
  if (!tree) return tree.error();
  const uint64_t total = tree->nodes[0].total;
  Geometry g;
  g.graph_width = std::max(1.0, static_cast<double>(options.width) - 2 * kXPad);
  g.image_width = g.graph_width + 2 * kXPad;
  g.image_height = kTopPad + (tree->max_depth + 1) * kFrameHeight + kBottomPad;

  std::string svg;
  put_svg_head(svg, g, total, options);
  svg += "<g id=\"frames\">\n";
  if (total == 0) {
    svg += "</g>\n<text x=\"" + fixed(g.image_width / 2, 0) + "\" y=\"" +
           fixed(kTopPad + kFrameHeight, 0) + "\" style=\"text-anchor:middle\">No samples</text>\n";
  } else {
    put_frames(svg, tree->nodes, options, g);
    svg += "</g>\n";
  }
  svg += kScript;
  svg += "</svg>\n";
  return svg;
}

gsym::Status write_flamegraph_svg(std::string_view folded_text, const std::string& path,
                                  const FlamegraphOptions& options) {
  auto stacks = parse_folded(folded_text);
  if (!stacks) return stacks.error();
  auto svg = render_flamegraph_svg(*stacks, options);
  if (!svg) return svg.error();
  return gsym::write_file_atomically(path, *svg);
}

}  // namespace gsymprof
