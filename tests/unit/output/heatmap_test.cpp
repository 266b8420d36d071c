// heatmap page: the data block (frames named as folded output names them,
// threads as lanes, each stack's samples counted per time cell), names that
// cannot end the script block, and the errors.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/unit/inline_app_gsym.h"
#include "userspace/output/heatmap.h"

using namespace gsymprof;

namespace {

constexpr uint64_t kBias = 0x555500000000;

Capture make_capture() {
  Capture capture;
  capture.host = "box";
  capture.duration_ns = 2500000000;  // 2.5 s: three columns
  CaptureModule app;
  app.path = "/usr/bin/app";
  app.build_id = BuildId(test::kInlineAppId);
  app.load_bias = kBias;
  app.mappings = {{kBias + 0x1000, kBias + 0x2000, 0x1000, "r-xp"}};
  capture.modules = {app};
  const CaptureFrame in_bar{0, 0x1120, UnresolvedReason::None}, in_main{0, 0x1050, UnresolvedReason::None};
  CaptureStack hot{7, "app", {in_bar, in_main}, false, 3, 7};
  hot.times_us = {10, 60000, 1000001};  // cells 0 and 1 of second 0, cell 0 of second 1
  CaptureStack worker{7, "</script><b>", {in_main}, true, 2, 8};
  worker.times_us = {2400000, 2400001};
  CaptureStack untimed{9, "other", {in_main}, false, 4, 9};
  capture.stacks = {hot, worker, untimed};
  capture.samples = 9;
  return capture;
}

nlohmann::json data_of(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"heatmap-data\">";
  const size_t start = html.find(open);
  REQUIRE(start != std::string::npos);
  const size_t end = html.find("</script>", start);
  REQUIRE(end != std::string::npos);
  return nlohmann::json::parse(html.substr(start + open.size(), end - start - open.size()));
}

}  // namespace

TEST_CASE("heatmap: folded names, threads as lanes, samples per time cell") {
  GsymLocator locator = test::inline_app_locator();
  auto page = heatmap_page(make_capture(), locator, {}, {});
  REQUIRE_MESSAGE(page.ok(), page.error().message);
  CHECK(page->samples == 5);
  CHECK(page->untimed_samples == 4);
  CHECK(page->stacks == 2);
  const nlohmann::json data = data_of(page->html);
  CHECK(data["rows"] == 20);
  CHECK(data["slice_us"] == 50000);
  CHECK(data["columns"] == 3);
  CHECK(data["samples"] == 5);
  CHECK(data["frames"] == nlohmann::json{"</script><b>", "[truncated]", "app", "bar_[i]", "foo(int)", "main"});
  CHECK(data["lanes"] == nlohmann::json::parse(R"([[7,7,"app"],[7,8,"</script><b>"]])"));
  // Root first, comm first; cells second * 20 + slice.
  CHECK(data["stacks"] == nlohmann::json::parse(R"([[0,[2,5,4,3],[0,1,1,1,20,1]],[1,[0,1,5],[48,2]]])"));
  // The comm is data: it cannot end the script block.
  CHECK(page->html.find("</script><b>") == std::string::npos);
  CHECK(page->html.find("\\u003c/script\\u003e\\u003cb\\u003e") != std::string::npos);
  CHECK(page->html.find("http://") == std::string::npos);
  CHECK(page->html.find("https://") == std::string::npos);

  // Slices that do not divide a second: the last one is shorter.
  auto coarse = heatmap_page(make_capture(), locator, {}, {300, "t"});
  REQUIRE(coarse.ok());
  const nlohmann::json coarse_data = data_of(coarse->html);
  CHECK(coarse_data["rows"] == 4);
  CHECK(coarse_data["stacks"][1][2] == nlohmann::json{9, 2});  // 2.4 s: second 2, slice 1
}

TEST_CASE("heatmap: a capture without times, and slices out of range, are errors") {
  GsymLocator locator = test::inline_app_locator();
  Capture capture = make_capture();
  for (CaptureStack& stack : capture.stacks) stack.times_us.clear();
  auto page = heatmap_page(capture, locator, {}, {});
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().message.find("no sample times in this capture") == 0);
  for (uint32_t slice_ms : {0u, 1001u}) {
    auto bad = heatmap_page(make_capture(), locator, {}, {slice_ms, "t"});
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message == "slice of " + std::to_string(slice_ms) + " ms: must be 1 to 1000 ms");
  }
}
