// userspace/export/otlp_profiles.h - a capture (an agent window) -> an OTLP
// Profiles ExportProfilesServiceRequest (opentelemetry-proto v1.11.0,
// profiles/v1development; userspace/export/README.md has the mapping).
//
// One dictionary for the request. One ResourceProfiles per container.id
// (processes in no container share one without it), as the proto's
// ProfilesData comment says host-level profilers do and the OTel eBPF
// profiler does; the process and thread labels are sample attributes.
// Each resource has one ScopeProfiles ("gsymprof") with one Profile per
// value type: cpu/nanoseconds and samples/count for CPU captures,
// off_cpu/nanoseconds and waits/count for off-CPU ones, wall, cpu and
// off_cpu nanoseconds for wall-clock ones (the first is the main view).
// Frames are named by the same symbolize() as the folded output; a
// Location's lines are its inline chain innermost first. Mappings carry
// the module's identity as an attribute. The same capture gives the same
// bytes.
#pragma once

#include <cstddef>
#include <string>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

struct OtlpProfilesRequest {
  std::string bytes;   // a serialized ExportProfilesServiceRequest
  size_t samples = 0;  // Sample messages across all its profiles
};

// options.pid_in_comm is not used: process.pid is a sample attribute.
gsym::Expected<OtlpProfilesRequest> otlp_profiles_request(const Capture& capture, GsymLocator& locator,
                                                          const SymbolizeOptions& options);

}  // namespace gsymprof
