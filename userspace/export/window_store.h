// userspace/export/window_store.h - a private directory of encoded windows,
// oldest first, bounded in count and bytes: the agent's --output-dir (one
// pprof per window) and its spool (windows a backend has not taken yet).
// A write that goes over a bound drops the oldest files first, counted.
// Files are created new and renamed into place; the directory is made
// 0700 and owned by us (base/private_dir.h), symlinks never followed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/file_io.h"

namespace gsymprof {

class WindowStore {
 public:
  // Files named PREFIX-<UTC time>-<sequence>SUFFIX, e.g. profile-20261206T051530Z-000042.pb.gz.
  static gsym::Expected<WindowStore> open(const std::string& dir, std::string prefix, std::string suffix,
                                          size_t max_files, uint64_t max_bytes);

  // Writes `bytes` as the window that started at `start_unix_ns`; returns how
  // many old files the bounds dropped.
  gsym::Expected<uint64_t> add(uint64_t start_unix_ns, const std::string& bytes);
  // The stored files' names, oldest first.
  std::vector<std::string> names() const;
  gsym::Expected<std::string> read(const std::string& name) const;
  void remove(const std::string& name);
  uint64_t bytes() const;
  const std::string& path() const { return path_; }

 private:
  WindowStore() = default;
  struct Entry {
    std::string name;
    uint64_t bytes = 0;
  };
  std::vector<Entry> entries() const;  // sorted by name: oldest first

  gsym::FileDescriptor dir_;
  std::string path_, prefix_, suffix_;
  size_t max_files_ = 0;
  uint64_t max_bytes_ = 0, sequence_ = 0;
};

}  // namespace gsymprof
