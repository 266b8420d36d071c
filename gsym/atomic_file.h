// gsym/atomic_file.h - output files appear whole or not at all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "gsym/expected.h"

namespace gsym {

// Writes `bytes` to `path` atomically: a temporary file beside it, fsync,
// chmod `mode`, rename over `path`. On failure nothing is left behind and the
// error names `path`. A device or pipe (/dev/null, /dev/stdout) is written in
// place instead: renaming over it would replace the device node.
Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                             mode_t mode);

}  // namespace gsym
