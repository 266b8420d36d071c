// The summary's facts and hints, from captures built by hand.
#include <doctest/doctest.h>

#include <string>

#include "userspace/report/run_summary.h"

using namespace gsymprof;

namespace {

CaptureFrame in_module(int32_t module, uint64_t address) {
  CaptureFrame frame;
  frame.module = module;
  frame.address = address;
  return frame;
}

Capture two_module_capture(CallGraph call_graph) {
  Capture capture;
  capture.call_graph = call_graph;
  CaptureModule app;
  app.path = "/opt/app/nofp";
  CaptureModule libc;
  libc.path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  capture.modules = {app, libc};
  capture.processes.push_back({7, "nofp", {0, 1}});
  return capture;
}

bool has_hint(const RunSummary& summary, const std::string& key) {
  for (const Hint& hint : summary_hints(summary))
    if (hint.key == key) return true;
  return false;
}

}  // namespace

TEST_CASE("run summary: most stacks shallow under frame pointers is a hint naming the module and the remedy") {
  Capture capture = two_module_capture(CallGraph::FramePointer);
  CaptureFrame kernel;
  kernel.kernel = true;
  // 90 samples of one user frame (kernel frames do not count), 10 deep ones.
  capture.stacks.push_back({7, "nofp", {kernel, in_module(0, 0x1010)}, false, 90});
  capture.stacks.push_back(
      {7, "nofp", {in_module(0, 0x1010), in_module(0, 0x1100), in_module(0, 0x1200), in_module(1, 0x2000)}, false, 10});
  capture.samples = 100;
  RunSummary summary = summarize_run("profile", capture);
  CHECK(summary.user_samples == 100);
  CHECK(summary.shallow_samples == 90);
  REQUIRE(!summary.shallow_ends.empty());
  CHECK(summary.shallow_ends.front().module == "nofp");
  std::string message;
  for (const Hint& hint : summary_hints(summary))
    if (hint.key == "shallow_stacks") message = hint.message;
  CHECK(message.find("90%") != std::string::npos);
  CHECK(message.find("nofp (100%)") != std::string::npos);
  CHECK(message.find("lacks frame pointers") != std::string::npos);
  CHECK(message.find("--call-graph dwarf") != std::string::npos);

  // The same stacks from the CFI unwinder, or too few samples: no hint.
  capture.call_graph = CallGraph::Dwarf;
  CHECK_FALSE(has_hint(summarize_run("profile", capture), "shallow_stacks"));
  capture.call_graph = CallGraph::FramePointer;
  capture.stacks[0].count = 9;
  capture.stacks[1].count = 1;
  CHECK_FALSE(has_hint(summarize_run("profile", capture), "shallow_stacks"));
  // symbolize (perf record -g) names perf's remedy.
  capture.stacks[0].count = 90;
  for (const Hint& hint : summary_hints(summarize_run("symbolize", capture)))
    if (hint.key == "shallow_stacks") CHECK(hint.message.find("perf record --call-graph dwarf") != std::string::npos);
}

TEST_CASE("run summary: stacks cut for lack of CFI name the module they end in") {
  Capture capture = two_module_capture(CallGraph::Dwarf);
  capture.lost = {{"ringbuf_full", 0}};
  capture.truncations = {{"unwind_no_cfi_for_module", 5}, {"unwind_loop", 0}};
  capture.stacks.push_back({7, "nofp", {in_module(1, 0x2000), in_module(0, 0x1100)}, true, 5});
  capture.stacks.push_back(
      {7, "nofp", {in_module(1, 0x2000), in_module(1, 0x2100), in_module(1, 0x2200), in_module(1, 0x2300)}, false, 20});
  capture.samples = 25;
  const RunSummary summary = summarize_run("profile", capture);
  CHECK(summary.losses.lost == 0);
  CHECK(summary.losses.truncated == 5);
  REQUIRE(summary.no_cfi_ends.size() == 1);
  CHECK(summary.no_cfi_ends.front().module == "nofp");
  bool found = false;
  for (const Hint& hint : summary_hints(summary))
    if (hint.key == "no_cfi") {
      found = true;
      CHECK(hint.message.find("5 stacks end in code without CFI") != std::string::npos);
      CHECK(hint.message.find("in nofp (100%)") != std::string::npos);
      CHECK(hint.message.find("-fasynchronous-unwind-tables") != std::string::npos);
    }
  CHECK(found);
}

TEST_CASE("run summary: the JSON has every key, zero counters included") {
  Capture capture = two_module_capture(CallGraph::Dwarf);
  capture.lost = {{"ringbuf_full", 0}};
  capture.truncations = {{"unwind_loop", 0}};
  capture.samples = 0;
  RunSummary summary = summarize_run("symbolize", capture);
  summary.files.push_back({"/tmp/out.folded", "folded stacks"});
  const std::string json = run_summary_json(summary);
  for (const char* key : {"\"format\":\"gsymprof-stats\"", "\"samples_taken\":null", "\"samples\":0",
                          "\"lost\":0", "\"lost_by_reason\":{\"ringbuf_full\":0}",
                          "\"truncated_by_reason\":{\"unwind_loop\":0}", "\"processes\":1",
                          "\"modules\":2", "\"call_graph\":\"dwarf\"", "\"hints\":[]",
                          "\"files\":[{\"path\":\"/tmp/out.folded\",\"what\":\"folded stacks\"}]",
                          "\"command_exit\":null"})
    CHECK_MESSAGE(json.find(key) != std::string::npos, key);
}

TEST_CASE("leaves_frames_unnamed: unresolved, or resolved from symbols alone with frames no symbol covers") {
  ModuleReport report;
  CHECK(leaves_frames_unnamed(report));  // unresolved
  report.origin = GsymOrigin::Cache;
  CHECK_FALSE(leaves_frames_unnamed(report));
  report.symbols_only = true;
  CHECK_FALSE(leaves_frames_unnamed(report));
  report.unnamed_frames = 3;
  CHECK(leaves_frames_unnamed(report));
}
