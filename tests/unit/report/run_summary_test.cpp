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

TEST_CASE("run summary: a runtime that would name its code with a flag says which, once") {
  Capture capture;
  for (const char* path : {"/usr/bin/node", "/usr/lib/jvm/java-17/lib/server/libjvm.so",
                           "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", "/usr/bin/python3.11",
                           "/usr/local/bin/python3.13", "/usr/bin/python3.12"}) {
    CaptureModule module;
    module.path = path;
    capture.modules.push_back(module);
  }
  // node 10: unnamed JIT code; node 11: named from its perf map; a JVM with
  // unnamed JIT code; python 3.12 without a perf map; python 3.11 (no -X
  // perf to give); python 3.13 with its perf map; python 3.12 with Python
  // frames read from the interpreter.
  capture.processes = {{10, "node", {0}}, {11, "node", {0}}, {12, "java", {1}},
                       {13, "python3", {2}}, {14, "python3", {3}}, {15, "python3", {4}},
                       {16, "python3", {5}}};
  CaptureFrame anonymous;
  anonymous.reason = UnresolvedReason::AnonymousMapping;
  anonymous.address = 0x7e0000001000;
  CaptureFrame named = anonymous;
  named.jit = 0;
  capture.jit_symbols = {{0x7e0000001000, 0x7e0000002000, "JS:*f"}};
  auto stack = [&](uint32_t pid, int32_t module, std::vector<CaptureFrame> extra) {
    CaptureStack s;
    s.pid = pid;
    s.count = 3;
    s.frames = std::move(extra);
    s.frames.push_back(in_module(module, 0x1000));
    capture.stacks.push_back(s);
  };
  stack(10, 0, {anonymous});
  stack(11, 0, {named});
  stack(12, 1, {anonymous});
  stack(13, 2, {});
  stack(14, 3, {});
  stack(15, 4, {named});
  CaptureFrame python;
  python.python = 0;
  capture.python_frames = {{"f", "/app/f.py", 1}};
  stack(16, 5, {python});
  RunSummary summary = summarize_run("profile", capture);
  CHECK(summary.runtimes_to_flag ==
        std::map<std::string, std::vector<uint32_t>>{{"java", {12}}, {"node", {10}}, {"python3.12", {13}}});
  CHECK(has_hint(summary, "runtime_node"));
  CHECK(has_hint(summary, "runtime_java"));
  CHECK(has_hint(summary, "runtime_python"));
  for (const Hint& hint : summary_hints(summary))
    if (hint.key == "runtime_python") CHECK(hint.message.find("python3.12 (pid 13): ") == 0);
}
