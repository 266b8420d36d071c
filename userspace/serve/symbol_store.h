// userspace/serve/symbol_store.h - `gsymprof serve`'s store (--gsym-dir DIR):
// GSYM readers by GNU build ID for the request threads, debug files and
// executables uploaded (or fetched from debuginfod) by build ID, and one
// worker thread that converts them to GSYM off the request path.
//
// Layout of DIR:
//   DIR/*.gsym               GSYMs put there (any name, indexed by the build
//                            ID in their header, as `--gsym-dir` everywhere)
//   DIR/debug/HEX.debuginfo  uploaded or fetched ELF files by GNU build ID
//   DIR/debug/HEX.executable (0700 directory, 0600 files: ours alone)
//   DIR/cache/               GSYMs converted here (gsym_cache.h's layout)
// No name in it comes from a request but the build ID, which is checked to
// be hex of 4 to 64 bytes first and written back lower-case; files are
// opened relative to the directory, never following a symlink.
//
// find() never converts: an ID with a debug file in the store (or, with
// debuginfod, any ID not known to fail) is queued for the worker and
// reported PendingConversion; the worker converts it with GsymLocator (one
// thread, at most `max_waiting` IDs waiting) into DIR/cache, then the next
// find() names it. A failed conversion is remembered for `failure_ttl`
// (an upload of that ID forgets it). Open GSYMs: an LRU of `open_gsyms`.
//
// How an address in a mapping becomes the address a GSYM is keyed by:
// with the executable in the store, file_offset = address - memory_start +
// mapping.file_offset, then its PT_LOAD segment (normalize.h's
// unslid_address); with only a separate debug file (whose program headers
// keep p_vaddr but not p_offset), the mapping is taken to map its single
// executable segment: unslid = address - memory_start + the page of
// p_vaddr; with neither (a GSYM alone), file offset = virtual address,
// true of the code of PIEs and libraries linked by GNU ld (README: serve).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/file_io.h"
#include "gsym/reader/reader.h"
#include "userspace/base/build_id.h"
#include "userspace/process/module_identity.h"
#include "userspace/serve/serve_metrics.h"

namespace gsymprof {

// A GNU build ID from a request: hex (either case) of 4 to 64 bytes.
std::optional<BuildId> parse_request_build_id(std::string_view hex);

enum class DebugFileKind : uint8_t { Debuginfo, Executable };
const char* to_string(DebugFileKind kind);  // "debuginfo", "executable"

// How to turn a mapping's address into the GSYM's (see above).
struct AddressRule {
  enum Kind : uint8_t { Segments, ExecutableSegment, FileOffset } kind = FileOffset;
  std::vector<LoadSegment> segments;  // Segments: the executable's PT_LOADs
  uint64_t text_page = 0;             // ExecutableSegment: p_vaddr of the PF_X segment, page-aligned
};

// The GSYM address of `address` in a mapping [memory_start, memory_limit)
// mapped from `file_offset`; nullopt when outside the mapping or every
// segment. memory_limit 0 = unknown.
std::optional<uint64_t> gsym_address(const AddressRule& rule, uint64_t memory_start, uint64_t memory_limit,
                                     uint64_t file_offset, uint64_t address);

// The demangled names of one open GSYM's symbols, kept while it is open and
// shared by the requests that name frames with it (demangling was a
// quarter of a warm request's time when each request did its own).
// Thread-safe. A symbol is a view into the GSYM's string table, so the
// same string is always the same pointer: that pointer is the key.
class DemangleCache {
 public:
  // Names kept over every open GSYM at once (about 30 MB), then demangled
  // per request, not kept: the service's memory stays bounded however many
  // GSYMs it holds open.
  static constexpr size_t kMaxNamesInAll = size_t{1} << 18;
  DemangleCache() = default;
  DemangleCache(const DemangleCache&) = delete;
  DemangleCache& operator=(const DemangleCache&) = delete;
  ~DemangleCache() { kept_in_all_ -= names_.size(); }
  // The demangled form of `symbol`, "" when it is the symbol itself. Valid
  // while this cache lives (entries are never removed). `spare` holds a
  // name that was not kept.
  std::string_view get(std::string_view symbol, std::string& spare);

 private:
  std::mutex mutex_;
  std::unordered_map<const char*, std::string> names_;
  static inline std::atomic<size_t> kept_in_all_{0};
};

struct StoreLookup {
  FrameOutcome outcome = FrameOutcome::NoSymbols;  // Named: ready to look up
  std::shared_ptr<const gsym::Reader> reader;      // when Named
  std::shared_ptr<const AddressRule> rule;         // when Named
  std::shared_ptr<DemangleCache> names;            // when Named: the reader's
};

struct SymbolStoreOptions {
  std::string dir;
  size_t open_gsyms = 64;   // readers kept open (LRU)
  size_t max_waiting = 256; // IDs queued or converting
  bool debuginfod = false;  // ask DEBUGINFOD_URLS for what the store lacks
  uint64_t max_file_bytes = uint64_t{4} << 30;  // uploads and fetched files
  std::chrono::seconds failure_ttl{600};
};

class SymbolStore {
 public:
  static gsym::Expected<std::unique_ptr<SymbolStore>> open(SymbolStoreOptions options, ServeMetrics& metrics);
  ~SymbolStore();  // stops the worker (a conversion in progress finishes first)
  SymbolStore(const SymbolStore&) = delete;
  SymbolStore& operator=(const SymbolStore&) = delete;

  // Thread-safe; never converts.
  StoreLookup find(const BuildId& id);

  // A stored file for GET; NotFound when the store has none.
  gsym::Expected<gsym::OpenFile> open_file(const BuildId& id, DebugFileKind kind);

  // An upload being written: a new temporary file in DIR/debug, removed
  // unless committed.
  class Upload {
   public:
    Upload(Upload&&) noexcept;
    ~Upload();
    // false (and the upload spoiled) past max_file_bytes or on a write error.
    bool write(const char* data, size_t size);
    uint64_t size() const { return size_; }

   private:
    friend class SymbolStore;
    Upload(int dir_fd, std::string name, gsym::FileDescriptor fd, uint64_t limit);
    int dir_fd_;
    std::string name_;
    gsym::FileDescriptor fd_;
    uint64_t size_ = 0, limit_ = 0;
    bool failed_ = false, committed_ = false;
  };
  gsym::Expected<Upload> begin_upload();
  // Checks that the file is ELF with GNU build ID `id` (error coded Refused
  // with one line otherwise: "not an ELF file", "has no GNU build ID",
  // "its GNU build ID is X, not Y"), then renames it to HEX.KIND, forgets
  // what the store knew of `id` and queues its conversion.
  gsym::Status commit_upload(Upload upload, const BuildId& id, DebugFileKind kind);

  struct State;

 private:
  explicit SymbolStore(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gsymprof
