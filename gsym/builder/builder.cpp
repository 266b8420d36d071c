// gsym/builder/builder.cpp - deterministic GSYM writer, versions 1 and 2 (see
// builder.h for the ordering rules; gsym/FORMAT.md §2, §9, §10.7 for LLVM's).
#include "gsym/builder/builder.h"

#include "gsym/base/file_io.h"
#include "gsym/base/pod_array.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <compare>
#include <cstring>
#include <deque>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

#include "gsym/format/byte_writer.h"
#include "gsym/format/format.h"
#include "gsym/format/inline_info.h"
#include "gsym/format/record_encode.h"

namespace gsym {
namespace {

std::string range_text(const AddressRange& r) {
  return "[" + hex_number(r.start) + ", " + hex_number(r.end) + ")";
}

// Cheaper than std::hash (murmur over bytes) on the long mangled names every
// function and inline node looks up at least twice; tables keyed by it are
// never iterated, so the hash has no effect on the output.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      h = (h ^ word) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// Strings in first-insertion order; offsets as they will be in the table
// (offset 0 is the leading NUL = ""). Offsets are kept 64-bit so that the
// 4 GiB limit of version 1 is reported by encode() instead of wrapping.
// Open addressing with the hash, view and offset in the slot: a lookup (one
// per function and inline node, twice) touches one slot and the key's bytes.
class StringTable {
 public:
  uint64_t intern(std::string_view s) {
    if (s.empty()) return 0;
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const size_t hash = StringHash{}(s);
    Slot& slot = slots_[slot_for(s, hash)];
    if (slot.data) return slot.offset;
    const std::string& stored = storage_.emplace_back(s);  // a deque: never moves
    slot = {hash, stored.data(), stored.size(), size_};
    ++count_;
    const size_t word = size_ / 64;
    while (strings_before_word_.size() <= word) strings_before_word_.push_back(order_.size());
    order_.push_back(stored);
    if (word >= starts_.size()) starts_.resize(word + 1 + starts_.size() / 2);
    starts_[size_ / 64] |= uint64_t{1} << (size_ % 64);
    size_ += s.size() + 1;
    return slot.offset;
  }
  // Whether an interned string starts at `offset` (0, "", always does): one
  // bit test, for validating the offsets in flat functions.
  bool is_string_start(uint64_t offset) const {
    return offset == 0 || (offset / 64 < starts_.size() && (starts_[offset / 64] >> (offset % 64) & 1));
  }
  // The string starting at `offset`, if an interned string starts there
  // ("" for 0): its index in order_ is the strings before its 64-byte word
  // plus the starts before it in the word (the sort's name tiebreak asks
  // for every pair of aliases).
  std::optional<std::string_view> at_offset(uint64_t offset) const {
    if (offset == 0) return std::string_view();
    if (!is_string_start(offset)) return std::nullopt;
    const size_t word = offset / 64;
    const uint64_t starts_below = starts_[word] & ((uint64_t{1} << (offset % 64)) - 1);
    return order_[strings_before_word_[word] + static_cast<size_t>(std::popcount(starts_below))];
  }
  const uint64_t* find(std::string_view s) const {
    const Slot& slot = slots_[slot_for(s, StringHash{}(s))];
    return slot.data ? &slot.offset : nullptr;
  }
  uint64_t size() const { return size_; }
  const std::vector<std::string_view>& order() const { return order_; }

 private:
  struct Slot {
    size_t hash = 0;
    const char* data = nullptr;  // nullptr = empty slot
    size_t size = 0;
    uint64_t offset = 0;
  };
  size_t slot_for(std::string_view s, size_t hash) const {
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].data && !(slots_[i].hash == hash && slots_[i].size == s.size() &&
                               std::memcmp(slots_[i].data, s.data(), s.size()) == 0))
      i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    const size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (!slot.data) continue;
      size_t i = slot.hash & mask;
      while (slots_[i].data) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_ = std::vector<Slot>(64);
  size_t count_ = 0;
  std::deque<std::string> storage_;
  std::vector<std::string_view> order_;
  std::vector<uint64_t> starts_;   // bit per table offset: a string starts there
  // Per 64-byte word of the table up to the last string's: how many of
  // order_'s strings start before it.
  std::vector<size_t> strings_before_word_;
  uint64_t size_ = 1;
};

// The builder's table plus the strings first met at encode time (views into
// the finalized functions), so encoding never changes the builder's table.
class EncodeStrings final : public StringOffsets {
 public:
  explicit EncodeStrings(const StringTable& base) : base_(base), size_(base.size()) {}

  void intern(std::string_view s) {
    if (s.empty() || base_.find(s) || extra_.count(s)) return;
    extra_.emplace(s, size_);
    extra_order_.push_back(s);
    size_ += s.size() + 1;
  }
  void intern_function(const Function& f) {
    intern(f.name);
    if (f.inline_tree) intern_inline(*f.inline_tree);
    for (const CallSite& cs : f.call_sites)
      for (const std::string& regex : cs.match_regex) intern(regex);
    for (const Function& merged : f.merged) intern_function(merged);
  }
  uint32_t offset_of(std::string_view s) const override {
    if (s.empty()) return 0;
    if (const uint64_t* off = base_.find(s)) return static_cast<uint32_t>(*off);
    auto it = extra_.find(s);
    return it == extra_.end() ? 0 : static_cast<uint32_t>(it->second);
  }
  uint64_t size() const { return size_; }
  void write(ByteWriter& out) const {
    out.u8(0);
    for (std::string_view s : base_.order()) {
      out.raw(s);
      out.u8(0);
    }
    for (std::string_view s : extra_order_) {
      out.raw(s);
      out.u8(0);
    }
  }

 private:
  void intern_inline(const InlineNode& node) {
    intern(node.name);
    for (const InlineNode& child : node.children) intern_inline(child);
  }

  const StringTable& base_;
  std::unordered_map<std::string_view, uint64_t, StringHash> extra_;
  std::vector<std::string_view> extra_order_;
  uint64_t size_;
};

std::vector<AddressRange> normalized(std::vector<AddressRange> ranges) {
  normalize_ranges(ranges);
  return ranges;
}

bool intersects(const AddressRange& a, const AddressRange& b) {
  return a.start < b.end && b.start < a.end;
}

// ---- validation -------------------------------------------------------------

// The checks of a function's range and line rows, whichever form (Function
// or FlatFunction) it came in. `name_of()` gives the function's name, asked
// for only to compose an error.
template <typename NameOf>
Status check_range_and_lines(NameOf&& name_of, const AddressRange& range, std::span<const LineEntry> lines,
                             size_t file_count) {
  auto where = [&] { return " in function \"" + std::string(name_of()) + "\""; };
  if (range.end < range.start)
    return Error("function \"" + std::string(name_of()) + "\" has a reversed range " + range_text(range));
  const uint64_t size = range.size();
  if (size > UINT32_MAX)
    return Error("function \"" + std::string(name_of()) + "\" is larger than 4 GiB - 1 (size " +
                 hex_number(size) + ")");
  for (size_t i = 0; i < lines.size(); ++i) {
    const LineEntry& row = lines[i];
    const bool inside = range.contains(row.address) || (size == 0 && row.address == range.start);
    if (!inside)
      return Error("line row at " + hex_number(row.address) + " is outside the function range " +
                   range_text(range) + where());
    if (i > 0 && row.address < lines[i - 1].address)
      return Error("line rows are not in ascending address order (" + hex_number(row.address) + " after " +
                   hex_number(lines[i - 1].address) + ")" + where());
    if (row.file >= file_count)
      return Error("line row at " + hex_number(row.address) + " uses file " + std::to_string(row.file) +
                   " but the file table has " + std::to_string(file_count) + " entries" + where());
  }
  return Status::success();
}

struct Validator {
  size_t file_count;
  const std::string* function_name = nullptr;
  size_t inline_nodes = 0;      // nodes below the roots of all trees validated
  size_t top_inline_nodes = 0;  // below the top-level function's root

  std::string where() const { return " in function \"" + *function_name + "\""; }

  Status inline_node(InlineNode& node, const std::vector<AddressRange>& parent, size_t depth) {
    if (depth > Builder::kMaxInlineDepth)
      return Error("inline tree deeper than " + std::to_string(Builder::kMaxInlineDepth) +
                   " levels" + where());
    for (const AddressRange& r : node.ranges)
      if (r.end < r.start)
        return Error("inline node \"" + node.name + "\" has a reversed range " + range_text(r) +
                     where());
    normalize_ranges(node.ranges);
    if (node.ranges.empty())
      return Error("inline node \"" + node.name + "\" has no non-empty range" + where());
    for (const AddressRange& r : node.ranges) {
      bool contained = std::any_of(parent.begin(), parent.end(),
                                   [&](const AddressRange& p) { return p.contains(r); });
      if (!contained)
        return Error("inline range " + range_text(r) + " of \"" + node.name +
                     "\" is outside its parent" + where());
    }
    if (node.call_file >= file_count)
      return Error("inline node \"" + node.name + "\" has call file " +
                   std::to_string(node.call_file) + " but the file table has " +
                   std::to_string(file_count) + " entries" + where());
    for (InlineNode& child : node.children) {
      ++inline_nodes;
      Status s = inline_node(child, node.ranges, depth + 1);
      if (!s) return s;
    }
    return Status::success();
  }

  Status function(Function& f, size_t merged_depth) {
    function_name = &f.name;
    if (f.name.empty())
      return Error("function at " + hex_number(f.range.start) + " has an empty name");
    if (Status s = check_range_and_lines([&] { return std::string_view(f.name); }, f.range, f.lines, file_count); !s)
      return s;
    const uint64_t size = f.range.size();
    if (f.inline_tree) {
      const size_t before = inline_nodes;
      Status s = inline_node(*f.inline_tree, {f.range}, 1);
      if (!s) return s;
      function_name = &f.name;
      if (merged_depth == 0) top_inline_nodes = inline_nodes - before;
    }
    for (const CallSite& cs : f.call_sites)
      if (cs.return_offset >= size)
        return Error("call site offset " + hex_number(cs.return_offset) +
                     " is outside the function (size " + hex_number(size) + ")" + where());
    if (!f.merged.empty() && merged_depth >= Builder::kMaxMergedDepth)
      return Error("merged functions nested deeper than " +
                   std::to_string(Builder::kMaxMergedDepth) + " levels" + where());
    for (Function& merged : f.merged) {
      if (merged.range != f.range)
        return Error("merged function \"" + merged.name + "\" has range " +
                     range_text(merged.range) + ", not its parent's " + range_text(f.range) +
                     where());
      Status s = function(merged, merged_depth + 1);
      if (!s) return s;
      function_name = &f.name;
    }
    return Status::success();
  }
};

// ---- ordering ---------------------------------------------------------------

size_t descendant_count(const InlineNode& node) {
  size_t n = node.children.size();
  for (const InlineNode& child : node.children) n += descendant_count(child);
  return n;
}

std::strong_ordering compare_lines_by_address(std::span<const LineEntry> a,
                                              std::span<const LineEntry> b) {
  if (a.size() != b.size()) return a.size() <=> b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].address != b[i].address) return a[i].address <=> b[i].address;
  return std::strong_ordering::equal;
}

std::strong_ordering compare_rows(const LineEntry& a, const LineEntry& b) {
  return std::tie(a.address, a.file, a.line) <=> std::tie(b.address, b.file, b.line);
}

std::strong_ordering compare_nodes(const InlineNode& a, const InlineNode& b) {
  if (auto c = a.ranges <=> b.ranges; c != 0) return c;
  if (auto c = a.name <=> b.name; c != 0) return c;
  if (auto c = std::tie(a.call_file, a.call_line) <=> std::tie(b.call_file, b.call_line); c != 0)
    return c;
  return std::lexicographical_compare_three_way(a.children.begin(), a.children.end(),
                                                b.children.begin(), b.children.end(),
                                                compare_nodes);
}

std::strong_ordering compare_call_sites(const CallSite& a, const CallSite& b) {
  return std::tie(a.return_offset, a.flags, a.match_regex) <=>
         std::tie(b.return_offset, b.flags, b.match_regex);
}

// Total order over everything a record holds: the tiebreak after LLVM's key.
std::strong_ordering compare_content(const Function& a, const Function& b) {
  if (auto c = a.range <=> b.range; c != 0) return c;
  if (auto c = a.name <=> b.name; c != 0) return c;
  if (auto c = std::lexicographical_compare_three_way(a.lines.begin(), a.lines.end(),
                                                      b.lines.begin(), b.lines.end(),
                                                      compare_rows);
      c != 0)
    return c;
  if (a.inline_tree.has_value() != b.inline_tree.has_value())
    return a.inline_tree.has_value() <=> b.inline_tree.has_value();
  if (a.inline_tree)
    if (auto c = compare_nodes(*a.inline_tree, *b.inline_tree); c != 0) return c;
  if (auto c = std::lexicographical_compare_three_way(a.call_sites.begin(), a.call_sites.end(),
                                                      b.call_sites.begin(), b.call_sites.end(),
                                                      compare_call_sites);
      c != 0)
    return c;
  return std::lexicographical_compare_three_way(a.merged.begin(), a.merged.end(),
                                                b.merged.begin(), b.merged.end(),
                                                compare_content);
}

// LLVM's FunctionInfo equality: call sites and merged functions do not count.
bool llvm_equal(const Function& a, const Function& b) {
  return a.range == b.range && a.name == b.name && a.lines == b.lines &&
         a.inline_tree == b.inline_tree;
}

uint8_t address_offset_size(uint64_t max_delta) {
  if (max_delta <= 0xff) return 1;
  if (max_delta <= 0xffff) return 2;
  if (max_delta <= 0xffffffff) return 4;
  return 8;
}

}  // namespace

// ---- Builder ------------------------------------------------------------------

struct Builder::State {
  BuilderOptions options;
  StringTable strings;
  std::vector<std::pair<uint64_t, uint64_t>> files{{0, 0}};  // string offsets
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> file_index{{{0, 0}, 0}};

  // A stored function: either a Function ("rich": add_function) or a flat
  // function whose rows, nodes and node ranges live in the pools below.
  static constexpr uint32_t kFlat = UINT32_MAX;
  struct Record {
    AddressRange range;
    int64_t inline_size = -1;  // LLVM's sort key: nodes below the root; -1 = no tree
    uint32_t rich = kFlat;     // index into `rich`
    uint32_t name = 0;         // flat: string offset
    uint32_t lines_block = 0;  // 0 = line_pool, else line_blocks[lines_block - 1]
    uint32_t lines_begin = 0, lines_count = 0;
    uint32_t nodes_begin = 0, nodes_count = 0;
  };
  std::vector<Record> records;
  std::vector<Function> rich;
  PodArray<LineEntry> line_pool;
  // Blocks given to adopt_line_rows: their functions' rows are referenced
  // in place (a deque: adopting never moves the earlier blocks' vectors).
  std::deque<HugePageVector<LineEntry>> line_blocks;
  size_t adopted_rows_used = 0;  // rows of line_blocks referenced by records
  PodArray<FlatInlineNode> node_pool;  // ranges_begin index range_pool
  PodArray<AddressRange> range_pool;
  std::vector<Function> materialized;  // finalize()'s copy
  bool materialized_valid = false;
  bool finalized = false;

  std::span<const LineEntry> lines_of(const Record& r) const {
    if (r.rich != kFlat) return rich[r.rich].lines;
    const std::span<const LineEntry> pool =
        r.lines_block ? std::span<const LineEntry>(line_blocks[r.lines_block - 1]) : std::span<const LineEntry>(line_pool);
    return pool.subspan(r.lines_begin, r.lines_count);
  }
  std::span<const FlatInlineNode> nodes_of(const Record& r) const {
    return std::span<const FlatInlineNode>(node_pool).subspan(r.nodes_begin, r.nodes_count);
  }
  std::string_view string_at(uint32_t offset) const {
    return strings.at_offset(offset).value_or(std::string_view());
  }
  InlineNode materialize_node(std::span<const FlatInlineNode> nodes, size_t& i) const;
  Function materialize(const Record& r) const;
  std::strong_ordering compare_content(const Record& a, const Record& b) const;
  std::strong_ordering compare_flat_nodes(std::span<const FlatInlineNode> a, size_t& i,
                                          std::span<const FlatInlineNode> b, size_t& j) const;
  bool llvm_equal(const Record& a, const Record& b) const;
  Status add_flat(const FlatFunction& f);
  // Where `lines` start in the last adopted block, when they lie inside it.
  std::optional<uint32_t> adopted_position(std::span<const LineEntry> lines) const {
    if (line_blocks.empty() || lines.empty()) return std::nullopt;
    const HugePageVector<LineEntry>& block = line_blocks.back();
    // Compared as integers: the span may point anywhere.
    const auto first = reinterpret_cast<uintptr_t>(lines.data());
    const auto block_first = reinterpret_cast<uintptr_t>(block.data());
    const auto block_end = reinterpret_cast<uintptr_t>(block.data() + block.size());
    if (first < block_first || first >= block_end || lines.size() > size_t(block_end - first) / sizeof(LineEntry))
      return std::nullopt;
    const size_t begin = (first - block_first) / sizeof(LineEntry);
    if (begin > UINT32_MAX || line_blocks.size() >= UINT32_MAX) return std::nullopt;
    return static_cast<uint32_t>(begin);
  }
  struct OpenNode {  // add_flat's walk: an ancestor and its children still to come
    size_t node;
    uint32_t children_left;
  };
  std::vector<OpenNode> open_scratch;
  std::vector<AddressRange> ranges_scratch;
  std::optional<std::string> add_flat_node(FlatInlineNode node, std::span<const AddressRange> function_ranges,
                                           std::span<const AddressRange> parent,
                                           std::vector<AddressRange>& scratch);

  // Encoding (after finalize_records).
  Status encode_record(ByteWriter& out, const Record& r, const StringOffsets& strings) const;
  void write_file_table(ByteWriter& out) const;
  Expected<std::vector<uint8_t>> encode_v2(ByteWriter& out, const EncodeStrings& strings,
                                           uint64_t base, uint8_t offset_size) const;

  void sort_functions();
  void prune_functions();
  void extend_trailing_zero_size();
  void finalize_records();
  // Back to the state before finalize_records(): the trailing extension is
  // undone, so a builder finalized halfway (finalize(), more adds, encode())
  // gives the same bytes as one finalized once.
  void unfinalize();
  struct Extension {
    size_t index;
    AddressRange original;
  };
  std::optional<Extension> extended;
};

InlineNode Builder::State::materialize_node(std::span<const FlatInlineNode> nodes, size_t& i) const {
  const FlatInlineNode& flat = nodes[i++];
  InlineNode node;
  node.ranges.assign(range_pool.begin() + flat.ranges_begin,
                     range_pool.begin() + flat.ranges_begin + flat.ranges_count);
  node.name = std::string(string_at(flat.name));
  node.call_file = flat.call_file;
  node.call_line = flat.call_line;
  node.children.reserve(flat.child_count);
  for (uint32_t c = 0; c < flat.child_count; ++c) node.children.push_back(materialize_node(nodes, i));
  return node;
}

Function Builder::State::materialize(const Record& r) const {
  if (r.rich != kFlat) return rich[r.rich];
  Function f;
  f.range = r.range;
  f.name = std::string(string_at(r.name));
  std::span<const LineEntry> lines = lines_of(r);
  f.lines.assign(lines.begin(), lines.end());
  if (r.nodes_count) {
    size_t i = 0;
    f.inline_tree = materialize_node(nodes_of(r), i);
  }
  return f;
}

// The content tiebreak, on records: only reached for equal LLVM keys (same
// range, tree size and row addresses), which is rare, so flat records are
// simply copied out.
std::strong_ordering Builder::State::compare_content(const Record& a, const Record& b) const {
  if (a.rich != kFlat && b.rich != kFlat) return gsym::compare_content(rich[a.rich], rich[b.rich]);
  if (a.rich != kFlat || b.rich != kFlat) return gsym::compare_content(materialize(a), materialize(b));
  // Both flat (C++ has many: one inline function's copies in many units): the
  // same order as on the materialized functions, without materializing.
  if (auto c = a.range <=> b.range; c != 0) return c;
  if (a.name != b.name)  // equal offsets: the same string
    if (auto c = string_at(a.name) <=> string_at(b.name); c != 0) return c;
  const std::span<const LineEntry> la = lines_of(a), lb = lines_of(b);
  if (auto c = std::lexicographical_compare_three_way(la.begin(), la.end(), lb.begin(), lb.end(),
                                                      compare_rows);
      c != 0)
    return c;
  if (auto c = (a.nodes_count != 0) <=> (b.nodes_count != 0); c != 0 || a.nodes_count == 0) return c;
  size_t i = 0, j = 0;
  return compare_flat_nodes(nodes_of(a), i, nodes_of(b), j);
}

// compare_nodes on flat pre-order trees: node x of `a` against node y of
// `b`, then their children pairwise; i and j move past what was compared.
std::strong_ordering Builder::State::compare_flat_nodes(std::span<const FlatInlineNode> a, size_t& i,
                                                        std::span<const FlatInlineNode> b,
                                                        size_t& j) const {
  const FlatInlineNode& x = a[i++];
  const FlatInlineNode& y = b[j++];
  const auto rx = std::span<const AddressRange>(range_pool).subspan(x.ranges_begin, x.ranges_count);
  const auto ry = std::span<const AddressRange>(range_pool).subspan(y.ranges_begin, y.ranges_count);
  if (auto c = std::lexicographical_compare_three_way(rx.begin(), rx.end(), ry.begin(), ry.end()); c != 0)
    return c;
  if (x.name != y.name)
    if (auto c = string_at(x.name) <=> string_at(y.name); c != 0) return c;
  if (auto c = std::tie(x.call_file, x.call_line) <=> std::tie(y.call_file, y.call_line); c != 0) return c;
  const uint32_t shared = std::min(x.child_count, y.child_count);
  for (uint32_t k = 0; k < shared; ++k)
    if (auto c = compare_flat_nodes(a, i, b, j); c != 0) return c;
  return x.child_count <=> y.child_count;
}

bool Builder::State::llvm_equal(const Record& a, const Record& b) const {
  if (a.rich != kFlat && b.rich != kFlat) return gsym::llvm_equal(rich[a.rich], rich[b.rich]);
  if (a.rich != kFlat || b.rich != kFlat) return gsym::llvm_equal(materialize(a), materialize(b));
  if (a.range != b.range || a.name != b.name || a.nodes_count != b.nodes_count) return false;
  const std::span<const LineEntry> la = lines_of(a), lb = lines_of(b);
  if (!std::equal(la.begin(), la.end(), lb.begin(), lb.end())) return false;
  const std::span<const FlatInlineNode> na = nodes_of(a), nb = nodes_of(b);
  for (size_t i = 0; i < na.size(); ++i) {
    const FlatInlineNode &x = na[i], &y = nb[i];
    if (x.name != y.name || x.call_file != y.call_file || x.call_line != y.call_line ||
        x.child_count != y.child_count || x.ranges_count != y.ranges_count ||
        !std::equal(range_pool.begin() + x.ranges_begin,
                    range_pool.begin() + x.ranges_begin + x.ranges_count,
                    range_pool.begin() + y.ranges_begin))
      return false;
  }
  return true;
}

Status Builder::State::add_flat(const FlatFunction& f) {
  if (f.name == 0) return Error("function at " + hex_number(f.range.start) + " has an empty name");
  if (!strings.is_string_start(f.name))
    return Error("function at " + hex_number(f.range.start) + " has name offset " + std::to_string(f.name) +
                 ", which is not a string added with add_string");
  // The name is looked up only to compose an error (this runs for every
  // function).
  auto name_text = [&] { return string_at(f.name); };
  auto where = [&] { return " in function \"" + std::string(name_text()) + "\""; };
  if (Status s = check_range_and_lines(name_text, f.range, f.lines, files.size()); !s) return s;
  const uint64_t pool_limit = UINT32_MAX;
  if (line_pool.size() + f.lines.size() > pool_limit ||
      node_pool.size() + f.inline_nodes.size() > pool_limit ||
      range_pool.size() + f.inline_ranges.size() > pool_limit)
    return Error("too many line rows or inline nodes for one builder" + where());

  Record record;
  record.range = f.range;
  record.name = f.name;
  const size_t ranges_before = range_pool.size();
  const size_t nodes_before = node_pool.size();
  auto fail = [&](std::string message) -> Status {
    range_pool.truncate(ranges_before);
    node_pool.truncate(nodes_before);
    return Error(std::move(message) + where());
  };
  // Pre-order walk: `open` holds, per ancestor, its node index and how many
  // of its children are still to come (scratch kept from call to call).
  std::vector<OpenNode>& open = open_scratch;
  open.clear();
  std::vector<AddressRange>& ranges = ranges_scratch;  // one node's
  for (size_t i = 0; i < f.inline_nodes.size(); ++i) {
    if (i > 0 && open.empty()) return fail("inline nodes follow the end of the tree");
    const size_t depth = open.size() + 1;
    if (depth > Builder::kMaxInlineDepth)
      return fail("inline tree deeper than " + std::to_string(Builder::kMaxInlineDepth) + " levels");
    const std::span<const AddressRange> parent =
        open.empty() ? std::span<const AddressRange>(&f.range, 1)
                     : std::span<const AddressRange>(range_pool).subspan(
                           node_pool[open.back().node].ranges_begin,
                           node_pool[open.back().node].ranges_count);
    if (std::optional<std::string> error = add_flat_node(f.inline_nodes[i], f.inline_ranges, parent, ranges))
      return fail(std::move(*error));
    if (!open.empty()) --open.back().children_left;
    if (node_pool.back().child_count) open.push_back({node_pool.size() - 1, node_pool.back().child_count});
    while (!open.empty() && open.back().children_left == 0) open.pop_back();
  }
  if (!open.empty()) return fail("an inline node declares more children than follow it");
  if (!f.inline_nodes.empty()) {
    record.nodes_begin = static_cast<uint32_t>(nodes_before);
    record.nodes_count = static_cast<uint32_t>(f.inline_nodes.size());
    record.inline_size = int64_t(f.inline_nodes.size()) - 1;
  }
  record.lines_count = static_cast<uint32_t>(f.lines.size());
  if (std::optional<uint32_t> begin = adopted_position(f.lines)) {
    record.lines_block = static_cast<uint32_t>(line_blocks.size());
    record.lines_begin = *begin;
    adopted_rows_used += f.lines.size();
  } else {
    record.lines_begin = static_cast<uint32_t>(line_pool.size());
    line_pool.append(f.lines);
  }
  records.push_back(record);
  return Status::success();
}

// Checks one flat inline node against its function's range list and its
// parent's ranges (`parent`, a view into range_pool read before anything is
// added), then stores it with its normalized ranges (`scratch` when they are
// not normalized already). The error, without the function's name, if any.
std::optional<std::string> Builder::State::add_flat_node(FlatInlineNode node,
                                                         std::span<const AddressRange> function_ranges,
                                                         std::span<const AddressRange> parent,
                                                         std::vector<AddressRange>& scratch) {
  auto node_name = [&] { return std::string(string_at(node.name)); };
  if (!strings.is_string_start(node.name))
    return "inline node name offset " + std::to_string(node.name) + " is not an added string";
  if (uint64_t(node.ranges_begin) + node.ranges_count > function_ranges.size())
    return "inline node \"" + node_name() + "\" has ranges outside the range list";
  const std::span<const AddressRange> given = function_ranges.subspan(node.ranges_begin, node.ranges_count);
  // Normalized already (sorted, non-empty, apart) is the usual case: checked
  // without a copy.
  bool is_normalized = !given.empty();
  for (size_t r = 0; r < given.size() && is_normalized; ++r)
    is_normalized = given[r].start < given[r].end && (r == 0 || given[r - 1].end < given[r].start);
  std::span<const AddressRange> own = given;
  if (!is_normalized) {
    scratch.assign(given.begin(), given.end());
    for (const AddressRange& r : scratch)
      if (r.end < r.start) return "inline node \"" + node_name() + "\" has a reversed range " + range_text(r);
    normalize_ranges(scratch);
    if (scratch.empty()) return "inline node \"" + node_name() + "\" has no non-empty range";
    own = scratch;
  }
  for (const AddressRange& r : own) {
    const bool contained =
        std::any_of(parent.begin(), parent.end(), [&](const AddressRange& p) { return p.contains(r); });
    if (!contained)
      return "inline range " + range_text(r) + " of \"" + node_name() + "\" is outside its parent";
  }
  if (node.call_file >= files.size())
    return "inline node \"" + node_name() + "\" has call file " + std::to_string(node.call_file) +
           " but the file table has " + std::to_string(files.size()) + " entries";
  node.ranges_begin = static_cast<uint32_t>(range_pool.size());
  node.ranges_count = static_cast<uint32_t>(own.size());
  range_pool.append(own);
  node_pool.push_back(node);
  return std::nullopt;
}

Builder::Builder(BuilderOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
}
Builder::~Builder() = default;
Builder::Builder(Builder&&) noexcept = default;
Builder& Builder::operator=(Builder&&) noexcept = default;

void Builder::set_base_address(uint64_t base) { state_->options.base_address = base; }

void Builder::set_build_id(std::span<const uint8_t> id) {
  state_->options.build_id.assign(id.begin(), id.end());
}

uint32_t Builder::add_string(std::string_view s) {
  uint64_t offset = state_->strings.intern(s);
  return offset > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(offset);
}

uint32_t Builder::add_file(const FileEntry& file) {
  const uint64_t dir = state_->strings.intern(file.directory);
  const uint64_t base = state_->strings.intern(file.basename);
  auto [it, inserted] = state_->file_index.emplace(std::pair{dir, base},
                                                   static_cast<uint32_t>(state_->files.size()));
  if (inserted) state_->files.emplace_back(dir, base);
  return it->second;
}

size_t Builder::file_count() const { return state_->files.size(); }

Status Builder::add_function(Function function) {
  state_->unfinalize();
  Validator validator{state_->files.size()};
  Status s = validator.function(function, 0);
  if (!s) return s;
  if (state_->rich.size() >= State::kFlat) return Error("too many functions for one builder");
  State::Record record;
  record.range = function.range;
  record.inline_size = function.inline_tree ? int64_t(validator.top_inline_nodes) : -1;
  record.rich = static_cast<uint32_t>(state_->rich.size());
  state_->rich.push_back(std::move(function));
  state_->records.push_back(record);
  state_->finalized = false;
  state_->materialized_valid = false;
  return Status::success();
}

std::span<LineEntry> Builder::adopt_line_rows(HugePageVector<LineEntry>&& rows) {
  return state_->line_blocks.emplace_back(std::move(rows));
}

Status Builder::add_flat_function(const FlatFunction& function) {
  state_->unfinalize();
  Status s = state_->add_flat(function);
  if (!s) return s;
  state_->finalized = false;
  state_->materialized_valid = false;
  return Status::success();
}

size_t Builder::function_count() const { return state_->records.size(); }

void Builder::State::sort_functions() {
  // LLVM's key (range, inline descendant count, line table), then the
  // content tiebreak; ties left after that are identical records.
  std::vector<uint32_t> order(records.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t ia, uint32_t ib) {
    const Record& a = records[ia];
    const Record& b = records[ib];
    if (auto c = a.range <=> b.range; c != 0) return c < 0;
    if (a.inline_size != b.inline_size) return a.inline_size < b.inline_size;
    if (auto c = compare_lines_by_address(lines_of(a), lines_of(b)); c != 0) return c < 0;
    return !options.insertion_order_ties && compare_content(a, b) < 0;
  });
  std::vector<Record> sorted;
  sorted.reserve(records.size());
  for (uint32_t i : order) sorted.push_back(records[i]);
  records = std::move(sorted);
}

void Builder::State::prune_functions() {
  if (records.size() < 2) return;
  std::vector<Record> kept;
  kept.reserve(records.size());
  kept.push_back(records.front());
  for (size_t i = 1; i < records.size(); ++i) {
    Record& prev = kept.back();
    const Record& curr = records[i];
    if (prev.range == curr.range) {
      if (!llvm_equal(prev, curr)) prev = curr;  // the later, richer one wins
    } else if (intersects(prev.range, curr.range)) {
      kept.push_back(curr);  // overlapping: LLVM keeps both
    } else if (prev.range.size() == 0 && curr.range.contains(prev.range.start)) {
      prev = curr;  // a sized record swallows a zero-size one at its start
    } else {
      kept.push_back(curr);
    }
  }
  records = std::move(kept);
}

void Builder::State::extend_trailing_zero_size() {
  if (records.empty() || records.back().range.size() != 0) return;
  Record& last = records.back();
  for (const AddressRange& text : normalized(options.text_ranges)) {
    if (text.contains(last.range.start)) {
      // Capped so the record stays encodable (sizes are u32 in version 1).
      extended = Extension{records.size() - 1, last.range};
      last.range.end = last.range.start + std::min<uint64_t>(text.end - last.range.start, UINT32_MAX);
      if (last.rich != kFlat) {
        Function& f = rich[last.rich];
        f.range = last.range;
        for (Function& merged : f.merged) merged.range = last.range;
      }
      return;
    }
  }
}

void Builder::State::unfinalize() {
  if (extended) {
    Record& r = records[extended->index];
    r.range = extended->original;
    if (r.rich != kFlat) {
      Function& f = rich[r.rich];
      f.range = r.range;
      for (Function& merged : f.merged) merged.range = r.range;
    }
    extended.reset();
  }
  finalized = false;
  materialized_valid = false;
}

void Builder::State::finalize_records() {
  if (finalized) return;
  sort_functions();
  if (options.deduplicate) prune_functions();
  extend_trailing_zero_size();
  finalized = true;
  materialized_valid = false;
}

const std::vector<Function>& Builder::finalize() {
  State& st = *state_;
  st.finalize_records();
  if (!st.materialized_valid) {
    st.materialized.clear();
    st.materialized.reserve(st.records.size());
    for (const State::Record& r : st.records) st.materialized.push_back(st.materialize(r));
    st.materialized_valid = true;
  }
  return st.materialized;
}

size_t Builder::finalized_count() {
  state_->finalize_records();
  return state_->records.size();
}

Expected<std::vector<uint8_t>> Builder::encode() {
  State& st = *state_;
  st.finalize_records();
  const std::vector<State::Record>& records = st.records;
  const BuilderOptions& opt = st.options;
  if (records.empty()) return Error("no functions to encode");
  if (opt.version != kVersion && opt.version != kVersion2)
    return Error(ErrorCode::Unsupported, "unsupported GSYM version " + std::to_string(opt.version) + " (1 or 2)");
  const bool v2 = opt.version == kVersion2;
  if (!v2 && opt.build_id.size() > kMaxUuidSize)
    return Error("invalid build ID size " + std::to_string(opt.build_id.size()) +
                 " (GSYM version 1 allows at most 20 bytes)");
  if (records.size() > UINT32_MAX)
    return Error("too many functions for GSYM version " + std::to_string(opt.version));
  const uint64_t first_start = records.front().range.start;
  const uint64_t base = opt.base_address.value_or(first_start);
  if (base > first_start)
    return Error("base address " + hex_number(base) + " is above the first function start " +
                 hex_number(first_start));
  const uint8_t offset_size = address_offset_size(records.back().range.start - base);

  // Flat functions' strings were all added explicitly: only rich functions
  // can bring strings first met here.
  EncodeStrings strings(st.strings);
  for (const State::Record& r : records)
    if (r.rich != State::kFlat) strings.intern_function(st.rich[r.rich]);
  // Offsets are held in 32 bits while building, in both versions.
  if (strings.size() > UINT32_MAX)
    return Error("string table exceeds 4 GiB (GSYM limit of this writer)");

  ByteWriter out(opt.endian, v2 ? 8 : 4);
  // Above what compilers' output needs (about 2.5 bytes a row, 20 a node
  // with its ranges, on sqlite3, libc and cppcheck): untouched capacity
  // costs address space only, while growing past it would copy the file
  // written so far into new pages.
  out.reserve(records.size() * 64 + st.strings.size() + st.files.size() * 16 + (st.line_pool.size() + st.adopted_rows_used) * 4 +
              st.node_pool.size() * 16 + st.range_pool.size() * 8);
  if (v2) return st.encode_v2(out, strings, base, offset_size);
  out.u32(kMagic);
  out.u16(kVersion);
  out.u8(offset_size);
  out.u8(static_cast<uint8_t>(opt.build_id.size()));
  out.u64(base);
  out.u32(static_cast<uint32_t>(records.size()));
  const uint64_t strtab_fields = out.tell();
  out.u32(0);  // StrtabOffset, patched below
  out.u32(0);  // StrtabSize
  for (uint8_t b : opt.build_id) out.u8(b);
  out.zeros(kMaxUuidSize - opt.build_id.size());

  out.align_to(offset_size);
  for (const State::Record& r : records) out.uint(r.range.start - base, offset_size);
  out.align_to(4);
  const uint64_t info_offsets = out.tell();
  out.zeros(4 * records.size());

  st.write_file_table(out);

  const uint64_t strtab_offset = out.tell();
  strings.write(out);
  if (strtab_offset > UINT32_MAX)
    return Error("string table offset exceeds 4 GiB (GSYM version 1 limit)");
  out.fixup_u32(strtab_fields, static_cast<uint32_t>(strtab_offset));
  out.fixup_u32(strtab_fields + 4, static_cast<uint32_t>(strings.size()));

  for (size_t i = 0; i < records.size(); ++i) {
    const State::Record& r = records[i];
    out.align_to(4);
    const uint64_t offset = out.tell();
    if (offset > UINT32_MAX)
      return Error("address info offset exceeded 32-bit max (function at " + hex_number(r.range.start) + ")");
    if (Status s = st.encode_record(out, r, strings); !s) return s.error();
    out.fixup_u32(info_offsets + 4 * i, static_cast<uint32_t>(offset));
  }
  return out.take();
}

Status Builder::State::encode_record(ByteWriter& out, const Record& r,
                                     const StringOffsets& strings) const {
  return r.rich != kFlat
             ? encode_function_info(out, rich[r.rich], strings, /*pad=*/true)
             : encode_flat_function_info(out, r.range, r.name, lines_of(r), nodes_of(r),
                                         range_pool);
}

// u32 count, then each entry's directory and basename string offsets in the
// record width (u32 in version 1, u64 in version 2).
void Builder::State::write_file_table(ByteWriter& out) const {
  out.u32(static_cast<uint32_t>(files.size()));
  for (const auto& [dir, basename] : files) {
    out.string_offset(dir);
    out.string_offset(basename);
  }
}

// Version 2, in LLVM main's layout (gsym/FORMAT.md §9.2): header, directory
// ([UUID], AddrOffsets, AddrInfoOffsets, FileTable, StringTable,
// FunctionInfo, end), then the sections in that order: the UUID unaligned,
// addresses aligned to their size, info offsets to 8 (u64, from the start
// of the FunctionInfo section), the file table to 4, strings unaligned,
// records each aligned to 4.
Expected<std::vector<uint8_t>> Builder::State::encode_v2(ByteWriter& out,
                                                        const EncodeStrings& strings,
                                                        uint64_t base, uint8_t offset_size) const {
  out.u32(kMagic);
  out.u16(kVersion2);
  out.u8(offset_size);
  out.u8(0);  // StrTableEncoding: NUL-terminated strings
  out.u64(base);
  out.u32(static_cast<uint32_t>(records.size()));

  std::vector<GlobalInfoType> order;
  if (!options.build_id.empty()) order.push_back(GlobalInfoType::UUID);
  for (GlobalInfoType t : {GlobalInfoType::AddrOffsets, GlobalInfoType::AddrInfoOffsets,
                           GlobalInfoType::FileTable, GlobalInfoType::StringTable,
                           GlobalInfoType::FunctionInfo})
    order.push_back(t);
  const uint64_t directory = out.tell();
  out.zeros(kDirectoryEntrySize * (order.size() + 1));  // patched below; the last ends it
  size_t entry = 0;
  uint64_t section_start = 0;
  auto begin_section = [&](unsigned align) {
    if (align > 1) out.align_to(align);
    section_start = out.tell();
  };
  auto end_section = [&](GlobalInfoType type) {
    const uint64_t at = directory + kDirectoryEntrySize * entry++;
    out.fixup_u32(at, static_cast<uint32_t>(type));
    out.fixup_u64(at + 4, section_start);
    out.fixup_u64(at + 12, out.tell() - section_start);
  };

  uint64_t info_offsets = 0;
  for (GlobalInfoType type : order) {
    switch (type) {
      case GlobalInfoType::UUID:
        begin_section(1);
        for (uint8_t b : options.build_id) out.u8(b);
        break;
      case GlobalInfoType::AddrOffsets:
        begin_section(offset_size);
        for (const Record& r : records) out.uint(r.range.start - base, offset_size);
        break;
      case GlobalInfoType::AddrInfoOffsets:
        begin_section(8);
        info_offsets = out.tell();
        out.zeros(8 * records.size());
        break;
      case GlobalInfoType::FileTable:
        begin_section(4);
        write_file_table(out);
        break;
      case GlobalInfoType::StringTable:
        begin_section(1);
        strings.write(out);
        break;
      case GlobalInfoType::FunctionInfo:
        begin_section(4);
        for (size_t i = 0; i < records.size(); ++i) {
          out.align_to(4);
          out.fixup_u64(info_offsets + 8 * i, out.tell() - section_start);
          if (Status s = encode_record(out, records[i], strings); !s) return s.error();
        }
        break;
      default:
        break;
    }
    end_section(type);
  }
  return out.take();
}

Status Builder::write_file(const std::string& path) {
  Expected<std::vector<uint8_t>> bytes = encode();
  if (!bytes) return Error(path + ": " + bytes.error().message);
  return write_file_atomically(path, *bytes, 0644);
}

}  // namespace gsym
