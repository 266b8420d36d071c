// gsym/builder.cpp - deterministic GSYM v1 writer (see builder.h for the
// ordering rules; gsym-format.md §2, §10.7 for LLVM's).
#include "gsym/builder.h"

#include "gsym/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <compare>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

#include "gsym/byte_writer.h"
#include "gsym/record_encode.h"

namespace gsym {
namespace {

constexpr uint32_t kMagic = 0x4753594D;
constexpr uint16_t kVersion = 1;
constexpr size_t kMaxBuildIdSize = 20;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string range_text(const AddressRange& r) {
  return "[" + hex(r.start) + ", " + hex(r.end) + ")";
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
    order_.push_back(stored);
    size_ += s.size() + 1;
    return slot.offset;
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

// LLVM's AddressRanges: sorted, empty ranges dropped, intersecting and
// touching ranges merged.
std::vector<AddressRange> normalize_ranges(std::vector<AddressRange> ranges) {
  // In place: this runs for every inline node, whose ranges are nearly
  // always normalized already.
  std::erase_if(ranges, [](const AddressRange& r) { return r.end <= r.start; });
  if (!std::is_sorted(ranges.begin(), ranges.end())) std::sort(ranges.begin(), ranges.end());
  size_t kept = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (kept > 0 && ranges[i].start <= ranges[kept - 1].end)
      ranges[kept - 1].end = std::max(ranges[kept - 1].end, ranges[i].end);
    else
      ranges[kept++] = ranges[i];
  }
  ranges.resize(kept);
  return ranges;
}

bool intersects(const AddressRange& a, const AddressRange& b) {
  return a.start < b.end && b.start < a.end;
}

// ---- validation -------------------------------------------------------------

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
    node.ranges = normalize_ranges(std::move(node.ranges));
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
      return Error("function at " + hex(f.range.start) + " has an empty name");
    if (f.range.end < f.range.start)
      return Error("function \"" + f.name + "\" has a reversed range " + range_text(f.range));
    const uint64_t size = f.range.size();
    if (size > UINT32_MAX)
      return Error("function \"" + f.name + "\" is larger than 4 GiB - 1 (size " + hex(size) + ")");
    for (size_t i = 0; i < f.lines.size(); ++i) {
      const LineEntry& row = f.lines[i];
      const bool inside = f.range.contains(row.address) ||
                          (size == 0 && row.address == f.range.start);
      if (!inside)
        return Error("line row at " + hex(row.address) + " is outside the function range " +
                     range_text(f.range) + where());
      if (i > 0 && row.address < f.lines[i - 1].address)
        return Error("line rows are not in ascending address order (" + hex(row.address) +
                     " after " + hex(f.lines[i - 1].address) + ")" + where());
      if (row.file >= file_count)
        return Error("line row at " + hex(row.address) + " uses file " +
                     std::to_string(row.file) + " but the file table has " +
                     std::to_string(file_count) + " entries" + where());
    }
    if (f.inline_tree) {
      const size_t before = inline_nodes;
      Status s = inline_node(*f.inline_tree, {f.range}, 1);
      if (!s) return s;
      function_name = &f.name;
      if (merged_depth == 0) top_inline_nodes = inline_nodes - before;
    }
    for (const CallSite& cs : f.call_sites)
      if (cs.return_offset >= size)
        return Error("call site offset " + hex(cs.return_offset) +
                     " is outside the function (size " + hex(size) + ")" + where());
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

std::strong_ordering compare_lines_by_address(const std::vector<LineEntry>& a,
                                              const std::vector<LineEntry>& b) {
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
  std::vector<Function> functions;
  // Per function while functions are in insertion order: its inline
  // descendant count (LLVM's sort key), -1 = no tree; counted while
  // validating, when the tree is still in cache.
  std::vector<int64_t> inline_sizes;
  bool finalized = false;

  void sort_functions();
  void prune_functions();
  void extend_trailing_zero_size();
};

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

void Builder::set_text_ranges(std::vector<AddressRange> ranges) {
  state_->options.text_ranges = std::move(ranges);
  state_->finalized = false;
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
  Validator validator{state_->files.size()};
  Status s = validator.function(function, 0);
  if (!s) return s;
  state_->inline_sizes.push_back(function.inline_tree ? int64_t(validator.top_inline_nodes) : -1);
  state_->functions.push_back(std::move(function));
  state_->finalized = false;
  return Status::success();
}

size_t Builder::function_count() const { return state_->functions.size(); }

void Builder::State::sort_functions() {
  // LLVM's key (range, inline descendant count, line table) precomputed, then
  // the content tiebreak; ties left after that are identical records.
  struct Key {
    size_t index;
    int64_t inline_size;  // -1 = no inline tree
  };
  std::vector<Key> keys(functions.size());
  for (size_t i = 0; i < functions.size(); ++i) {
    const Function& f = functions[i];
    if (inline_sizes.size() == functions.size())
      keys[i] = {i, inline_sizes[i]};
    else
      keys[i] = {i, f.inline_tree ? int64_t(descendant_count(*f.inline_tree)) : -1};
  }
  std::stable_sort(keys.begin(), keys.end(), [&](const Key& ka, const Key& kb) {
    const Function& a = functions[ka.index];
    const Function& b = functions[kb.index];
    if (auto c = a.range <=> b.range; c != 0) return c < 0;
    if (ka.inline_size != kb.inline_size) return ka.inline_size < kb.inline_size;
    if (auto c = compare_lines_by_address(a.lines, b.lines); c != 0) return c < 0;
    return !options.insertion_order_ties && compare_content(a, b) < 0;
  });
  std::vector<Function> sorted;
  sorted.reserve(functions.size());
  for (const Key& k : keys) sorted.push_back(std::move(functions[k.index]));
  functions = std::move(sorted);
  inline_sizes.clear();  // no longer aligned: recounted if sorted again
}

void Builder::State::prune_functions() {
  if (functions.size() < 2) return;
  std::vector<Function> kept;
  kept.reserve(functions.size());
  kept.push_back(std::move(functions.front()));
  for (size_t i = 1; i < functions.size(); ++i) {
    Function& prev = kept.back();
    Function& curr = functions[i];
    if (prev.range == curr.range) {
      if (!llvm_equal(prev, curr)) prev = std::move(curr);  // the later, richer one wins
    } else if (intersects(prev.range, curr.range)) {
      kept.push_back(std::move(curr));  // overlapping: LLVM keeps both
    } else if (prev.range.size() == 0 && curr.range.contains(prev.range.start)) {
      prev = std::move(curr);  // a sized record swallows a zero-size one at its start
    } else {
      kept.push_back(std::move(curr));
    }
  }
  functions = std::move(kept);
}

void Builder::State::extend_trailing_zero_size() {
  if (functions.empty() || functions.back().range.size() != 0) return;
  Function& last = functions.back();
  for (const AddressRange& text : normalize_ranges(options.text_ranges)) {
    if (text.contains(last.range.start)) {
      // Capped so the record stays encodable (sizes are u32 in version 1).
      last.range.end = last.range.start + std::min<uint64_t>(text.end - last.range.start, UINT32_MAX);
      for (Function& merged : last.merged) merged.range = last.range;
      return;
    }
  }
}

const std::vector<Function>& Builder::finalize() {
  State& st = *state_;
  if (!st.finalized) {
    st.sort_functions();
    if (st.options.deduplicate) st.prune_functions();
    st.extend_trailing_zero_size();
    st.finalized = true;
  }
  return st.functions;
}

Expected<std::vector<uint8_t>> Builder::encode() {
  const std::vector<Function>& functions = finalize();
  const BuilderOptions& opt = state_->options;
  if (functions.empty()) return Error("no functions to encode");
  if (opt.build_id.size() > kMaxBuildIdSize)
    return Error("invalid build ID size " + std::to_string(opt.build_id.size()) +
                 " (GSYM version 1 allows at most 20 bytes)");
  if (functions.size() > UINT32_MAX) return Error("too many functions for GSYM version 1");
  const uint64_t first_start = functions.front().range.start;
  const uint64_t base = opt.base_address.value_or(first_start);
  if (base > first_start)
    return Error("base address " + hex(base) + " is above the first function start " +
                 hex(first_start));
  const uint8_t offset_size = address_offset_size(functions.back().range.start - base);

  EncodeStrings strings(state_->strings);
  for (const Function& f : functions) strings.intern_function(f);
  if (strings.size() > UINT32_MAX)
    return Error("string table exceeds 4 GiB (GSYM version 1 limit)");

  ByteWriter out(opt.endian);
  out.u32(kMagic);
  out.u16(kVersion);
  out.u8(offset_size);
  out.u8(static_cast<uint8_t>(opt.build_id.size()));
  out.u64(base);
  out.u32(static_cast<uint32_t>(functions.size()));
  const uint64_t strtab_fields = out.tell();
  out.u32(0);  // StrtabOffset, patched below
  out.u32(0);  // StrtabSize
  for (uint8_t b : opt.build_id) out.u8(b);
  out.zeros(kMaxBuildIdSize - opt.build_id.size());

  out.align_to(offset_size);
  for (const Function& f : functions) out.uint(f.range.start - base, offset_size);
  out.align_to(4);
  const uint64_t info_offsets = out.tell();
  out.zeros(4 * functions.size());

  out.u32(static_cast<uint32_t>(state_->files.size()));
  for (const auto& [dir, basename] : state_->files) {
    out.u32(static_cast<uint32_t>(dir));
    out.u32(static_cast<uint32_t>(basename));
  }

  const uint64_t strtab_offset = out.tell();
  strings.write(out);
  if (strtab_offset > UINT32_MAX)
    return Error("string table offset exceeds 4 GiB (GSYM version 1 limit)");
  out.fixup_u32(strtab_fields, static_cast<uint32_t>(strtab_offset));
  out.fixup_u32(strtab_fields + 4, static_cast<uint32_t>(strings.size()));

  for (size_t i = 0; i < functions.size(); ++i) {
    out.align_to(4);
    const uint64_t offset = out.tell();
    if (offset > UINT32_MAX)
      return Error("address info offset exceeded 32-bit max (function \"" + functions[i].name +
                   "\")");
    Status s = encode_function_info(out, functions[i], strings, /*pad=*/true);
    if (!s) return s.error();
    out.fixup_u32(info_offsets + 4 * i, static_cast<uint32_t>(offset));
  }
  return out.take();
}

Status Builder::write_file(const std::string& path) {
  Expected<std::vector<uint8_t>> bytes = encode();
  if (!bytes) return Error(path + ": " + bytes.error().message);
  return write_file_atomically(path, *bytes, 0644);
}

}  // namespace gsym
