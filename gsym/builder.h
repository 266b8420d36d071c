// gsym/builder.h - deterministic GSYM (version 1) writer.
//
// Functions may be added in any order; the same set of inputs (and the same
// sequence of add_string/add_file calls) always gives the same bytes.
// Encoding follows LLVM's writer exactly (header, tables, line-table delta
// window, inline tree), and finalize() applies LLVM 22's sort / de-duplicate /
// prune rules, with a fixed rule among aliases at one address.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/expected.h"
#include "gsym/model.h"
#include "gsym/reader.h"  // Endian

namespace gsym {

struct BuilderOptions {
  Endian endian = Endian::Little;
  std::optional<uint64_t> base_address;  // default: lowest function start
  std::vector<uint8_t> build_id;         // 0..20 bytes
  // Executable address ranges (LLVM's "valid text ranges"): a trailing
  // zero-size function is extended to the end of the range holding it.
  std::vector<AddressRange> text_ranges;
  // Apply LLVM 22's finalize rules (drop equal duplicates, a later richer
  // record replaces an earlier one of the same range, zero-size records
  // swallowed by a following record that contains their start). false keeps
  // every record as given (sorted only).
  bool deduplicate = true;
};

class Builder {
 public:
  explicit Builder(BuilderOptions options = {});

  void set_base_address(uint64_t base);
  void set_build_id(std::span<const uint8_t> id);
  void set_text_ranges(std::vector<AddressRange> ranges);

  // Interns a string now so it gets its offset in insertion order (LLVM's
  // string table is in first-insertion order). Strings not added explicitly
  // are interned at encode time, in sorted-function order.
  uint32_t add_string(std::string_view s);
  // Interns a file (directory and basename strings, then the entry); returns
  // its index. Index 0 is the reserved empty entry: add_file({"", ""}) == 0.
  uint32_t add_file(const FileEntry& file);

  // Validates and stores a function. Errors: empty name, reversed range, size
  // above 4 GiB, line rows outside the function or not ascending, a file
  // index not in the file table, inline ranges outside their parent or
  // unsorted/overlapping, an inline tree deeper than kMaxInlineDepth,
  // call-site offsets outside the function.
  Status add_function(Function function);

  size_t function_count() const;

  // Finalizes (sort, dedupe, prune) and encodes. Errors: no functions,
  // limits of version 1 exceeded.
  Expected<std::vector<uint8_t>> encode();

  // encode(), then writes atomically (temp file in the same directory +
  // rename), mode 0644.
  Status write_file(const std::string& path);

  static constexpr size_t kMaxInlineDepth = 256;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gsym
