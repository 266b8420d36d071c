// userspace/session/profile_file.h - the one entry point for a profile on
// disk: a perf.data file (recognised by its PERFILE2 magic) or a gsymprof
// capture file (capture_file.h), both as a Capture.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gsym/base/expected.h"
#include "userspace/capture/capture.h"

namespace gsymprof {

// The largest perf.data read (it is read whole): "file too large" beyond.
inline constexpr uint64_t kMaxPerfDataBytes = uint64_t{4} << 30;  // 4 GiB
// Folded text and pprof files larger than this are refused before they are
// read (flamegraph, diff).
inline constexpr uint64_t kMaxStackFileBytes = uint64_t{1} << 31;

struct ProfileFileOptions {
  // perf.data: the event whose samples are read (PerfCaptureOptions::event).
  // A capture holds one event's samples: naming one for it is an error.
  std::string perf_event;
};

// Whether the file at `path` starts with perf.data's magic (else it is read
// as a capture). Error: it cannot be opened.
gsym::Expected<bool> is_perf_data_file(const std::string& path);

// What a file starting with `head` is, when it is a profile file rather
// than folded text: "a perf.data file", "a gsymprof capture", or "" (neither).
// For a message that says which command reads it.
std::string profile_file_kind(std::string_view head);

// Errors are one line and name the file ("PATH: perf.data: ... at offset 0x...").
gsym::Expected<Capture> read_profile_file(const std::string& path,
                                          const ProfileFileOptions& options = {});

}  // namespace gsymprof
