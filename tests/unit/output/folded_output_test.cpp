#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "userspace/output/folded_output.h"

using namespace gsymprof;

namespace {

SymbolizedFrame fn(std::string name, bool inlined = false) {
  SymbolizedFrame frame;
  frame.kind = FrameKind::Function;
  frame.name = std::move(name);
  frame.inlined = inlined;
  return frame;
}

// A result from stacks written out frame by frame: each distinct frame goes
// into the table once, as symbolize() stores it.
struct Stack {
  std::string comm;
  std::vector<SymbolizedFrame> frames;
  uint64_t count = 0;
};
SymbolizeResult result_of(const std::vector<Stack>& stacks) {
  SymbolizeResult result;
  for (const Stack& in : stacks) {
    SymbolizedStack out{in.comm, {}, in.count};
    for (const SymbolizedFrame& frame : in.frames) {
      auto it = std::find(result.frames.begin(), result.frames.end(), frame);
      if (it == result.frames.end()) it = result.frames.insert(it, frame);
      out.frames.push_back(static_cast<uint32_t>(it - result.frames.begin()));
    }
    result.stacks.push_back(std::move(out));
  }
  return result;
}

}  // namespace

TEST_CASE("folded: names cannot break frames or lines") {
  CHECK(sanitize_folded_name("a;b\nc\rd e") == "a:b\\x0ac\\x0dd e");
  CHECK(folded_frame(fn("inl;ined", true)) == "inl:ined_[i]");
  CHECK(folded_frame(fn("operator()", false)) == "operator()");
}

TEST_CASE("folded: frames are suffixed by kind; a Python frame's is _[p]") {
  SymbolizedFrame python;
  python.kind = FrameKind::Python;
  python.name = "fib.fib (fib.py:3)";
  python.file = "/app/fib.py";
  python.line = 3;
  CHECK(folded_frame(python) == "fib.fib (fib.py:3)_[p]");
  python.name = "odd;name\n (x.py:1)";  // a qualname or file may hold anything
  CHECK(folded_frame(python) == "odd:name\\x0a (x.py:1)_[p]");
  SymbolizedFrame jit = fn("JS:*fib /x.js:1");
  jit.kind = FrameKind::Jit;
  CHECK(folded_frame(jit) == "JS:*fib /x.js:1_[j]");
  SymbolizedFrame kernel = fn("ksys_read");
  kernel.kind = FrameKind::Kernel;
  CHECK(folded_frame(kernel) == "ksys_read_[k]");
  CHECK(folded_text(result_of({{"app", {fn("main"), python}, 2}})) == "app;main;odd:name\\x0a (x.py:1)_[p] 2\n");
}

TEST_CASE("folded: sorted bytewise, equal text merged, zero counts dropped") {
  std::vector<Stack> stacks = {
      {"b", {fn("main"), fn("work")}, 3},
      {"a", {fn("main"), fn("leaf", true)}, 2},
      {"a", {fn("main")}, 1},
      {"B", {fn("x")}, 4},
      {"a;x", {fn("main")}, 6},        // ';' in comm becomes ':'
      {"b", {fn("main"), fn("work")}, 5},
      {"c", {fn("main")}, 0},
  };
  // Same text from frames that differ only in line: one folded line.
  SymbolizedFrame at_line_7 = fn("work");
  at_line_7.line = 7;
  stacks.push_back({"b", {fn("main"), at_line_7}, 10});
  CHECK(folded_text(result_of(stacks)) ==
        "B;x 4\n"
        "a:x;main 6\n"
        "a;main 1\n"
        "a;main;leaf_[i] 2\n"
        "b;main;work 18\n");
  std::vector<FoldedLine> lines = fold_stacks(result_of(stacks));
  REQUIRE(lines.size() == 5);
  CHECK(lines[4] == FoldedLine{"b;main;work", 18});
}

TEST_CASE("folded: empty input, stacks without frames, non-ASCII bytes") {
  CHECK(folded_text({}) == "");
  // The same frame id in many stacks and twice in one.
  SymbolizeResult shared;
  shared.frames = {fn("main"), fn("loop", true)};
  shared.stacks = {{"a", {0, 1, 1}, 2}, {"b", {0, 1}, 3}, {"a", {0, 1, 1}, 1}};
  CHECK(folded_text(shared) == "a;main;loop_[i];loop_[i] 3\nb;main;loop_[i] 3\n");
  std::vector<Stack> stacks = {{"idle", {}, 2}, {"x", {fn("\xc3\xa9t\xc3\xa9"), fn("a")}, 1}};
  CHECK(folded_text(result_of(stacks)) == "idle 2\nx;\xc3\xa9t\xc3\xa9;a 1\n");
}

TEST_CASE("folded: control characters in comm and names are escaped") {
  // comm from prctl(PR_SET_NAME) or a capture's "\u0000", a module file name
  // with an escape sequence, a C1 CSI and a stray byte from a user's DWARF.
  std::vector<Stack> stacks = {
      {std::string("a\x1b]0;x\x07\0", 8),
       {fn("lib\x1b[2J.so+0x10"), fn("f\xc2\x9b" "1m"), fn("g\x7f\xff", true)},
       3},
  };
  const std::string text = folded_text(result_of(stacks));
  CHECK(text == "a\\x1b]0:x\\x07\\x00;lib\\x1b[2J.so+0x10;f\\xc2\\x9b1m;g\\x7f\\xff_[i] 3\n");
  for (char c : text.substr(0, text.size() - 1)) {
    CHECK(static_cast<unsigned char>(c) >= 0x20);
    CHECK(static_cast<unsigned char>(c) < 0x7f);
  }
  // A name can never add a line.
  CHECK(folded_text(result_of({{"x", {fn("a\nb 9\nfake;stack")}, 1}})) == "x;a\\x0ab 9\\x0afake:stack 1\n");
}

TEST_CASE("folded: order and merging equal the texts' bytewise order across frame boundaries") {
  // Names that are prefixes of each other, or end where another has ';',
  // '_' or a high byte: piecewise comparison must order exactly as the
  // whole texts compare. A naive fold (build each text, sort, merge) is the
  // oracle, over random stacks.
  const std::vector<std::string> names = {"a", "a_b", "ab", "a:b", "b", "", "a;b", "\xc3\xa9", "a\x7f"};
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<Stack> stacks;
    for (int s = 0, n = static_cast<int>(1 + next(12)); s < n; ++s) {
      Stack stack{next(2) ? "c" : "c;", {}, next(4)};
      for (uint64_t f = 0, depth = next(4); f < depth; ++f)
        stack.frames.push_back(fn(names[next(names.size())], next(3) == 0));
      stacks.push_back(stack);
    }
    const SymbolizeResult result = result_of(stacks);
    std::vector<FoldedLine> naive;
    for (const SymbolizedStack& stack : result.stacks) {
      if (stack.count == 0) continue;
      std::string text = sanitize_folded_name(stack.comm);
      for (uint32_t id : stack.frames) text += ";" + folded_frame(result.frames[id]);
      naive.push_back({text, stack.count});
    }
    std::sort(naive.begin(), naive.end(), [](const FoldedLine& a, const FoldedLine& b) { return a.stack < b.stack; });
    std::vector<FoldedLine> merged;
    for (const FoldedLine& line : naive)
      if (!merged.empty() && merged.back().stack == line.stack) merged.back().count += line.count;
      else merged.push_back(line);
    std::string text;
    for (const FoldedLine& line : merged) text += line.stack + " " + std::to_string(line.count) + "\n";
    REQUIRE(fold_stacks(result) == merged);
    REQUIRE(folded_text(result) == text);
  }
}
