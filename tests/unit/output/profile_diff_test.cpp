// gsymprof diff's model and outputs: normalization, per-function self and
// total changes and their ranking, the text and JSON tables, FlameGraph's
// differential colours, tooltips and the negated view.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "userspace/output/flamegraph.h"
#include "userspace/output/profile_diff.h"

using namespace gsymprof;

namespace {

std::vector<FoldedLine> folded(std::string_view text) {
  auto lines = parse_folded(text);
  REQUIRE_MESSAGE(lines.ok(), lines.error().message);
  return *lines;
}

ProfileDiff compare(std::string_view base, std::string_view after, bool normalize = true) {
  auto diff = diff_profiles("base.folded", folded(base), "new.folded", folded(after), normalize);
  REQUIRE_MESSAGE(diff.ok(), diff.error().message);
  return *diff;
}

const FunctionChange& function(const ProfileDiff& diff, const std::string& name) {
  for (const FunctionChange& f : diff.functions)
    if (f.name == name) return f;
  FAIL("no function " << name);
  return diff.functions.front();
}

// The <g> of the frame whose tooltip starts with "NAME (".
std::string frame_element(const std::string& svg, const std::string& name) {
  size_t at = svg.find("<title>" + name + " (");
  if (at == std::string::npos) return "";
  size_t begin = svg.rfind("<g ", at), end = svg.find("</g>", at);
  return svg.substr(begin, end + 4 - begin);
}

std::string fill(const std::string& element) {
  size_t at = element.find(" fill=\"");
  if (at == std::string::npos) return "";
  at += 7;
  return element.substr(at, element.find('"', at) - at);
}

std::string tooltip(const std::string& element) {
  size_t at = element.find("<title>") + 7;
  return element.substr(at, element.find("</title>") - at);
}

// BASE: hot 25%, cold 25%, steady 50% of 100; NEW: hot 4x, the rest equal,
// 200 samples (hot 70%, cold 10%, steady 20%... with main's own 0).
constexpr std::string_view kBase =
    "app;main;hot 25\n"
    "app;main;cold 25\n"
    "app;main;steady 50\n";
constexpr std::string_view kNew =
    "app;main;hot 100\n"
    "app;main;cold 25\n"
    "app;main;steady 50\n"
    "app;main;fresh 25\n";

}  // namespace

TEST_CASE("diff: BASE scaled to NEW's total; self and total changes per function") {
  const ProfileDiff diff = compare(kBase, kNew);
  CHECK(diff.base_samples == 100);
  CHECK(diff.new_samples == 200);
  CHECK(diff.normalized);
  CHECK(diff.base_scale == doctest::Approx(2.0));
  const FunctionChange& hot = function(diff, "hot");
  CHECK(hot.base_self == 25);
  CHECK(hot.new_self == 100);
  CHECK(hot.self_change == doctest::Approx(50));  // 100 - 25 x 2
  CHECK(hot.total_change == doctest::Approx(50));
  CHECK(function(diff, "cold").self_change == doctest::Approx(-25));
  CHECK(function(diff, "steady").self_change == doctest::Approx(-50));
  CHECK(function(diff, "fresh").self_change == doctest::Approx(25));
  CHECK(function(diff, "fresh").base_total == 0);
  CHECK(function(diff, "main").total_change == doctest::Approx(0));
  CHECK(function(diff, "main").self_change == doctest::Approx(0));
  // Largest |self change| first; equal ones by |total change|, then by name.
  std::vector<std::string> order;
  for (const FunctionChange& f : diff.functions) order.push_back(f.name);
  CHECK(order == std::vector<std::string>{"hot", "steady", "cold", "fresh", "app", "main"});
}

TEST_CASE("diff: --no-normalize compares raw counts; an empty side is not scaled") {
  const ProfileDiff raw = compare(kBase, kNew, /*normalize=*/false);
  CHECK_FALSE(raw.normalized);
  CHECK(raw.base_scale == 1);
  CHECK(function(raw, "hot").self_change == doctest::Approx(75));
  CHECK(function(raw, "cold").self_change == doctest::Approx(0));
  // Every caller's total grew with the run: self changes first.
  std::vector<std::string> order;
  for (const FunctionChange& f : raw.functions) order.push_back(f.name);
  CHECK(order == std::vector<std::string>{"hot", "fresh", "app", "main", "cold", "steady"});

  auto empty = diff_profiles("a", {}, "b", folded(kNew), true);
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->normalized);
  CHECK(empty->base_scale == 1);
  CHECK(diff_text(*empty).find("counts not normalized: BASE has no samples") != std::string::npos);
}

TEST_CASE("diff: a recursing function counts once per stack in its total") {
  const ProfileDiff diff = compare("p;f;f;f 10\np;g 10\n", "p;f;f 10\np;g 30\n");
  const FunctionChange& f = function(diff, "f");
  CHECK(f.base_total == 10);
  CHECK(f.new_total == 10);
  CHECK(f.base_self == 10);
  CHECK(function(diff, "p").base_total == 20);
}

TEST_CASE("diff: unsorted input with repeated stacks is summed; overflow is an error") {
  auto diff = diff_profiles("a", {{"x;b", 1}, {"x;a", 2}, {"x;b", 3}}, "b", {{"x;a", 1}}, true);
  REQUIRE(diff.ok());
  CHECK(diff->base_stacks == std::vector<FoldedLine>{{"x;a", 2}, {"x;b", 4}});
  auto overflow = diff_profiles("a", {{"x", UINT64_MAX}, {"y", 1}}, "b", {}, true);
  REQUIRE_FALSE(overflow.ok());
  CHECK(overflow.error().message == "BASE: sample counts overflow 64 bits");
}

TEST_CASE("diff: text table, header naming the normalization, names escaped") {
  const std::string text = diff_text(compare(kBase, kNew));
  CHECK(text.starts_with("gsymprof diff: BASE base.folded, 100 samples; NEW new.folded, 200 samples\n"
                         "BASE's counts scaled x2.000000 to NEW's total (--no-normalize compares raw counts)\n"));
  // hot: self 25% -> 50%, +25 points; +50 samples.
  CHECK(text.find("   25.00   50.00  +25.00     25.00   50.00  +25.00       +50.0       +50.0  hot\n") !=
        std::string::npos);
  CHECK(text.find("   50.00   25.00  -25.00     50.00   25.00  -25.00       -50.0       -50.0  steady\n") !=
        std::string::npos);
  const std::string nasty = diff_text(compare("a;e\x1b[31m 1\n", "a;e\x1b[31m 2\n"));
  CHECK(nasty.find('\x1b') == std::string::npos);
  CHECK(nasty.find("e\\x1b[31m") != std::string::npos);
}

TEST_CASE("diff: JSON has stable fields, ranked functions, equal bytes for equal input") {
  const std::string json = diff_json(compare(kBase, kNew));
  CHECK(json == diff_json(compare(kBase, kNew)));
  const auto doc = nlohmann::json::parse(json);
  CHECK(doc["format"] == "gsymprof-diff");
  CHECK(doc["version"] == 1);
  CHECK(doc["base"]["file"] == "base.folded");
  CHECK(doc["base"]["samples"] == 100);
  CHECK(doc["new"]["samples"] == 200);
  CHECK(doc["normalized"] == true);
  CHECK(doc["base_scale"].get<double>() == doctest::Approx(2));
  const auto& hot = doc["functions"][0];
  CHECK(hot["name"] == "hot");
  CHECK(hot["self_base"] == 25);
  CHECK(hot["self_new"] == 100);
  CHECK(hot["self_change"].get<double>() == doctest::Approx(50));
  CHECK(hot["self_base_percent"].get<double>() == doctest::Approx(25));
  CHECK(hot["self_new_percent"].get<double>() == doctest::Approx(50));
  CHECK(hot["self_change_percent"].get<double>() == doctest::Approx(25));
  CHECK(hot["total_base"] == 25);
  CHECK(hot["total_new"] == 100);
  CHECK(hot["total_change"].get<double>() == doctest::Approx(50));
  CHECK(hot["total_change_percent"].get<double>() == doctest::Approx(25));
  CHECK(doc["functions"].size() == 6);
  // No "-0.000": unchanged values print as 0.
  CHECK(json.find("-0.0") == std::string::npos);
}

TEST_CASE("diff: FlameGraph's colour scale") {
  CHECK(diff_color(10, 10) == "rgb(255,0,0)");
  CHECK(diff_color(-10, 10) == "rgb(0,0,255)");
  CHECK(diff_color(5, 10) == "rgb(255,105,105)");
  CHECK(diff_color(-2.5, 10) == "rgb(157,157,255)");  // int(210 x 7.5 / 10)
  CHECK(diff_color(0, 10) == "rgb(255,255,255)");
  CHECK(diff_color(0, 0) == "rgb(255,255,255)");
  CHECK(diff_color(1e-12, 10) == "rgb(255,255,255)");
}

TEST_CASE("diff: the flame graph colours frames by their self change, widths from NEW") {
  const ProfileDiff diff = compare(kBase, kNew);
  auto svg = diff_flamegraph_svg(diff, /*negate=*/false);
  REQUIRE(svg.ok());
  // Largest |self change| 50: hot +50 is full red, steady -50 full blue,
  // cold -25 and fresh +25 half-way, main and app (no self samples) white.
  CHECK(fill(frame_element(*svg, "hot")) == "rgb(255,0,0)");
  CHECK(fill(frame_element(*svg, "steady")) == "rgb(0,0,255)");
  CHECK(fill(frame_element(*svg, "cold")) == "rgb(105,105,255)");
  CHECK(fill(frame_element(*svg, "fresh")) == "rgb(255,105,105)");
  CHECK(fill(frame_element(*svg, "main")) == "rgb(255,255,255)");
  CHECK(tooltip(frame_element(*svg, "hot")) ==
        "hot (new 100 samples 50.00%, base 25 samples 25.00%, self change +50.0)");
  CHECK(tooltip(frame_element(*svg, "all")) ==
        "all (new 200 samples 100.00%, base 100 samples 100.00%, self change +0.0)");
  CHECK(svg->find("data-total=\"200\"") != std::string::npos);
  CHECK(svg->find("BASE x2.0000 to NEW&#39;s total") != std::string::npos);
  CHECK(*svg == *diff_flamegraph_svg(diff, false));
}

TEST_CASE("diff: the negated graph draws BASE's widths, so vanished frames show, blue") {
  const ProfileDiff diff = compare("p;gone 30\np;kept 10\n", "p;kept 10\n");
  auto normal = diff_flamegraph_svg(diff, false);
  auto negated = diff_flamegraph_svg(diff, true);
  REQUIRE(normal.ok());
  REQUIRE(negated.ok());
  CHECK(frame_element(*normal, "gone").empty());
  const std::string gone = frame_element(*negated, "gone");
  REQUIRE_FALSE(gone.empty());
  // gone: 30 x (10 / 40) = 7.5 scaled away, the largest change: full blue.
  CHECK(fill(gone) == "rgb(0,0,255)");
  CHECK(tooltip(gone) == "gone (new 0 samples 0.00%, base 30 samples 75.00%, self change -7.5)");
  // kept: 10 - 10 x 0.25 = +7.5: red as in the normal view.
  CHECK(fill(frame_element(*negated, "kept")) == "rgb(255,0,0)");
  CHECK(fill(frame_element(*normal, "kept")) == "rgb(255,0,0)");
  CHECK(negated->find("data-total=\"40\"") != std::string::npos);
  CHECK(negated->find("negated: widths from BASE") != std::string::npos);
}

TEST_CASE("flame graph: a frame_style hook sees each drawn frame's folded prefix; a given legend") {
  auto stacks = parse_folded("a;b;c 2\na;d 1\nz 1\n");
  REQUIRE(stacks.ok());
  std::vector<std::string> seen;
  FlamegraphOptions options;
  options.frame_style = [&](std::string_view stack, uint64_t samples) {
    seen.push_back(std::string(stack) + "=" + std::to_string(samples));
    return FlameFrameStyle{"rgb(1,2,3)", "detail <" + std::string(stack) + ">"};
  };
  options.legend = {{"swatch", "rgb(9,9,9)"}, {"a note", ""}};
  auto svg = render_flamegraph_svg(*stacks, options);
  REQUIRE(svg.ok());
  CHECK(seen == std::vector<std::string>{"=4", "a=3", "a;b=2", "a;b;c=2", "a;d=1", "z=1"});
  CHECK(fill(frame_element(*svg, "c")) == "rgb(1,2,3)");
  CHECK(tooltip(frame_element(*svg, "c")) == "c (detail &lt;a;b;c&gt;)");
  CHECK(svg->find(">swatch</text>") != std::string::npos);
  CHECK(svg->find(">a note</text>") != std::string::npos);
  CHECK(svg->find(">inlined _[i]</text>") == std::string::npos);
}
