// userspace/assemble/python_stacks.h - stage: a CPython process's interpreter
// frames, named and put where the interpreter ran them.
//
// The sampler reads, with each sample of a CPython process, the thread's
// chain of interpreter frames (events.h, PythonStackRef): code objects in
// the process's memory. Here each is named while the process runs
// (python_runtime.h: qualname, file, line) and the chain is cut into runs,
// one per native _PyEval_EvalFrameDefault call (a run ends at the frame the
// eval loop was entered at). The native frames of those calls are replaced
// by their runs, innermost first, as py-spy --native does: native frames
// above and below stay, so a C extension shows under the Python function
// that called it. When the runs and the native eval frames do not pair up
// one to one (the sample fell inside the eval loop's entry or exit, or a
// name could not be read) the native stack is kept as it is, and counted:
// a wrong Python frame is worse than none.
//
// Which processes are CPython is learnt from their modules (ModuleIdentity::
// python): the first sample of a process image with a runtime whose version
// has a layout table reports it (on_found) so the sampler starts reading its
// frames; a version without a table is counted by version.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "userspace/capture/capture.h"
#include "userspace/events/events.h"
#include "userspace/process/process_image.h"
#include "userspace/process/python_runtime.h"

namespace gsymprof {

// What happened to Python stacks, for the summary.
struct PythonReport {
  uint64_t samples_with_python = 0;  // samples that came with Python frames
  uint64_t samples_merged = 0;       // ... whose runs replaced their eval frames
  uint64_t samples_unpaired = 0;     // ... kept native: runs and eval frames did not pair
  uint64_t samples_unnamed = 0;      // ... kept native: a code object could not be named
  uint64_t samples_cut = 0;          // merged, but deeper than the sampler keeps: cut there
  uint64_t processes = 0;            // CPython processes whose frames were read
  // Versions seen without a layout ("3.14"): their frames stay native.
  std::map<std::string, uint64_t> unsupported_versions;  // version -> processes
};

class PythonStacks {
 public:
  explicit PythonStacks(ProcessTable& processes) : processes_(processes) {}

  // Where to say that a process's Python frames can be read (the live
  // sampler starts reading them), and that they no longer can (exec, exit).
  std::function<void(uint32_t pid, const PythonWalk& walk)> on_found;
  std::function<void(uint32_t pid)> on_gone;

  // A sample of image `image_id` is about to be aggregated: the first one
  // of an image looks for a CPython runtime in it.
  void note_image(uint32_t image_id);

  // The sample's user frames with its Python runs in place of the eval
  // frames they ran (Python frames as tagged values, is_frame/frame_id), or
  // an empty span: keep sample.ips as they are. Valid until the next call.
  // A Python stack deeper than the sampler keeps (its last run cut) ends
  // at its outermost kept frame: `cut_short`, the stack is truncated there.
  std::span<const uint64_t> merge(const RawSample& sample, uint32_t image_id, bool* cut_short);

  // A merged stack's entry is a Python frame (not an address).
  static bool is_frame(uint64_t value) { return (value & kTag) == kTag; }
  static uint32_t frame_id(uint64_t value) { return static_cast<uint32_t>(value); }
  const PythonFrame& frame(uint32_t id) const { return names_[id]; }

  void forget(uint32_t pid);
  // Whether `pid`'s frames are read (on_found was called for it).
  bool found(uint32_t pid) const;
  // The agent's next window, images renumbered: forget what was learnt per image.
  void clear_images() { images_.clear(); }
  // No stack refers to a frame id any more (the aggregator was cleared).
  void clear_names();
  const PythonReport& report() const { return report_; }
  const PythonCodeNamer& namer() const { return namer_; }

 private:
  // Above every user address (x86-64 user space ends below 2^47).
  static constexpr uint64_t kTag = 0xC000000000000000ull;
  struct ImagePython {
    const PythonLayout* layout = nullptr;  // nullptr: no CPython runtime with a table
    uint64_t eval_start = 0, eval_end = 0;  // the eval loop's runtime addresses
  };
  ImagePython find_runtime(uint32_t image_id);
  uint32_t intern(PythonFrameName name);

  ProcessTable& processes_;
  PythonCodeNamer namer_;
  std::unordered_map<uint32_t, ImagePython> images_;
  std::map<uint32_t, uint32_t> found_;  // pid -> image it was reported for
  std::vector<PythonFrame> names_;
  std::map<PythonFrame, uint32_t> name_ids_;
  std::vector<uint64_t> merged_;
  std::vector<uint32_t> run_frames_;
  PythonReport report_;
};

}  // namespace gsymprof
