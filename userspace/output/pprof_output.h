// userspace/output/pprof_output.h - a capture -> pprof's profile.proto,
// gzipped (`--format pprof`), for go tool pprof and the continuous-profiling
// backends that read it (Pyroscope, Parca, Cloud Profiler).
//
// Every distinct captured frame (module, address) is one Location, looked up
// once through the same symbolize() as the folded output: its Lines are the
// inline chain innermost first, named as the folded output names them
// ("lib.so+0x1a2b" where a module has no symbols, "[unknown]" where there is
// no module). One Mapping per executable mapping of a module, with the
// module's path and GNU build ID and has_* flags true only when every
// location in it has them. Samples are the capture's stacks, leaf first,
// "[truncated]" as the root location where the unwinder stopped early, with
// values samples/count and cpu/nanoseconds (count x 1e9 / Hz) and labels
// comm, pid and thread_id. Functions carry the raw (mangled) name as
// system_name and start_line (SymbolizeOptions::function_start_lines).
// The same capture gives the same bytes.
#pragma once

#include <string>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"
#include "userspace/symbolize/gsym_locator.h"
#include "userspace/symbolize/symbolize.h"

namespace gsymprof {

struct PprofProfile {
  std::string gzipped;         // the serialized Profile message, gzip-compressed
  SymbolizeResult symbolized;  // its frames and modules (the summary); no stacks (frame_chains.h)
  size_t samples = 0;          // Sample messages written (the capture's counted stacks)
};

// `bytes` gzip-compressed (mtime 0: equal input, equal bytes).
gsym::Expected<std::string> gzip_bytes(const std::string& bytes);

// options.pid_in_comm is not used: the pid is a label of every sample.
gsym::Expected<PprofProfile> pprof_profile(const Capture& capture, GsymLocator& locator,
                                           const SymbolizeOptions& options);

}  // namespace gsymprof
