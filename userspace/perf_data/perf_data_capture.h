// userspace/perf_data/perf_data_capture.h - stage (a source): perf.data
// records -> events (events.h) for the capture assembler, the same events
// the live sampler sends, so a recording gets what a live profile gets
// (session/recorded_session.h puts the two together).
//
// Records are replayed in time order: COMM (exec), FORK (a new process),
// EXIT, and MMAP/MMAP2 (data mappings too, perf record --data: a frame in
// one is not-executable, as in a live profile). Samples of one event only:
// the one options.event names, else the first that is not perf's "dummy"
// event:
//   - callchain (perf record -g): the entries after PERF_CONTEXT_USER;
//   - registers + stack copy (--call-graph dwarf): a stack copy, unwound by
//     the assembler with gsymprof's CFI unwinder, as live ones;
//   - otherwise the sampled IP alone.
//
// A module's identity: the build ID of its MMAP2 record, else the file's
// HEADER_BUILD_ID entry; the process model's recorded mode
// (recorded_proc_source) reads its segments from the file at the recorded
// path only if that file has this build ID (or, when perf recorded none, the
// recorded device and inode). A module whose file does not match keeps no
// build ID (frames print as module+0xOFFSET): a wrong name is worse than none.
//
// Kernel frames (the callchain's PERF_CONTEXT_KERNEL part, or a leaf-only
// kernel-mode IP) go leafward of the user frames, as in live profiles; a
// sample with kernel frames only (a kernel thread) is kept.
//
// Not in the capture, counted in Capture::lost instead (kLost* below):
// samples with no frame at all, LOST / LOST_SAMPLES records, and the reasons
// CFI walks stopped early.
#pragma once

#include <functional>
#include <map>
#include <unordered_map>
#include <vector>
#include <optional>
#include <string>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/perf_data/perf_data_reader.h"
#include "userspace/events/events.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/process_image.h"

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
  // Who made the recording (the perf.data file's owner): JIT frames are
  // named from this host's /tmp/perf-PID.map files of root or this user, as
  // perf script names them. Unset: JIT frames stay unnamed.
  std::optional<uint32_t> recorder_uid;
};

// The identity check of the default loader: the file's build ID must equal
// the recorded one, or, with none recorded, its device and inode must.
gsym::Expected<ModuleIdentity> load_recorded_module(const PerfModuleFile& module);

// Names kernel frames from this machine's /proc/kallsyms only when the
// running kernel's build ID equals the recording kernel's; otherwise they
// keep their addresses and Capture::kernel.error says why.
void name_kernel_frames_from_running_kernel(Capture& capture, const BuildId& recorded_kernel);

// The process model's recorded mode for `options`: no /proc; files by
// recorded build ID or device/inode, each read once.
ProcSource recorded_proc_source(const PerfCaptureOptions& options);

// The index (into file.attrs()) of the event whose samples are used.
gsym::Expected<size_t> sampling_attr(const PerfDataFile& file, const std::string& event);

// perf.data records -> events, in the file's time order.
class PerfDataSource {
 public:
  PerfDataSource(const PerfDataFile& file, size_t sampling_attr, EventSink& sink);
  // Sends every record's events; an error is a record that does not decode.
  gsym::Status run();
  // The span of the samples' times (0 without times).
  uint64_t duration_ns() const { return have_time_ ? last_time_ - first_time_ : 0; }

 private:
  void on_mmap(const PerfRecord& record);
  void on_comm(const PerfRecord::Comm& comm);
  void on_fork(const PerfRecord::Task& task);
  void on_sample(const PerfRecord& record);
  // The user part of a --call-graph dwarf sample, as the live sampler's
  // stack copies; false if it has no user registers.
  bool stack_copy(const PerfRecord::Sample& s, RawStackCopy& copy);
  std::string comm_of(uint32_t pid, uint32_t tid) const;

  const PerfDataFile& file_;
  const size_t sampling_attr_;
  EventSink& sink_;
  std::map<std::string, BuildId> header_build_ids_;  // host files; ambiguous ones dropped
  std::unordered_map<uint32_t, std::string> comms_;  // by tid
  std::vector<uint64_t> ips_, kernel_ips_;
  bool have_time_ = false;
  uint64_t first_time_ = 0, last_time_ = 0;
};

}  // namespace gsymprof
