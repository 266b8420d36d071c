// userspace/perf_data/perf_data_capture.h - stage: perf.data records -> a
// Capture (capture.h), the same hand-off a live profile produces, so
// `symbolize` names its frames with the same code.
//
// Records are replayed in time order: COMM (exec starts a new address
// space), FORK (a new process copies its parent's mappings), EXIT, and
// MMAP/MMAP2 of executable mappings (a new mapping replaces what it
// overlaps), so each sample meets the mappings of its process at that time
// (dlopen, exec). Samples of one event only: the one options.event names,
// else the first that is not perf's "dummy" event:
//   - callchain (perf record -g): the entries after PERF_CONTEXT_USER;
//   - registers + stack copy (--call-graph dwarf): unwound with gsymprof's
//     CFI unwinder (cfi_unwinder.h);
//   - otherwise the sampled IP alone.
// Frames are normalized as normalize.h does for live profiles: frame 0
// exact, return addresses minus one, unslid through the module's PT_LOAD
// segments.
//
// A module's identity: the build ID of its MMAP2 record, else the file's
// HEADER_BUILD_ID entry; its segments are read from the file at the recorded
// path only if that file has this build ID (or, when perf recorded none, the
// recorded device and inode). A module whose file does not match keeps no
// build ID (frames print as module+0xOFFSET): a wrong name is worse than none.
//
// Kernel frames (the callchain's PERF_CONTEXT_KERNEL part, or a leaf-only
// kernel-mode IP) go leafward of the user frames, as in live profiles; a
// sample with kernel frames only (a kernel thread) is kept.
//
// Not in the capture, counted in Capture::lost instead (kLost* below):
// samples with no frame at all,
// LOST / LOST_SAMPLES records, and the reasons CFI walks stopped early.
#pragma once

#include <functional>
#include <string>

#include "gsym/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/perf_data/perf_data_reader.h"
#include "userspace/process/module_identity.h"

namespace gsymprof {

// Capture::lost keys added for perf.data (besides the live ones it shares:
// ringbuf_full for LOST records, no_user_stack, unwind_<reason>).
inline constexpr const char* kLostSamplesRecord = "lost_samples";          // LOST_SAMPLES records
inline constexpr const char* kLostNoUserRegisters = "no_user_registers";   // dwarf: no IP/SP/BP

// A module as perf recorded it, for the identity loader.
struct PerfModuleFile {
  std::string path;
  BuildId build_id;        // recorded (empty: none)
  bool has_inode = false;  // MMAP2 without build ID
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0;
};

struct PerfCaptureOptions {
  // The event whose samples are used, by perf's name for it (PerfAttr::name:
  // "cycles", "cpu-clock", "cycles:u"); empty: the first non-dummy event. A
  // name no event has is an error listing the names there are.
  std::string event;
  // Reads the identity of the file behind a recorded module, or says why it
  // cannot (missing, another build). Default: the file at the recorded path
  // (the local [vdso] for "[vdso]"), accepted only if it matches.
  std::function<gsym::Expected<ModuleIdentity>(const PerfModuleFile&)> load_module;
  // Names the capture's kernel frames (Capture::kernel) given the recording
  // kernel's build ID from HEADER_BUILD_ID (empty: perf recorded none).
  // Default: name_kernel_frames_from_running_kernel.
  std::function<void(Capture&, const BuildId& recorded_kernel)> name_kernel_frames;
};

// The identity check of the default loader: the file's build ID must equal
// the recorded one, or, with none recorded, its device and inode must.
gsym::Expected<ModuleIdentity> load_recorded_module(const PerfModuleFile& module);

// Names kernel frames from this machine's /proc/kallsyms only when the
// running kernel's build ID equals the recording kernel's; otherwise they
// keep their addresses and Capture::kernel.error says why.
void name_kernel_frames_from_running_kernel(Capture& capture, const BuildId& recorded_kernel);

gsym::Expected<Capture> capture_from_perf_data(const PerfDataFile& file,
                                               const PerfCaptureOptions& options = {});

}  // namespace gsymprof
