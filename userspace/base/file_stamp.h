// userspace/base/file_stamp.h - which file, and which contents of it, as
// fstat saw the descriptor it was read through.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace gsymprof {

// Two stamps are equal only for the same file with the same contents (ctime
// changes on every write and cannot be set by the file's owner).
struct FileStamp {
  uint64_t dev = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  // gsym::writable_only_by_us: only root (or we) could have written it, so
  // what is derived from it may be cached and shared by build ID.
  bool trusted = false;
  bool known() const { return dev != 0 || inode != 0; }
  std::string key() const;  // "dev:inode:size:mtime:ctime", for caches in memory
  static FileStamp of(const struct stat& status);
  bool operator==(const FileStamp&) const = default;
};

}  // namespace gsymprof
