// JSON output (--format json): each frame's fields, a Python frame's kind,
// file and line.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "userspace/output/json_output.h"

using namespace gsymprof;

TEST_CASE("json: every frame kind has its name") {
  CHECK(std::string(frame_kind_name(FrameKind::Function)) == "function");
  CHECK(std::string(frame_kind_name(FrameKind::Jit)) == "jit");
  CHECK(std::string(frame_kind_name(FrameKind::OffCpu)) == "off-cpu");
  CHECK(std::string(frame_kind_name(FrameKind::Python)) == "python");
}

TEST_CASE("json: a Python frame has kind \"python\", its file and line, no module") {
  SymbolizeResult result;
  SymbolizedFrame main_fn;
  main_fn.kind = FrameKind::Function;
  main_fn.name = "main";
  main_fn.module_path = "/usr/bin/python3";
  SymbolizedFrame python;
  python.kind = FrameKind::Python;
  python.name = "fib.fib (fib.py:3)";
  python.file = "/app/fib.py";
  python.line = 3;
  result.frames = {main_fn, python};
  result.stacks = {{"python3", {0, 1}, 5}};
  const std::string text = symbolized_json(result);
  CHECK(text.find("{\"name\":\"fib.fib (fib.py:3)\",\"kind\":\"python\",\"file\":\"/app/fib.py\",\"line\":3,"
                  "\"inlined\":false,\"module\":\"\",\"build_id\":\"\"}") != std::string::npos);
  const nlohmann::json doc = nlohmann::json::parse(text);
  CHECK(doc["samples"] == 5);
  CHECK(doc["stacks"][0]["frames"][1]["kind"] == "python");
}
