// userspace/base/pseudo_file.h - reading the kernel's /proc and /sys files.
#pragma once

#include <cstddef>
#include <string>

#include "gsym/base/expected.h"

namespace gsymprof {

// Reads a /proc or /sys file to its end. Their st_size is 0 or a page, so
// the size cannot be known before reading (gsym::read_file_text, which
// trusts st_size, would read nothing). Opened non-blocking; more than
// `max_bytes` is an error ("PATH: larger than N bytes"). Errors are coded
// as gsym::Error::from_errno (NotFound when the path is gone, e.g. a process
// that exited) and say "PATH: strerror".
gsym::Expected<std::string> read_pseudo_file(const std::string& path, size_t max_bytes);

}  // namespace gsymprof
