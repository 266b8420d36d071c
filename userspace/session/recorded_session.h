// userspace/session/recorded_session.h - stage: a perf.data recording ->
// a Capture, through the same capture assembler as a live session: the
// perf.data source (perf_data_capture.h) sends its events to an assembler
// in the recorded mode of the process model, then the kernel frames are
// named if this machine runs the recording's kernel.
#pragma once

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/perf_data/perf_data_capture.h"
#include "userspace/perf_data/perf_data_reader.h"

namespace gsymprof {

gsym::Expected<Capture> capture_from_perf_data(const PerfDataFile& file,
                                               const PerfCaptureOptions& options = {});

}  // namespace gsymprof
