// userspace/assemble/capture_assembler.h - stage: events -> a Capture. The
// one place that turns what a source saw into stacks of normalized frames,
// whichever source it was (the live sampler, a perf.data file).
//
// It keeps the process model (process_image.h: images, versions, modules),
// unwinds copied stacks with CFI while their modules are known
// (stack_copy_unwind.h), aggregates unique stacks (stack_aggregator.h),
// names JIT code from perf maps (and unwinds it with a jitdump's CFI), and counts what was lost by reason. A
// source differs only in the ProcSource it gives: the live one reads /proc
// and opens files through the processes' own view; the recorded one has no
// /proc and accepts a file only by its recorded build ID or device/inode.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/assemble/stack_aggregator.h"
#include "userspace/capture/capture.h"
#include "userspace/events/events.h"
#include "userspace/process/perf_map.h"
#include "userspace/process/process_image.h"
#include "userspace/unwind/stack_copy_unwind.h"

namespace gsymprof {

class CaptureAssembler final : public EventSink {
 public:
  explicit CaptureAssembler(ProcSource source, UnwindOptions unwind = {});
  CaptureAssembler(const CaptureAssembler&) = delete;
  CaptureAssembler& operator=(const CaptureAssembler&) = delete;

  void on_sample(const RawSample& sample) override { aggregator_.add(sample); }
  // Unwound now, while the process's modules are known.
  void on_stack_copy(const RawStackCopy& copy) override;
  void on_short_waits(const RawShortWaits& waits) override { aggregator_.add(waits); }
  void on_exec(uint32_t tgid, uint64_t mm) override {
    python_.forget(tgid);
    unwinder_.forget_jit_code(tgid);
    aggregator_.note_exec(tgid, mm);
  }
  void on_mapping(const RawMapping& mapping) override;
  void on_fork(uint32_t parent_tgid, uint32_t child_tgid, uint64_t child_mm) override {
    processes_.note_fork(parent_tgid, child_tgid, child_mm);
    // A CPython's child runs the same interpreter: read its frames from its first sample.
    if (python_.found(parent_tgid)) python_.note_image(processes_.current_image(child_tgid));
  }
  void on_exit(uint32_t tgid) override {
    python_.forget(tgid);
    unwinder_.forget_jit_code(tgid);
    processes_.note_exit(tgid);
  }
  void on_lost(std::string_view reason, uint64_t count) override;

  // The side-band keeps images complete: /proc is read again only once
  // `lost_events` is non-zero (see ProcessTable::use_sideband).
  void use_sideband(std::function<uint64_t()> lost_events) {
    processes_.use_sideband(std::move(lost_events));
  }
  // Sample times per stack (StackAggregator::keep_sample_times).
  void keep_sample_times(uint64_t origin_ns) { aggregator_.keep_sample_times(origin_ns); }
  // The sampling is over: images that missed an address are read again
  // (while the processes may live), and walks held for that are finished.
  void finish();
  // After finish(), when no stack copy follows (a one-shot profile or a
  // perf.data file): the unwinder's parsed CFI and cached rows (up to 32768
  // rows, 12.6 MB seen) are dropped before the capture is built beside the
  // aggregate.
  void release_unwinder() { unwinder_.forget_images(); }
  // Fills capture.modules, processes, stacks, samples and jit_symbols,
  // capture.lost with every reason on_lost counted (zeros too) and, when
  // `unwound` (stack copies were the call graph), capture.truncations with
  // the unwinder's ("unwind_<reason>", kept samples).
  void build(Capture& capture, JitReport* jit, bool unwound) const;

  // The agent's next window, after build(): stacks, losses and the
  // unwinder's counts start again; with `compact` the process table keeps
  // only live processes (call finish() first: nothing may be held).
  void next_window(bool compact);

  ProcessTable& processes() { return processes_; }
  const StackAggregator& aggregator() const { return aggregator_; }
  std::vector<StackAggregator::ModuleUse> take_new_module_uses() {
    return aggregator_.take_new_module_uses();
  }
  const StackCopyUnwinder& unwinder() const { return unwinder_; }
  PerfMaps& perf_maps() { return perf_maps_; }
  PythonStacks& python() { return python_; }
  const PythonStacks& python() const { return python_; }

 private:
  ProcessTable processes_;
  PerfMaps perf_maps_;
  PythonStacks python_{processes_};
  StackAggregator aggregator_;
  StackCopyUnwinder unwinder_;
  std::map<std::string, uint64_t, std::less<>> lost_;
  SampleCallback add_ = [this](const RawSample& sample) { aggregator_.add(sample); };
};

}  // namespace gsymprof
