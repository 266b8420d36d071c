// userspace/symbolize/gsym_cache.h - the GSYM cache directory: GSYMs
// converted from files only root (or the effective user) could have
// written, shared by identity across runs (gsym_locator.h says when).
//
// Layout: <buildid-hex>.<gsym::kConverterVersion>.gsym (go-<hex>... and
// sha256-<hex>... for the other identity kinds), beside it
// <...>.symbols when that GSYM was converted from symbols alone, and
// <...>.failed (the error, then a line "kind: CODE") for a conversion that
// failed. The directory is private (0700, files 0600), owned by the
// effective user and writable by nobody else, for reading as for writing;
// a cache that fails these checks is refused (neither read nor written)
// with one note. Created on the first write only.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/file_io.h"
#include "userspace/base/build_id.h"

namespace gsymprof {

// Why results derived from a file are not shared ("owned by uid N",
// "writable by group or others"): the file fails gsym::writable_only_by_us.
std::string why_untrusted(const struct stat& status);

class GsymCache {
 public:
  // `dir` "" = no cache. `notes` (kept by reference, e.g. the locator's)
  // receives a refused cache and skipped cache files, once each.
  GsymCache(std::string dir, std::vector<std::string>& notes);

  bool configured() const { return !dir_.empty(); }
  // DIR/<name of id's entry with `suffix`> (".gsym", ".failed", ".symbols").
  std::string path_of(const BuildId& id, const char* suffix) const;

  // The cached GSYM of `id`, open, when it is ours (owned by the effective
  // user; an older 0644 file is made private); nullopt when absent or
  // skipped (a note).
  std::optional<gsym::OpenFile> open_gsym(const BuildId& id);
  // Whether the cached GSYM of `id` was converted from symbols alone.
  bool from_symbols_only(const BuildId& id);

  // A conversion of `id` that failed earlier with this converter version:
  // its error as it was said, with its code. None when a debug file for it
  // appeared since in one of `debug_directories` (DIR/.build-id/xx/rest.debug,
  // the usual fix) or when the file lacks its "kind:" line (written before
  // it existed: converted again once and rewritten).
  std::optional<gsym::Error> remembered_failure(const BuildId& id,
                                                const std::vector<std::string>& debug_directories);
  void remember_failure(const BuildId& id, const gsym::Error& error);

  // Another entry of `id` (".kallsyms": the kernel's symbols of one boot,
  // kernel_symbol_cache.h): its bytes when present, ours and at most
  // `max_bytes`; written atomically, private.
  std::optional<std::string> read_entry(const BuildId& id, const char* suffix, uint64_t max_bytes);
  gsym::Status write_entry(const BuildId& id, const char* suffix, std::string_view bytes);

  // Writes a converted GSYM of `id` atomically and marks (or unmarks) it as
  // converted from symbols alone. Its path, or why it is not cached.
  gsym::Expected<std::string> publish(const BuildId& id, std::span<const uint8_t> gsym_bytes,
                                      bool symbols_only);
  // The same from a descriptor (all of it: a child conversion's memfd),
  // copied by the kernel rather than read into memory first.
  gsym::Expected<std::string> publish(const BuildId& id, int gsym_fd, bool symbols_only);

 private:
  // The directory's descriptor, or -1; created only when `create` (to write).
  int descriptor(bool create);
  // The entry of `id` with `suffix`, open, when it is ours (notes otherwise).
  std::optional<gsym::OpenFile> open_entry(const BuildId& id, const char* suffix);
  void mark_symbols_only(const BuildId& id, bool symbols_only);
  // publish's steps around `write(dir_fd, name)`, which writes the GSYM.
  gsym::Expected<std::string> publish_with(
      const BuildId& id, bool symbols_only,
      const std::function<gsym::Status(int dir_fd, const std::string& name)>& write);

  std::string dir_;
  std::vector<std::string>& notes_;
  std::optional<gsym::FileDescriptor> fd_;
  std::string refused_;  // why the cache is refused ("" = not refused)
  bool tried_ = false, absent_ = false;
};

}  // namespace gsymprof
