// userspace/base/private_dir.h - a directory of gsymprof's own that others
// must not read or plant files in: the GSYM cache, the agent's spool and
// output directories.
#pragma once

#include <string>

#include "gsym/base/expected.h"
#include "gsym/base/file_io.h"

namespace gsymprof {

// Opens (creating when missing) every component of `dir` without following
// symlinks. The directory itself is made private: created 0700, an existing one
// of ours tightened to 0700 (it holds symbols, or profiles, of root-only programs). It must
// be owned by the effective user; the same checks hold for reading.
// With `create` unset a missing directory is not made: an error coded NotFound
// (not there yet, no problem to report). Every other error is Refused:
// the directory is then neither read nor written.
gsym::Expected<gsym::FileDescriptor> open_private_dir(const std::string& dir, bool create);

}  // namespace gsymprof
