// gsym/builder/builder.h - deterministic GSYM writer: version 1 (LLVM <= 22 reads
// only that; the default) or version 2 (LLVM 23's, on request).
//
// Functions may be added in any order; the same set of inputs (and the same
// sequence of add_string/add_file calls) always gives the same bytes.
// Encoding follows LLVM's writer exactly (header, tables, line-table delta
// window, inline tree), and finalize() applies LLVM 22's sort / de-duplicate /
// prune rules, with a fixed rule among aliases at one address.
//
// Function order (finalize): LLVM's key first - range (start, end), then
// inline tree (none < fewest descendants < more), then line table (none <
// fewer rows < more; equal counts by row addresses). LLVM breaks remaining
// ties by insertion order; we break them by name bytes, then by the whole
// record (rows, inline tree, call sites, merged functions), so the order never
// depends on insertion order (unless BuilderOptions::insertion_order_ties). Among records with the same range the last in
// this order is kept ("later replaces earlier"): a record with line/inline
// info beats a bare symbol, and among bare aliases the greatest name wins.
//
// String table: offset 0 is "", then strings in first-insertion order,
// de-duplicated, no suffix merging. add_string/add_file intern immediately.
// Strings not added explicitly are appended at encode time walking the
// finalized functions in order; per function: name, inline-tree names
// (pre-order), call-site regexes, then each merged function the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/base/expected.h"
#include "gsym/base/huge_pages.h"
#include "gsym/format/format.h"
#include "gsym/format/model.h"
#include "gsym/format/format.h"  // Endian

namespace gsym {

struct BuilderOptions {
  Endian endian = Endian::Little;
  // GSYM format version written: kVersion (1) or kVersion2 (2).
  uint16_t version = kVersion;
  std::optional<uint64_t> base_address;  // default: lowest function start
  std::vector<uint8_t> build_id;         // version 1: 0..20 bytes; version 2: any
  // Executable address ranges (LLVM's "valid text ranges"): a trailing
  // zero-size function is extended to the end of the range holding it.
  // Adjacent or overlapping ranges are merged first, as LLVM does.
  std::vector<AddressRange> text_ranges;
  // Apply LLVM 22's finalize rules (drop equal duplicates, a later richer
  // record replaces an earlier one of the same range, zero-size records
  // swallowed by a following record that contains their start). false keeps
  // every record as given (sorted only).
  bool deduplicate = true;
  // Break ties of LLVM's sort key by insertion order, exactly as LLVM does,
  // instead of by content: output is then byte-identical to llvm-gsymutil's
  // when functions are added in its order, but depends on that order (a
  // converter that adds in a fixed order stays deterministic).
  bool insertion_order_ties = false;
};

class Builder {
 public:
  explicit Builder(BuilderOptions options = {});
  ~Builder();
  Builder(Builder&&) noexcept;
  Builder& operator=(Builder&&) noexcept;
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  void set_base_address(uint64_t base);
  // More than 20 bytes is accepted here and reported by encode().
  void set_build_id(std::span<const uint8_t> id);

  // Interns a string now so it gets its offset in insertion order (LLVM's
  // string table is in first-insertion order). Returns its offset ("" -> 0).
  uint32_t add_string(std::string_view s);
  // Interns a file (directory string, then basename string, then the entry,
  // de-duplicated); returns its index. Index 0 is the reserved empty entry:
  // add_file({"", ""}) == 0.
  uint32_t add_file(const FileEntry& file);
  size_t file_count() const;

  // Validates, normalizes and stores a function. Errors: empty name, reversed
  // range, size above 4 GiB - 1, line rows outside the function or not
  // ascending, a file index not in the file table (add files first), an
  // inline node without ranges or with a range outside its parent (the root's
  // parent is the function range), an inline tree deeper than kMaxInlineDepth,
  // call-site offsets outside the function, merged functions whose range
  // differs from the function's or nested deeper than kMaxMergedDepth.
  // Normalization (as LLVM's AddressRanges): inline ranges are sorted, empty
  // ones dropped, intersecting and touching ones merged.
  Status add_function(Function function);

  // The same for a function in flat form (see FlatFunction in model.h):
  // copied into the builder's pools, no allocation per inline node. Names
  // must be offsets returned by add_string. Same checks and normalization as
  // add_function, plus the tree's shape (child counts must match the nodes).
  Status add_flat_function(const FlatFunction& function);

  // Takes over a block of line rows and returns it, writable: a flat
  // function added later whose `lines` lie inside the last block adopted is
  // referenced there instead of copied into the builder (the DWARF
  // converter hands each unit's rows over). A function's rows must not be
  // written once it is added; the block lives as long as the builder.
  std::span<LineEntry> adopt_line_rows(HugePageVector<LineEntry>&& rows);

  size_t function_count() const;

  // Applies the finalize rules (sort, de-duplicate, prune, extend a trailing
  // zero-size function) and returns the functions that will be encoded, in
  // file order, as Function values (flat functions are copied out: meant
  // for tests and tools, not for millions of functions). Idempotent.
  const std::vector<Function>& finalize();
  // Applies the finalize rules and returns how many functions will be encoded.
  size_t finalized_count();

  // Finalizes and encodes. Errors: no functions, an unknown version, a
  // build ID over 20 bytes (version 1), base address above a function start,
  // limits of the version exceeded (both: 2^32-1 functions, a 4 GiB string
  // table; version 1: records past 4 GiB).
  Expected<std::vector<uint8_t>> encode();

  // encode(), then writes atomically (temp file in the same directory +
  // rename), mode 0644.
  Status write_file(const std::string& path);

  static constexpr size_t kMaxInlineDepth = gsym::kMaxInlineDepth;
  static constexpr size_t kMaxMergedDepth = gsym::kMaxMergedDepth;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gsym
