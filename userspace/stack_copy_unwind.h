// userspace/stack_copy_unwind.h - stage (--call-graph dwarf): a copied user
// stack (RawStackCopy, from the sampler) -> the IP list the frame-pointer path
// produces (RawSample), unwound with CFI (cfi_unwinder.h) while the process's
// modules are known. Everything after it (aggregation, normalization, capture)
// is the same for both call-graph modes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "userspace/cfi_unwinder.h"
#include "userspace/process_image.h"
#include "userspace/stack_aggregator.h"
#include "userspace/stack_snapshot.h"

namespace gsymprof {

class StackCopyUnwinder {
 public:
  explicit StackCopyUnwinder(ProcessTable& processes, UnwindOptions options = {});

  // Unwinds `copy` with the modules of its process's current image. The
  // sample's views stay valid until the next call. `truncated` is set when
  // the walk stopped before the outermost frame.
  RawSample unwind(const RawStackCopy& copy);

  // Stacks that ended early, by reason: "unwind_stack_copy_too_small", ...
  // (the UnwindStop names, '_'-joined); complete stacks are not counted.
  std::map<std::string, uint64_t> truncations() const;
  uint64_t stacks() const { return stacks_; }

 private:
  const UnwindModule* find_module(uint32_t image, uint64_t addr);

  ProcessTable& processes_;
  CfiUnwinder unwinder_;
  UnwindResult result_;
  // (image id, module index) -> how to read that module's CFI.
  std::map<std::pair<uint32_t, int32_t>, UnwindModule> modules_;
  std::array<uint64_t, kUnwindStopCount> stops_{};
  uint64_t stacks_ = 0;
};

}  // namespace gsymprof
