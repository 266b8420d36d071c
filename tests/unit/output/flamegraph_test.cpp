// Flame graph: folded parsing, frame kinds, XML escaping, SVG layout.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <string>

#include "userspace/output/flamegraph.h"

using namespace gsymprof;

namespace {

std::string render(std::string_view folded, const std::string& title = "T") {
  auto stacks = parse_folded(folded);
  REQUIRE_MESSAGE(stacks.ok(), stacks.error().message);
  FlamegraphOptions options;
  options.title = title;
  auto svg = render_flamegraph_svg(*stacks, options);
  REQUIRE_MESSAGE(svg.ok(), svg.error().message);
  return *svg;
}

std::string parse_error(std::string_view folded) {
  auto stacks = parse_folded(folded);
  return stacks ? "" : stacks.error().message;
}

// The <g> element of the frame whose tooltip starts with `tip`.
std::string frame_element(const std::string& svg, const std::string& tip) {
  size_t at = svg.find("<title>" + tip);
  if (at == std::string::npos) return "";
  size_t begin = svg.rfind("<g ", at), end = svg.find("</g>", at);
  return svg.substr(begin, end + 4 - begin);
}

std::string attribute(const std::string& element, const std::string& tag, const std::string& name) {
  size_t at = element.find("<" + tag);
  if (at == std::string::npos) return "";
  size_t value = element.find(" " + name + "=\"", at);
  if (value == std::string::npos) return "";
  value += name.size() + 3;
  return element.substr(value, element.find('"', value) - value);
}

std::string label(const std::string& element) {
  size_t at = element.find("<text");
  size_t open = element.find('>', at), close = element.find("</text>", at);
  return element.substr(open + 1, close - open - 1);
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// "rgb(r,g,b)" -> components.
std::array<int, 3> rgb(const std::string& fill) {
  std::array<int, 3> c{-1, -1, -1};
  char end = 0;
  CHECK(std::sscanf(fill.c_str(), "rgb(%d,%d,%d%c", &c[0], &c[1], &c[2], &end) == 4);
  CHECK(end == ')');
  return c;
}

}  // namespace

TEST_CASE("parse_folded: sums, sorts, tolerates CRLF and blank lines") {
  auto lines = parse_folded("b;x 2\r\na;y 1\n\na;y 4\nc 0\n");
  REQUIRE(lines.ok());
  REQUIRE(lines->size() == 2);
  CHECK((*lines)[0] == FoldedLine{"a;y", 5});
  CHECK((*lines)[1] == FoldedLine{"b;x", 2});
  // A frame name may contain spaces: the count is after the last one.
  auto spaced = parse_folded("app;operator new(unsigned long) 7");
  REQUIRE(spaced.ok());
  CHECK((*spaced)[0] == FoldedLine{"app;operator new(unsigned long)", 7});
  CHECK(parse_folded("")->empty());
}

TEST_CASE("parse_folded: errors name the line") {
  CHECK(parse_error("a;b 1\nnocount\n") == "line 2: no sample count (expected \"STACK COUNT\")");
  CHECK(parse_error("a;b 1\n\na;b x1\n") == "line 3: sample count \"x1\" is not an unsigned integer");
  CHECK(parse_error("a;b -1") == "line 1: sample count \"-1\" is not an unsigned integer");
  CHECK(parse_error("a;b 1.5") == "line 1: sample count \"1.5\" is not an unsigned integer");
  CHECK(parse_error("a;b ") == "line 1: sample count \"\" is not an unsigned integer");
  CHECK(parse_error(" 3") == "line 1: empty stack");
  CHECK(parse_error("a 18446744073709551616") == "line 1: sample count does not fit in 64 bits");
  CHECK(parse_error("a 18446744073709551615\na 1") == "line 2: sample counts overflow 64 bits");
  CHECK(parse_error("a 18446744073709551615\nb 18446744073709551615") == "");
  auto both = parse_folded("a 18446744073709551615\nb 18446744073709551615");
  CHECK_FALSE(render_flamegraph_svg(*both).ok());  // the total overflows
}

TEST_CASE("classify_flame_frame") {
  CHECK(classify_flame_frame("main") == FlameFrameKind::Function);
  CHECK(classify_flame_frame("sq_[i]") == FlameFrameKind::Inlined);
  CHECK(classify_flame_frame("do_syscall_64_[k]") == FlameFrameKind::Kernel);
  CHECK(classify_flame_frame("JS:*fib /x.js:1_[j]") == FlameFrameKind::Jit);
  CHECK(classify_flame_frame("fib.fib (fib.py:3)_[p]") == FlameFrameKind::Python);
  CHECK(classify_flame_frame("[unknown]") == FlameFrameKind::Unresolved);
  CHECK(classify_flame_frame("[truncated]") == FlameFrameKind::Unresolved);
  CHECK(classify_flame_frame("libfoo.so.1+0x1a2B") == FlameFrameKind::Unresolved);
  CHECK(classify_flame_frame("libfoo.so+0x") == FlameFrameKind::Function);
  CHECK(classify_flame_frame("+0x10") == FlameFrameKind::Function);
  CHECK(classify_flame_frame("a+0x10z") == FlameFrameKind::Function);
}

TEST_CASE("xml_escape: markup, invalid UTF-8, forbidden characters") {
  CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(xml_escape("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5") == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5");
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(xml_escape("x\xFFy") == "x" + fffd + "y");
  CHECK(xml_escape("\x01\t") == fffd + "\t");
  CHECK(xml_escape("\xC0\xAF") == fffd + fffd);               // overlong
  CHECK(xml_escape("\xED\xA0\x80") == fffd + fffd + fffd);    // surrogate
  CHECK(xml_escape("\xEF\xBF\xBE") == fffd);                // U+FFFE: well-formed but not allowed in XML
  CHECK(xml_escape("\xE2\x82") == fffd + fffd);               // truncated sequence
  CHECK(xml_escape(std::string("a\0b", 3)) == "a" + fffd + "b");
}

TEST_CASE("flame graph: boxes proportional to samples, exact tooltips") {
  const std::string svg = render("app;main;work 3\napp;main;idle 1\n");
  CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg ", 0) == 0);
  CHECK(count(svg, "<g data-s=") == 5);  // all, app, main, idle, work
  const std::string all = frame_element(svg, "all (");
  CHECK(all.find("<title>all (4 samples, 100.00%)</title>") != std::string::npos);
  CHECK(attribute(all, "rect", "x") == "10.00");
  CHECK(attribute(all, "rect", "width") == "1180.00");
  const std::string work = frame_element(svg, "work (");
  CHECK(work.find("<title>work (3 samples, 75.00%)</title>") != std::string::npos);
  CHECK(work.find("data-s=\"1\" data-n=\"3\" data-d=\"3\"") != std::string::npos);
  CHECK(attribute(work, "rect", "width") == "885.00");
  CHECK(attribute(work, "rect", "x") == "305.00");  // after "idle": children sorted by name
  const std::string idle = frame_element(svg, "idle (");
  CHECK(idle.find("<title>idle (1 sample, 25.00%)</title>") != std::string::npos);
  CHECK(attribute(idle, "rect", "x") == "10.00");
  CHECK(attribute(idle, "rect", "width") == "295.00");
  // Root at the bottom, one row (16 px) per depth.
  CHECK(std::stod(attribute(all, "rect", "y")) - std::stod(attribute(work, "rect", "y")) == 48);
  CHECK(label(work) == "work");
}

TEST_CASE("flame graph: labels are cut to fit, tiny frames are left out") {
  std::string folded = "app;" + std::string(200, 'x') + " 1000\napp;narrow_function_name 6\napp;tiny 0\n";
  folded += "app;dust 1\n";  // 1 of 1007 samples: 1.17 px, no room for a label
  const std::string svg = render(folded);
  const std::string wide = frame_element(svg, std::string(200, 'x') + " (");
  const std::string cut = label(wide);
  // 1171.75 px wide: floor((1171.75 - 6) / 7.08) = 164 characters, the last two "..".
  CHECK(cut == std::string(162, 'x') + "..");
  CHECK(label(frame_element(svg, "narrow_function_name (")) == "");  // 7.03 px
  CHECK(label(frame_element(svg, "dust (")).empty());
  CHECK(svg.find("<title>tiny") == std::string::npos);  // zero-count lines are dropped

  // A frame under 0.1 px (1 of 20000 samples = 0.059 px) is not drawn, nor its children.
  const std::string sparse = render("a;big 19999\na;small;child 1\n");
  CHECK(sparse.find("<title>small") == std::string::npos);
  CHECK(sparse.find("<title>child") == std::string::npos);
  CHECK(sparse.find("<title>big (19,999 samples, 100.00%)</title>") != std::string::npos);
}

TEST_CASE("flame graph: colours distinguish frame kinds") {
  const std::string svg = render(
      "app;main;sq_[i] 1\napp;main;sys_[k] 1\napp;main;libx.so+0x10 1\napp;[unknown] 1\napp;main;fib_[j] 1\n"
      "app;main;fib.fib (fib.py:3)_[p] 1\n");
  auto fill = [&](const std::string& tip) { return rgb(attribute(frame_element(svg, tip), "rect", "fill")); };
  auto inlined = fill("sq_[i] (");
  CHECK(inlined[0] < inlined[1]);  // aqua: green and blue dominate
  CHECK(inlined[1] == inlined[2]);
  auto kernel = fill("sys_[k] (");
  CHECK(kernel[2] == 0);  // orange
  CHECK(kernel[0] > kernel[1]);
  auto jit = fill("fib_[j] (");
  CHECK(jit[1] >= 200);  // green, as flamegraph.pl's java palette
  CHECK(jit[0] == jit[2]);
  CHECK(jit[0] < jit[1]);
  auto offset = fill("libx.so+0x10 (");
  CHECK((offset[0] == offset[1] && offset[1] == offset[2]));  // grey
  auto unknown = fill("[unknown] (");
  CHECK((unknown[0] == unknown[1] && unknown[1] == unknown[2]));
  auto function = fill("main (");
  CHECK(function[0] >= 200);  // red
  CHECK(function[1] == function[2]);
  CHECK(function[1] < function[0]);
  auto python = fill("fib.fib (fib.py:3)_[p] (");
  CHECK(python[0] >= 200);  // yellow: red and green high, blue low
  CHECK(python[1] >= 190);  // (red functions' green is below 130, orange kernel's below 160)
  CHECK(python[2] < 100);
  // The legend names the kind with its suffix.
  CHECK(svg.find(">Python _[p]</text>") != std::string::npos);
  // Labels drop the suffix; tooltips keep the exact frame.
  CHECK(label(frame_element(svg, "sq_[i] (")).find("_[i]") == std::string::npos);
  CHECK(label(frame_element(svg, "fib.fib (fib.py:3)_[p] (")).find("_[p]") == std::string::npos);
}

TEST_CASE("flame graph: names and title are escaped, output is self-contained and deterministic") {
  const std::string folded = "app;a<b>&\"c\";x\xFFy 2\napp;main 1\n";
  const std::string svg = render(folded, "<T&>");
  CHECK(svg.find("<text id=\"title\" x=\"600\" y=\"24\">&lt;T&amp;&gt;</text>") != std::string::npos);
  CHECK(svg.find("<title>a&lt;b&gt;&amp;&quot;c&quot; (2 samples, 66.67%)</title>") != std::string::npos);
  CHECK(svg.find("<title>x\xEF\xBF\xBDy (2 samples, 66.67%)</title>") != std::string::npos);
  CHECK(svg.find("a<b>") == std::string::npos);
  CHECK(svg.find("\xFF") == std::string::npos);
  // No external resources: no links, no imports, only the internal gradient.
  CHECK(svg.find("href") == std::string::npos);
  CHECK(svg.find("src=") == std::string::npos);
  CHECK(svg.find("@import") == std::string::npos);
  CHECK(count(svg, "url(") == 1);
  CHECK(svg.find("url(#background)") != std::string::npos);
  CHECK(count(svg, "<script") == 1);
  CHECK(render(folded, "<T&>") == svg);
  // Input order does not matter.
  CHECK(render("app;main 1\napp;a<b>&\"c\";x\xFFy 2\n", "<T&>") == svg);
}

TEST_CASE("flame graph: control characters cannot break the XML") {
  // Escaped names from folded_text stay readable; raw C0 controls (from
  // folded files written elsewhere) become U+FFFD, which XML allows.
  const std::string svg = render("app;lib\\x1b[2J.so+0x10;f\x1b\x07\x01 2\n");
  CHECK(svg.find("<title>lib\\x1b[2J.so+0x10 (2 samples, 100.00%)</title>") != std::string::npos);
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(svg.find("<title>f" + fffd + fffd + fffd + " (2 samples, 100.00%)</title>") != std::string::npos);
  for (char c : svg) {
    const auto byte = static_cast<unsigned char>(c);
    CHECK((byte >= 0x20 || byte == '\n'));
  }
  // A bad count is quoted escaped in the error, which goes to a terminal.
  CHECK(parse_error("a 1\x1b[2J") == "line 1: sample count \"1\\x1b[2J\" is not an unsigned integer");
}

TEST_CASE("flame graph: empty input and deep stacks") {
  const std::string empty = render("");
  CHECK(empty.find(">No samples</text>") != std::string::npos);
  CHECK(count(empty, "<g data-s=") == 0);
  // 20000 frames deep: no recursion, one row each.
  std::string deep = "app";
  for (int i = 0; i < 20000; ++i) deep += ";f" + std::to_string(i);
  const std::string svg = render(deep + " 1\n");
  CHECK(count(svg, "<g data-s=") == 20002);
  CHECK(svg.find("height=\"320120\"") != std::string::npos);  // 58 + 20002 * 16 + 30
}
