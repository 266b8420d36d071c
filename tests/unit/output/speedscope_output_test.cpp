// speedscope output: the document's shape (speedscope's file-format schema),
// frames named as the folded output names them, one sampled profile per
// thread with frame-index stacks root first and sample-count weights.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "userspace/output/speedscope_output.h"

using namespace gsymprof;

namespace {

const std::vector<uint8_t> kAppId = {0xcc, 0x01, 0x02, 0x03};
constexpr uint64_t kBias = 0x555500000000;

// main [0x1000,0x1100); foo [0x1100,0x1200) with bar inlined at [0x1110,0x1150).
GsymLocator make_locator() {
  gsym::Builder builder;
  builder.set_build_id(kAppId);
  uint32_t app_c = builder.add_file({"/src", "app.c"});
  uint32_t bar_h = builder.add_file({"/src", "bar.h"});
  gsym::Function main_fn;
  main_fn.range = {0x1000, 0x1100};
  main_fn.name = "main";
  main_fn.lines = {{0x1000, app_c, 10}};
  REQUIRE(builder.add_function(main_fn).ok());
  gsym::Function foo;
  foo.range = {0x1100, 0x1200};
  foo.name = "foo";
  foo.lines = {{0x1100, app_c, 5}, {0x1110, bar_h, 50}};
  gsym::InlineNode bar;
  bar.ranges = {{0x1110, 0x1150}};
  bar.name = "bar";
  bar.call_file = app_c;
  bar.call_line = 20;
  gsym::InlineNode root;
  root.ranges = {foo.range};
  root.name = foo.name;
  root.children = {bar};
  foo.inline_tree = root;
  REQUIRE(builder.add_function(foo).ok());
  auto bytes = builder.encode();
  REQUIRE(bytes.ok());
  LocatorOptions options;
  options.cache_dir = "";
  GsymLocator locator(options);
  REQUIRE(locator.add_gsym_bytes(*bytes, "app").ok());
  return locator;
}

Capture make_capture() {
  Capture capture;
  capture.host = "box";
  CaptureModule app;
  app.path = "/usr/bin/app";
  app.build_id = BuildId(kAppId);
  app.load_bias = kBias;
  app.mappings = {{kBias + 0x1000, kBias + 0x2000, 0x1000, "r-xp"}};
  capture.modules = {app};
  const CaptureFrame in_bar{0, 0x1120, UnresolvedReason::None}, in_main{0, 0x1050, UnresolvedReason::None};
  // pid 7: two threads; thread 8 renamed itself once.
  capture.stacks.push_back({7, "app", {in_bar, in_main}, false, 3, 7});
  capture.stacks.push_back({7, "app", {in_main}, false, 1, 7});
  capture.stacks.push_back({7, "worker", {in_main}, true, 5, 8});
  capture.stacks.push_back({7, "app", {in_bar, in_main}, false, 2, 8});
  capture.stacks.push_back({7, "app", {in_bar, in_main}, false, 0, 9});  // no samples: no thread
  capture.stacks.push_back({9, "other", {{-1, 0xdead, UnresolvedReason::NoMapping}}, false, 4, 0});
  capture.samples = 15;
  return capture;
}

nlohmann::json render() {
  GsymLocator locator = make_locator();
  auto out = speedscope_profile(make_capture(), locator, {});
  REQUIRE_MESSAGE(out.ok(), out.error().message);
  return nlohmann::json::parse(out->json);
}

// A profile's samples as frame names joined by ';', with their weights.
std::vector<std::string> samples(const nlohmann::json& doc, size_t profile) {
  std::vector<std::string> out;
  const auto& p = doc["profiles"][profile];
  REQUIRE(p["samples"].size() == p["weights"].size());
  for (size_t i = 0; i < p["samples"].size(); ++i) {
    std::string text;
    for (const auto& index : p["samples"][i])
      text += (text.empty() ? "" : ";") + doc["shared"]["frames"][index.get<size_t>()]["name"].get<std::string>();
    out.push_back(text + " " + std::to_string(p["weights"][i].get<uint64_t>()));
  }
  return out;
}

}  // namespace

TEST_CASE("speedscope: frames as in folded output, one sampled profile per thread") {
  const nlohmann::json doc = render();
  CHECK(doc["$schema"] == "https://www.speedscope.app/file-format-schema.json");
  CHECK(doc["exporter"] == "gsymprof");
  CHECK(doc["name"] == "gsymprof on box");
  CHECK(doc["activeProfileIndex"] == 0);
  const auto& frames = doc["shared"]["frames"];
  REQUIRE(frames.size() == 5);
  CHECK(frames[0] == nlohmann::json{{"name", "[truncated]"}});
  CHECK(frames[1] == nlohmann::json{{"name", "[unknown]"}});
  CHECK(frames[2] == nlohmann::json{{"name", "bar_[i]"}, {"file", "/src/bar.h"}});
  CHECK(frames[3] == nlohmann::json{{"name", "foo"}, {"file", "/src/app.c"}});
  CHECK(frames[4] == nlohmann::json{{"name", "main"}, {"file", "/src/app.c"}});

  REQUIRE(doc["profiles"].size() == 3);
  const auto& first = doc["profiles"][0];
  CHECK(first["type"] == "sampled");
  CHECK(first["name"] == "app pid 7 tid 7");
  CHECK(first["unit"] == "none");
  CHECK(first["startValue"] == 0);
  CHECK(first["endValue"] == 4);
  CHECK(samples(doc, 0) == std::vector<std::string>{"main 1", "main;foo;bar_[i] 3"});
  // Thread 8: named by its most common comm.
  CHECK(doc["profiles"][1]["name"] == "worker pid 7 tid 8");
  CHECK(doc["profiles"][1]["endValue"] == 7);
  CHECK(samples(doc, 1) == std::vector<std::string>{"[truncated];main 5", "main;foo;bar_[i] 2"});
  // A capture without threads (version 1): per process.
  CHECK(doc["profiles"][2]["name"] == "other pid 9");
  CHECK(samples(doc, 2) == std::vector<std::string>{"[unknown] 4"});
}

TEST_CASE("speedscope: the same capture gives the same bytes; the summary's modules") {
  GsymLocator locator = make_locator();
  auto a = speedscope_profile(make_capture(), locator, {});
  auto b = speedscope_profile(make_capture(), locator, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->json == b->json);
  CHECK(a->samples == 5);
  REQUIRE(a->symbolized.modules.size() == 1);
  CHECK(a->symbolized.modules[0].path == "/usr/bin/app");
  CHECK(a->symbolized.modules[0].resolved());
}

TEST_CASE("speedscope: Python frames named as folded but without _[p], with file and line") {
  GsymLocator locator = make_locator();
  Capture capture = make_capture();
  capture.python_frames = {{"<module>", "/app/fib.py", 0}, {"fib", "/app/fib.py", 3}};
  CaptureFrame fib, module;
  fib.python = 1;
  module.python = 0;
  capture.stacks = {{7, "python3", {fib, module, {0, 0x1050, UnresolvedReason::None}}, false, 2, 7}};
  capture.samples = 2;
  auto out = speedscope_profile(capture, locator, {});
  REQUIRE_MESSAGE(out.ok(), out.error().message);
  const auto doc = nlohmann::json::parse(out->json);
  const auto& frames = doc["shared"]["frames"];
  REQUIRE(frames.size() == 3);
  CHECK(frames[0] == nlohmann::json{{"name", "fib.<module> (fib.py)"}, {"file", "/app/fib.py"}});  // line 0: none
  CHECK(frames[1] == nlohmann::json{{"name", "fib.fib (fib.py:3)"}, {"file", "/app/fib.py"}, {"line", 3}});
  CHECK(frames[2] == nlohmann::json{{"name", "main"}, {"file", "/src/app.c"}});
  CHECK(samples(doc, 0) == std::vector<std::string>{"main;fib.<module> (fib.py);fib.fib (fib.py:3) 2"});
}

TEST_CASE("speedscope: --no-inline drops inlined frames; a name's files differ: no file; hostile names") {
  GsymLocator locator = make_locator();
  SymbolizeOptions options;
  options.inline_frames = false;
  Capture capture = make_capture();
  capture.stacks[0].comm = "a\x1b[2J\xff";
  // foo's own line (app.c) beside the address where bar was inlined, whose
  // line, without inline frames, is foo's in bar.h: one frame, no file.
  capture.stacks.push_back({7, "app", {{0, 0x1100, UnresolvedReason::None}, {0, 0x1050, UnresolvedReason::None}},
                            false, 1, 7});
  auto out = speedscope_profile(capture, locator, options);
  REQUIRE(out.ok());
  const auto doc = nlohmann::json::parse(out->json);
  for (const auto& frame : doc["shared"]["frames"]) CHECK(frame["name"] != "bar_[i]");
  CHECK(doc["shared"]["frames"][2] == nlohmann::json{{"name", "foo"}});
  CHECK(doc["shared"]["frames"][3] == nlohmann::json{{"name", "main"}, {"file", "/src/app.c"}});
  CHECK(doc["profiles"][0]["name"] == "a\\x1b[2J\\xff pid 7 tid 7");
  CHECK(out->json.find('\x1b') == std::string::npos);
}
