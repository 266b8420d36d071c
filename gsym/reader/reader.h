// gsym/reader/reader.h - reads LLVM GSYM files, version 1 and version 2 (LLVM
// 23's: a section directory, 8-byte string offsets), in either byte order.
//
// One query API over three storages: an owned buffer (open), borrowed bytes
// (parse, no copy) and a read-only mmap (map). Lookups are const; the only
// state they change is the lookup index, built per function under a lock
// (lookup_index.h), so one Reader may serve many threads at once; each
// thread brings its own LookupScratch.
//
// Semantics follow LLVM 22's GsymReader exactly (see gsym/README.md): the
// innermost frame gets the line row covering the address, each outer frame the
// call site recorded on the frame nested inside it, offsets are measured from
// the start of the frame's own (first) range.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/format/format.h"  // kMaxInlineDepth, kMaxMergedDepth
#include "gsym/format/lookup.h"  // LookupFrame, LookupOptions, LookupScratch, LookupResult
#include "gsym/format/model.h"

namespace gsym {

// The fields of either version's header. Version 2 keeps the string table's
// place and the UUID in its directory: strtab_offset/size are filled from
// it; uuid/uuid_size are version 1's header fields (build_id() gives either
// version's UUID).
struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t addr_off_size = 0;
  uint8_t uuid_size = 0;                // version 1
  uint8_t string_table_encoding = 0;    // version 2 (0 = NUL-terminated)
  uint64_t base_address = 0;
  uint32_t num_addresses = 0;
  uint64_t strtab_offset = 0;
  uint64_t strtab_size = 0;
  uint8_t uuid[20] = {};                // version 1
  Endian endian = Endian::Little;
};

// One entry of a version 2 file's global-data directory (GlobalInfoType in
// format.h), in file order.
struct GlobalDataEntry {
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

class Reader {
 public:
  // Reads the whole file into an owned buffer.
  static Expected<Reader> open(const std::string& path);
  // Whether the reader keeps a lookup index (lookup_index.h). Build: address
  // buckets at open, and each function's index the second time a lookup
  // lands in it, so repeated lookups are fast and the heap grows with the
  // functions looked up again (at most about the file's size). Skip holds
  // none, and lookups take the plain path (the same answers, slower for long
  // line programs and deep inline trees): for a process that keeps many
  // files open for days (an agent).
  enum class Index : uint8_t { Build, Skip };
  // Borrows `bytes`; they must outlive the Reader and every view it returns.
  static Expected<Reader> parse(std::span<const uint8_t> bytes, Index index = Index::Build);
  // Maps the file read-only when only root or we can write it (it must not be
  // truncated or rewritten while mapped: write new files atomically instead);
  // reads it whole when anyone else could truncate it.
  static Expected<Reader> map(const std::string& path);
  // From an open regular file: read whole into an owned buffer, or mapped.
  // Map only files nobody else can truncate (a truncated mapping is SIGBUS).
  enum class Load : uint8_t { Read, Map };
  static Expected<Reader> from_descriptor(int fd, Load load, Index index = Index::Build);
  // Map when only root or we can write the file (stat of the open file),
  // else Read: the rule map() follows.
  static Load safe_load(const struct stat& status);

  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  const Header& header() const;
  // A version 2 file's directory, terminator excluded; empty for version 1.
  std::span<const GlobalDataEntry> sections() const;
  // Header UUID bytes (the GNU build ID for converted ELF files); empty = unknown.
  std::span<const uint8_t> build_id() const;
  std::span<const uint8_t> bytes() const;
  // A mapped file's pages leave this process's resident set (they stay in
  // the page cache; the next lookup faults them back in); safe beside
  // lookups on other threads. Nothing for read or borrowed storage. A
  // long-running process calls it between bursts of lookups.
  void release_pages() const;
  // Heap bytes this reader holds: its lookup index, and the file when read
  // (not mapped). A long-running process bounds its open readers by it.
  size_t memory_bytes() const;

  size_t function_count() const;
  uint64_t function_start(size_t index) const;  // index < function_count()
  // String-table entry at `offset` ("" when past the table).
  std::string_view string(uint64_t offset) const;
  size_t file_count() const;
  Expected<std::pair<std::string_view, std::string_view>> file(uint32_t index) const;

  // Index of the function record covering `addr` (LLVM's rules for equal
  // starts and zero sizes), or -1 when none does.
  int64_t find_function(uint64_t addr) const;

  // Allocation-free lookup: fills scratch.frames (innermost first) and returns
  // true, or returns false when no function covers `addr`.
  Expected<bool> lookup_into(uint64_t addr, const LookupOptions& options,
                             LookupScratch& scratch) const;

  // Calls `callback(const LookupFrame&)` for each frame, innermost first.
  // Returns whether a function covered `addr`.
  template <class Callback>
  Expected<bool> for_each_frame(uint64_t addr, const LookupOptions& options,
                                LookupScratch& scratch, Callback&& callback) const {
    Expected<bool> found = lookup_into(addr, options, scratch);
    if (found.ok() && *found)
      for (const LookupFrame& f : scratch.frames) callback(f);
    return found;
  }

  // Convenience, allocating: nullopt-like result via `found`.
  Expected<std::optional<LookupResult>> lookup(uint64_t addr,
                                               const LookupOptions& options = {}) const;

  // Full decode of one record (for dump, round trips and tools).
  Expected<Function> decode_function(size_t index) const;
  Expected<std::vector<FileEntry>> decode_files() const;

  // Checks every function record and everything it references.
  Expected<VerifyReport> verify() const;

 private:
  struct Impl;
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gsym
