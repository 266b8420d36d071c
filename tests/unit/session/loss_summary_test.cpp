#include <doctest/doctest.h>

#include "userspace/report/loss_summary.h"

using namespace gsymprof;

TEST_CASE("loss summary: samples of processes gone before their maps were read, with their processes") {
  Capture capture;
  CaptureFrame gone;
  gone.reason = UnresolvedReason::ProcessGone;
  gone.address = 0x401000;
  CaptureFrame no_mapping;
  no_mapping.reason = UnresolvedReason::NoMapping;
  capture.stacks.push_back({11, "sha1sum", {gone}, false, 4});
  capture.stacks.push_back({11, "sha1sum", {gone, gone}, false, 1});  // one stack, counted once
  capture.stacks.push_back({12, "cut", {gone}, false, 2});
  capture.stacks.push_back({13, "bash", {no_mapping}, false, 9});      // not gone
  capture.stacks.push_back({14, "cut", {gone}, false, 0});             // no samples
  LossSummary losses = summarize_losses(capture);
  CHECK(losses.exited_samples == 7);
  CHECK(losses.exited_processes == 2);
}
