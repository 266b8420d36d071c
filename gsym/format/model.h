// gsym/format/model.h - the semantic model of a GSYM file: plain owned data that the
// builder encodes and that Reader::decode_function() produces.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gsym {

// Half-open [start, end).
struct AddressRange {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t size() const { return end > start ? end - start : 0; }
  bool contains(uint64_t addr) const { return addr >= start && addr < end; }
  bool contains(const AddressRange& r) const { return r.start >= start && r.end <= end; }
  bool operator==(const AddressRange&) const = default;
  auto operator<=>(const AddressRange&) const = default;
};

// One file-table entry. Index 0 of every file table is the empty entry.
struct FileEntry {
  std::string directory;
  std::string basename;
  bool operator==(const FileEntry&) const = default;
  auto operator<=>(const FileEntry&) const = default;
};

// A line-table row: active from `address` until the next row's address.
// `file` is an index into the file table (0 = no file).
struct LineEntry {
  uint64_t address = 0;
  uint32_t file = 0;
  uint32_t line = 0;
  bool operator==(const LineEntry&) const = default;
};

// A node of the inline tree. call_file/call_line give the call site in the
// parent (the function this one was inlined into).
struct InlineNode {
  std::vector<AddressRange> ranges;
  std::string name;
  uint32_t call_file = 0;
  uint32_t call_line = 0;
  std::vector<InlineNode> children;
  bool operator==(const InlineNode&) const = default;
};

struct CallSite {
  static constexpr uint8_t kInternal = 1;
  static constexpr uint8_t kExternal = 2;
  uint64_t return_offset = 0;  // return address - function start
  uint8_t flags = 0;           // unknown bits are kept
  std::vector<std::string> match_regex;
  bool operator==(const CallSite&) const = default;
};

// One FunctionInfo record. Names are raw bytes (not validated as UTF-8).
struct Function {
  AddressRange range;
  std::string name;
  std::vector<LineEntry> lines;            // sorted by address; empty = no line table
  std::optional<InlineNode> inline_tree;   // root = the concrete function
  std::vector<Function> merged;            // MergedFunctionsInfo (same range)
  std::vector<CallSite> call_sites;        // CallSiteInfo
  bool operator==(const Function&) const = default;
};

// The flat form of a function, for producers that add millions of inline
// nodes (the DWARF converter): no allocation per node, no strings copied.
// Names are string-table offsets returned by Builder::add_string, so every
// name is added first; 0 means no name (allowed for inline nodes only).
// Inline nodes are in pre-order, each followed by its subtree; node 0 is the
// function itself (its ranges lie inside the function's range).
struct FlatInlineNode {
  uint32_t ranges_begin = 0;  // into FlatFunction::inline_ranges
  uint32_t ranges_count = 0;
  uint32_t name = 0;
  uint32_t call_file = 0;
  uint32_t call_line = 0;
  uint32_t child_count = 0;  // direct children
  bool operator==(const FlatInlineNode&) const = default;
};

struct FlatFunction {
  AddressRange range;
  uint32_t name = 0;
  std::span<const LineEntry> lines;                // as Function::lines
  std::span<const FlatInlineNode> inline_nodes;    // empty = no inline tree
  std::span<const AddressRange> inline_ranges;
};

// What Reader::verify() counted in a whole file (verify() decodes every
// record; the record decoders add their rows and nodes).
struct VerifyReport {
  uint64_t functions = 0;       // address-table entries
  uint64_t line_rows = 0;       // rows in all line tables
  uint64_t inline_nodes = 0;    // inline-tree nodes, roots included
  uint64_t files = 0;           // file-table entries, including entry 0
  uint64_t strings = 0;         // NUL-terminated strings in the string table
  uint64_t merged_functions = 0;
  uint64_t call_sites = 0;
};

}  // namespace gsym
