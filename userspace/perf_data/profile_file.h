// userspace/perf_data/profile_file.h - the one entry point for a profile on
// disk: a perf.data file (recognised by its PERFILE2 magic) or a gsymprof
// capture file (capture_file.h), both as a Capture.
#pragma once

#include <cstdint>
#include <string>

#include "gsym/expected.h"
#include "userspace/capture/capture.h"

namespace gsymprof {

// The largest perf.data read (it is read whole): "file too large" beyond.
inline constexpr uint64_t kMaxPerfDataBytes = uint64_t{4} << 30;  // 4 GiB

// Errors are one line and name the file ("PATH: perf.data: ... at offset 0x...").
gsym::Expected<Capture> read_profile_file(const std::string& path);

}  // namespace gsymprof
