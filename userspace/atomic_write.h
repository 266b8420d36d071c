// userspace/atomic_write.h - output files appear whole or not at all: bytes
// go to a temporary file beside the target, which is then renamed over it.
#pragma once

#include <string>
#include <string_view>

#include "gsym/expected.h"

namespace gsymprof {

// gsym::write_file_atomically with mode 0666 & ~umask, as open(2) would give
// (devices and pipes such as /dev/stdout are written in place).
gsym::Status write_file_atomically(const std::string& path, std::string_view bytes);

// Reads a whole file; the error names `path`. Refuses files larger than
// `max_bytes` so hostile input cannot exhaust memory.
gsym::Expected<std::string> read_whole_file(const std::string& path,
                                            size_t max_bytes = size_t{1} << 31);

}  // namespace gsymprof
