#include "userspace/session/recorded_session.h"

#include <algorithm>

#include "userspace/assemble/capture_assembler.h"
#include "userspace/events/counters.h"
#include "userspace/perf_data/perf_data_format.h"
#include "userspace/process/kernel_symbols.h"

namespace gsymprof {

gsym::Expected<Capture> capture_from_perf_data(const PerfDataFile& file,
                                               const PerfCaptureOptions& options) {
  auto attr_index = sampling_attr(file, options.event);
  if (!attr_index) return attr_index.error();
  const PerfEventAttr& attr = file.attrs()[*attr_index].attr;
  const bool dwarf =
      (attr.sample_type & PERF_SAMPLE_REGS_USER) && (attr.sample_type & PERF_SAMPLE_STACK_USER);

  CaptureAssembler assembler(recorded_proc_source(options));
  // A recording is complete as it is: nothing to read again.
  assembler.use_sideband([] { return uint64_t{0}; });
  if (options.recorder_uid) assembler.perf_maps().read_gone_processes_from_host(*options.recorder_uid);
  for (const char* key : {counter_info(PROFILE_COUNTER_RINGBUF_FULL).name,
                          counter_info(PROFILE_COUNTER_NO_USER_STACK).name, kLostSamplesRecord})
    assembler.on_lost(key, 0);
  if (dwarf) assembler.on_lost(kLostNoUserRegisters, 0);
  PerfDataSource source(file, *attr_index, assembler);
  if (auto status = source.run(); !status) return status.error();
  assembler.finish();
  assembler.release_unwinder();

  Capture capture;
  capture.host = file.hostname();
  capture.kernel_release = file.os_release();
  if (attr.freq())
    capture.frequency_hz = static_cast<uint32_t>(std::min<uint64_t>(attr.sample_period, UINT32_MAX));
  capture.call_graph = dwarf                                        ? CallGraph::Dwarf
                       : (attr.sample_type & PERF_SAMPLE_CALLCHAIN) ? CallGraph::FramePointer
                                                                    : CallGraph::None;
  capture.duration_ns = source.duration_ns();
  JitReport jit;
  assembler.build(capture, &jit, dwarf);
  BuildId recorded_kernel;
  for (const PerfBuildId& entry : file.build_ids())
    if (entry.kernel && entry.filename == kKernelModulePath) recorded_kernel = entry.build_id;
  if (has_kernel_frames(capture)) {
    if (options.name_kernel_frames)
      options.name_kernel_frames(capture, recorded_kernel);
    else
      name_kernel_frames_from_running_kernel(capture, recorded_kernel);
  }
  canonicalize(capture);
  return capture;
}

}  // namespace gsymprof
