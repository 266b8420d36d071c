#include "userspace/symbolize/symbolize.h"


#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "userspace/symbolize/demangle.h"

namespace gsymprof {
namespace {

// One frame resolved from a GSYM, before module identity is attached.
struct NamedFrame {
  std::string name, file;
  std::string system_name;  // "" when the name was not mangled
  uint32_t line = 0;
  uint32_t start_line = 0;
  bool inlined = false;
};

// Where a (reader, address) pair's frames live in the flat frame list, root
// first. begin == end: the GSYM had no function covering the address.
struct AddressKey {
  uint32_t reader = 0;  // dense id, in module order
  uint64_t address = 0;
  auto operator<=>(const AddressKey&) const = default;
};
struct AddressFrames {
  AddressKey key;
  uint32_t begin = 0, end = 0;
};

std::string join_path(std::string_view directory, std::string_view basename) {
  if (basename.empty()) return "";
  if (directory.empty()) return std::string(basename);
  std::string path(directory);
  if (path.back() != '/') path += '/';
  path += basename;
  return path;
}

std::string module_basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// runtime = unslid + load_bias; file offset via the mapping holding it.
std::optional<uint64_t> file_offset_of(const CaptureModule& module, uint64_t unslid_addr) {
  uint64_t runtime = unslid_addr + module.load_bias;  // wraps like the CPU's arithmetic
  for (const ModuleMapping& mapping : module.mappings)
    if (runtime >= mapping.start && runtime < mapping.end)
      return runtime - mapping.start + mapping.file_offset;
  return std::nullopt;
}

SymbolizedFrame unknown_frame() {
  SymbolizedFrame frame;
  frame.kind = FrameKind::Unknown;
  frame.name = "[unknown]";
  return frame;
}

class Symbolizer {
 public:
  Symbolizer(const Capture& capture, GsymLocator& locator, const SymbolizeOptions& options)
      : capture_(capture), locator_(locator), options_(options) {
    lookup_options_.inline_frames = options.inline_frames;
    lookup_options_.line_information = options.line_information;
  }

  gsym::Expected<SymbolizeResult> run() {
    if (gsym::Status valid = validate(); !valid) return valid.error();
    locate_modules();
    collect_sequences();
    look_up_addresses();
    symbolize_sequences();
    rank_frames();
    rank_comms();
    build_stacks();
    for (auto& [key, report] : reports_) result_.modules.push_back(std::move(report));
    return std::move(result_);
  }

 private:
  gsym::Status validate() const {
    // Stacks are indexed by 32-bit words (a few per stack instead of copies).
    if (capture_.stacks.size() >= kNone)
      return gsym::Error(std::to_string(capture_.stacks.size()) + " stacks: too many");
    for (size_t s = 0; s < capture_.stacks.size(); ++s) {
      const std::vector<CaptureFrame>& frames = capture_.stacks[s].frames;
      for (size_t f = 0; f < frames.size(); ++f) {
        if (frames[f].module >= 0 &&
            static_cast<size_t>(frames[f].module) >= capture_.modules.size())
          return gsym::Error("stack " + std::to_string(s) + " frame " + std::to_string(f) +
                             ": module index " + std::to_string(frames[f].module) +
                             " out of range (" + std::to_string(capture_.modules.size()) +
                             " modules)");
        if (frames[f].jit >= 0 && static_cast<size_t>(frames[f].jit) >= capture_.jit_symbols.size())
          return gsym::Error("stack " + std::to_string(s) + " frame " + std::to_string(f) +
                             ": JIT symbol index " + std::to_string(frames[f].jit) + " out of range (" +
                             std::to_string(capture_.jit_symbols.size()) + " JIT symbols)");
        if (frames[f].python >= 0 && static_cast<size_t>(frames[f].python) >= capture_.python_frames.size())
          return gsym::Error("stack " + std::to_string(s) + " frame " + std::to_string(f) +
                             ": Python frame index " + std::to_string(frames[f].python) + " out of range (" +
                             std::to_string(capture_.python_frames.size()) + " Python frames)");
      }
    }
    return gsym::Status::success();
  }

  // Locates a GSYM for every module some counted stack uses.
  void locate_modules() {
    std::vector<bool> used(capture_.modules.size(), false);
    for (const CaptureStack& stack : capture_.stacks)
      if (stack.count != 0)
        for (const CaptureFrame& frame : stack.frames)
          if (frame.module >= 0 && !frame.kernel) used[static_cast<size_t>(frame.module)] = true;
    module_reader_.assign(capture_.modules.size(), kNoReader);
    module_identity_.assign(capture_.modules.size(), 0);
    std::map<ReportKey, uint32_t> identities;
    std::map<ReportKey, Unidentified> unidentified;
    for (size_t m = 0; m < capture_.modules.size(); ++m) {
      if (!used[m]) continue;
      const CaptureModule& module = capture_.modules[m];
      module_identity_[m] = identities
          .try_emplace(std::make_pair(module.path, module.build_id),
                       static_cast<uint32_t>(identities.size()))
          .first->second;
      std::string elf_path = local_elf_path_for(module, options_);
      ModuleReport report;
      report.path = module.path;
      auto key = std::make_pair(module.path, module.build_id);
      if (module.build_id.empty() && module.error_kind != ModuleErrorKind::None) {
        // Not "no build ID": the file was never read (the process was gone,
        // or its file could not be opened), so nothing is known of it.
        report.identified = false;
        Unidentified& why = unidentified[key];
        if (why.error.empty()) {
          why.error = module.error;
          why.kind = module.error_kind;
        }
        why.modules.push_back(m);
        reports_.try_emplace(key, std::move(report));
        continue;
      }
      const gsym::Reader* reader = locator_.locate(module.build_id, elf_path, report);
      reports_.try_emplace(key, std::move(report));
      if (!reader) continue;
      auto [it, inserted] = reader_ids_.try_emplace(reader, static_cast<uint32_t>(readers_.size()));
      if (inserted) {
        readers_.push_back(reader);
        reader_reports_.emplace_back();
      }
      module_reader_[m] = it->second;
      auto& keys = reader_reports_[it->second];
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
    explain_unidentified(unidentified);
  }

  struct Unidentified {
    std::string error;            // the first module's error
    ModuleErrorKind kind = ModuleErrorKind::None;
    std::vector<size_t> modules;  // capture module indexes
  };

  // Why modules whose file was never read have no names, with the samples
  // (and processes) that needed them: an exited process is said as such.
  void explain_unidentified(std::map<std::pair<std::string, BuildId>, Unidentified>& unidentified) {
    if (unidentified.empty()) return;
    std::vector<const ReportKey*> key_of(capture_.modules.size(), nullptr);
    for (const auto& [key, why] : unidentified)
      for (size_t m : why.modules) key_of[m] = &key;
    std::map<ReportKey, std::pair<uint64_t, std::set<uint32_t>>> seen;  // samples, pids
    std::vector<const ReportKey*> in_stack;
    for (const CaptureStack& stack : capture_.stacks) {
      if (stack.count == 0) continue;
      in_stack.clear();
      for (const CaptureFrame& frame : stack.frames)
        if (frame.module >= 0 && !frame.kernel)
          if (const ReportKey* key = key_of[static_cast<size_t>(frame.module)];
              key && std::find(in_stack.begin(), in_stack.end(), key) == in_stack.end())
            in_stack.push_back(key);
      for (const ReportKey* key : in_stack) {
        auto& [samples, pids] = seen[*key];
        samples += stack.count;
        pids.insert(stack.pid);
      }
    }
    for (const auto& [key, why] : unidentified) {
      const auto& [samples, pids] = seen[key];
      std::string count = std::to_string(samples) + (samples == 1 ? " sample" : " samples");
      ModuleReport& report = reports_.at(key);
      if (why.kind == ModuleErrorKind::ProcessExited) {
        report.reason = count + " of " + std::to_string(pids.size()) +
                        (pids.size() == 1 ? " process that" : " processes that") +
                        " exited before their modules could be read";
        report.problem = ModuleProblem::ProcessExited;
      } else {
        report.reason = "not identified while the process ran (" + count + "): " + why.error;
        report.problem = ModuleProblem::Other;
      }
    }
  }

  // Unique frame sequences, each symbolized once: counted stacks' indexes
  // sorted by their frames, compared in place (keys copied into a map would
  // double the capture's frames).
  void collect_sequences() {
    const std::vector<CaptureStack>& stacks = capture_.stacks;
    for (uint32_t s = 0; s < stacks.size(); ++s)
      if (stacks[s].count != 0) order_.push_back(s);
    std::sort(order_.begin(), order_.end(),
              [&](uint32_t a, uint32_t b) { return stacks[a].frames < stacks[b].frames; });
    sequence_of_.assign(stacks.size(), kNone);
    for (uint32_t s : order_) {
      if (sequences_.empty() || stacks[sequences_.back()].frames != stacks[s].frames)
        sequences_.push_back(s);
      sequence_of_[s] = static_cast<uint32_t>(sequences_.size() - 1);
      if (stacks[s].truncated) any_truncated_ = true;
    }
    result_.stats.unique_stacks = sequences_.size();
  }

  // Every unique (reader, address), looked up once, in sorted order per reader.
  void look_up_addresses() {
    std::vector<AddressKey> keys;
    auto compact = [&keys] {
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    };
    // Compacted as it grows, so it holds about the distinct keys rather than
    // one per frame of every sequence.
    size_t compact_at = size_t{1} << 20;
    for (uint32_t s : sequences_)
      for (const CaptureFrame& frame : capture_.stacks[s].frames)
        if (frame.module >= 0 && !frame.kernel) {
          uint32_t reader = module_reader_[static_cast<size_t>(frame.module)];
          if (reader == kNoReader) continue;
          keys.push_back({reader, frame.address});
          if (keys.size() >= compact_at) {
            compact();
            compact_at = std::max(compact_at, 2 * keys.size());
          }
        }
    compact();
    keys.shrink_to_fit();
    result_.stats.unique_addresses = keys.size();

    gsym::LookupScratch scratch;
    addresses_.reserve(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      const AddressKey& key = keys[k];
      const gsym::Reader& reader = *readers_[key.reader];
      ++result_.stats.lookups;
      gsym::Expected<bool> found =
          options_.lookup ? options_.lookup(reader, key.address, lookup_options_, scratch)
                          : reader.lookup_into(key.address, lookup_options_, scratch);
      AddressFrames entry{key, static_cast<uint32_t>(named_.size()),
                          static_cast<uint32_t>(named_.size())};
      if (!found) {
        note_lookup_error(key, found.error());
      } else if (*found) {
        // GSYM frames come innermost first; stacks are emitted root first.
        for (auto it = scratch.frames.rbegin(); it != scratch.frames.rend(); ++it) {
          NamedFrame named;
          named.name = demangled(it->name);
          if (named.name != it->name) named.system_name = it->name;
          if (options_.line_information) {
            named.file = join_path(it->directory, it->basename);
            named.line = it->line;
          }
          named.inlined = it->inlined;
          named_.push_back(std::move(named));
        }
        entry.end = static_cast<uint32_t>(named_.size());
        if (options_.function_start_lines && options_.line_information)
          fill_start_lines(reader, key.address, entry, scratch);
      }
      addresses_.push_back(entry);
      // Keys are sorted by reader: its last one ends its lookups (named_
      // holds copies; scratch's views fault the pages back in if read).
      if (options_.release_pages_per_module && (k + 1 == keys.size() || keys[k + 1].reader != key.reader))
        reader.release_pages();
    }
  }

  // Each frame's start line: the line its range's first address maps to, at
  // the same inline depth (a frame's range starts at address - offset).
  // scratch holds the lookup of `address`, and is reused.
  void fill_start_lines(const gsym::Reader& reader, uint64_t address, const AddressFrames& entry,
                        gsym::LookupScratch& scratch) {
    start_offsets_.clear();
    for (auto it = scratch.frames.rbegin(); it != scratch.frames.rend(); ++it)
      start_offsets_.push_back(it->offset);  // root first, like named_
    for (uint32_t depth = 0; depth < start_offsets_.size(); ++depth) {
      if (start_offsets_[depth] > address) continue;
      ++result_.stats.lookups;
      gsym::Expected<bool> found =
          options_.lookup
              ? options_.lookup(reader, address - start_offsets_[depth], lookup_options_, scratch)
              : reader.lookup_into(address - start_offsets_[depth], lookup_options_, scratch);
      if (!found || !*found || scratch.frames.size() <= depth) continue;
      named_[entry.begin + depth].start_line = scratch.frames[scratch.frames.size() - 1 - depth].line;
    }
  }

  void note_lookup_error(const AddressKey& key, const gsym::Error& error) {
    ++result_.stats.lookup_errors;
    char address[32];
    std::snprintf(address, sizeof address, "0x%" PRIx64, key.address);
    for (const auto& report_key : reader_reports_[key.reader]) {
      // The first error says what is wrong; later ones would only repeat it.
      if (!lookup_error_noted_.insert(report_key).second) continue;
      ModuleReport& report = reports_.at(report_key);
      if (!report.note.empty()) report.note += "; ";
      report.note += std::string("lookup error at ") + address + ": " + error.to_string();
    }
  }

  const std::string& demangled(std::string_view raw) {
    auto [it, inserted] = demangled_.try_emplace(std::string(raw));
    if (inserted) it->second = demangle(raw);
    return it->second;
  }

  // Distinct frames are stored once; sequences hold their ids.
  uint32_t add_frame(SymbolizedFrame frame) {
    frames_.push_back(std::move(frame));
    return static_cast<uint32_t>(frames_.size() - 1);
  }

  uint32_t unknown_id() {
    if (unknown_id_ == kNone) unknown_id_ = add_frame(unknown_frame());
    return unknown_id_;
  }

  uint32_t truncated_id() {
    if (truncated_id_ == kNone) {
      SymbolizedFrame truncated;
      truncated.kind = FrameKind::Truncated;
      truncated.name = "[truncated]";
      truncated_id_ = add_frame(std::move(truncated));
    }
    return truncated_id_;
  }

  // A kernel frame: named by the capture's kernel symbol holding it.
  uint32_t kernel_frame_id(uint64_t address) {
    ++result_.stats.kernel_frames;
    const KernelSymbol* symbol = find_kernel_symbol(capture_.kernel, address);
    if (!symbol) ++result_.stats.unnamed_kernel_frames;
    const size_t key = symbol ? static_cast<size_t>(symbol - capture_.kernel.symbols.data()) : SIZE_MAX;
    auto [slot, inserted] = kernel_ids_.try_emplace(key, 0);
    if (inserted) {
      SymbolizedFrame frame;
      frame.kind = FrameKind::Kernel;
      frame.name = symbol ? demangled(symbol->name) : std::string("[kernel]");
      if (symbol && frame.name != symbol->name) frame.system_name = symbol->name;
      if (symbol && !symbol->module.empty()) frame.name += " [" + symbol->module + "]";
      frame.module_path = kKernelModulePath;
      frame.build_id = capture_.kernel.build_id;
      slot->second = add_frame(std::move(frame));
    }
    return slot->second;
  }

  // A JIT frame: named by its perf-map entry.
  uint32_t jit_frame_id(uint32_t symbol) {
    ++result_.stats.jit_frames;
    auto [slot, inserted] = jit_ids_.try_emplace(symbol, 0);
    if (inserted) {
      SymbolizedFrame frame;
      frame.kind = FrameKind::Jit;
      frame.name = capture_.jit_symbols[symbol].name;
      slot->second = add_frame(std::move(frame));
    }
    return slot->second;
  }

  // A Python frame: named by its python_frames entry.
  uint32_t python_frame_id(uint32_t index) {
    ++result_.stats.python_frames;
    auto [slot, inserted] = python_ids_.try_emplace(index, 0);
    if (inserted) {
      const PythonFrame& python = capture_.python_frames[index];
      SymbolizedFrame frame;
      frame.kind = FrameKind::Python;
      frame.name = python_frame_name(python);
      frame.file = python.file;
      frame.line = python.line;
      slot->second = add_frame(std::move(frame));
    }
    return slot->second;
  }

  // Every unique sequence's frame ids, root first, into one pool.
  void symbolize_sequences() {
    size_t frames = 0;
    for (uint32_t s : sequences_) frames += capture_.stacks[s].frames.size();
    pool_.reserve(frames);  // a lower bound: inline frames add more
    sequence_begin_.reserve(sequences_.size() + 1);
    sequence_begin_.push_back(0);
    for (uint32_t s : sequences_) {
      symbolize_sequence(capture_.stacks[s].frames);
      sequence_begin_.push_back(pool_.size());
    }
    if (any_truncated_) truncated_id();
    for (uint32_t s : order_) {
      const CaptureStack& stack = capture_.stacks[s];
      if (stack.off_cpu != OffCpuReason::None) leaf_marker_id(off_cpu_marker(stack.off_cpu));
      if (stack.short_waits) leaf_marker_id(kShortWaitsMarker);
    }
  }

  // The leaf markers: index kShortWaitsMarker, or an OffCpuReason's.
  static constexpr size_t kShortWaitsMarker = 0;
  static constexpr size_t kMarkers = static_cast<size_t>(OffCpuReason::Other) + 1;
  static size_t off_cpu_marker(OffCpuReason reason) { return static_cast<size_t>(reason); }

  uint32_t leaf_marker_id(size_t marker) {
    if (marker_ids_[marker] == kNone) {
      SymbolizedFrame frame;
      frame.kind = FrameKind::OffCpu;
      frame.name = marker == kShortWaitsMarker ? std::string(kShortWaitsFrame)
                                               : off_cpu_frame_name(static_cast<OffCpuReason>(marker));
      marker_ids_[marker] = add_frame(std::move(frame));
    }
    return marker_ids_[marker];
  }

  // Ranks frames by content so that equal frames share a rank and rank
  // order is frame order (ids from different addresses may be equal
  // frames); the distinct frames move to the result, indexed by rank, and
  // the pool's ids become ranks.
  void rank_frames() {
    std::vector<uint32_t> order(frames_.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return frames_[a] < frames_[b]; });
    rank_.assign(frames_.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || frames_[order[i - 1]] != frames_[order[i]]) by_rank_.push_back(order[i]);
      rank_[order[i]] = static_cast<uint32_t>(by_rank_.size() - 1);
    }
    result_.frames.reserve(by_rank_.size());
    for (uint32_t id : by_rank_) result_.frames.push_back(std::move(frames_[id]));
    std::vector<SymbolizedFrame>().swap(frames_);
    for (uint32_t& id : pool_) id = rank_[id];
    if (truncated_id_ != kNone) truncated_rank_ = rank_[truncated_id_];
    for (size_t m = 0; m < kMarkers; ++m)
      if (marker_ids_[m] != kNone) marker_ranks_[m] = rank_[marker_ids_[m]];
  }

  // Display comms ("comm" or "comm-PID"), ranked in string order so that
  // stacks compare a number instead of a string.
  void rank_comms() {
    std::map<std::string, uint32_t, std::less<>> ids;  // comm -> id in first-seen order
    comm_of_.assign(capture_.stacks.size(), kNone);
    for (uint32_t s : order_) {
      const CaptureStack& stack = capture_.stacks[s];
      auto it = options_.pid_in_comm
                    ? ids.try_emplace(stack.comm + "-" + std::to_string(stack.pid), 0).first
                    : ids.find(std::string_view(stack.comm));
      if (it == ids.end()) it = ids.try_emplace(stack.comm, 0).first;
      if (it->second == 0) it->second = static_cast<uint32_t>(ids.size());  // 1-based: 0 = new
      comm_of_[s] = it->second - 1;
    }
    std::vector<uint32_t> rank(ids.size());
    comms_.reserve(ids.size());
    for (auto& [comm, id] : ids) {
      rank[id - 1] = static_cast<uint32_t>(comms_.size());
      comms_.push_back(comm);
    }
    for (uint32_t s : order_) comm_of_[s] = rank[comm_of_[s]];
  }

  // A stack's frame ranks without copying them: the truncated root frame,
  // if any, then its sequence's ranks from the pool, then its leaf markers
  // (off the CPU: "[short waits]", the reason).
  struct RankView {
    uint32_t root = kNone;  // kNone: not truncated
    const uint32_t* ranks = nullptr;
    size_t count = 0;
    std::array<uint32_t, 2> leaves{kNone, kNone};
    size_t leaf_count = 0;
    size_t size() const { return (root != kNone) + count + leaf_count; }
    uint32_t operator[](size_t i) const {
      if (root != kNone) {
        if (i == 0) return root;
        --i;
      }
      return i < count ? ranks[i] : leaves[i - count];
    }
  };

  RankView view(uint32_t s) const {
    const CaptureStack& stack = capture_.stacks[s];
    size_t sequence = sequence_of_[s];
    RankView view{stack.truncated ? truncated_rank_ : kNone, pool_.data() + sequence_begin_[sequence],
                  sequence_begin_[sequence + 1] - sequence_begin_[sequence]};
    if (stack.short_waits) view.leaves[view.leaf_count++] = marker_ranks_[kShortWaitsMarker];
    if (stack.off_cpu != OffCpuReason::None) view.leaves[view.leaf_count++] = marker_ranks_[off_cpu_marker(stack.off_cpu)];
    return view;
  }

  // <0, 0, >0 as (comm, frames) of stacks a and b compare.
  int compare_stacks(uint32_t a, uint32_t b) const {
    if (comm_of_[a] != comm_of_[b]) return comm_of_[a] < comm_of_[b] ? -1 : 1;
    RankView x = view(a), y = view(b);
    if (x.root == y.root && sequence_of_[a] == sequence_of_[b] && x.leaves == y.leaves) return 0;
    size_t n = std::min(x.size(), y.size());
    for (size_t i = 0; i < n; ++i)
      if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }

  // Counted stacks sorted by (comm, frame ranks), which is (comm, frames)
  // field by field; equal neighbours merge into one result stack.
  void build_stacks() {
    std::sort(order_.begin(), order_.end(),
              [&](uint32_t a, uint32_t b) { return compare_stacks(a, b) < 0; });
    size_t distinct = 0;
    for (size_t i = 0; i < order_.size(); ++i)
      if (i == 0 || compare_stacks(order_[i - 1], order_[i]) != 0) ++distinct;
    result_.stacks.reserve(distinct);
    for (size_t i = 0; i < order_.size(); ++i) {
      const CaptureStack& stack = capture_.stacks[order_[i]];
      if (i != 0 && compare_stacks(order_[i - 1], order_[i]) == 0) {
        result_.stacks.back().count += stack_weight(capture_, stack);
        continue;
      }
      SymbolizedStack out;
      out.comm = comms_[comm_of_[order_[i]]];
      RankView ranks = view(order_[i]);
      out.frames.reserve(ranks.size());
      for (size_t f = 0; f < ranks.size(); ++f) out.frames.push_back(ranks[f]);
      out.count = stack_weight(capture_, stack);
      result_.stacks.push_back(std::move(out));
    }
  }

  // Appends the frame ids of `frames`, root first, to pool_.
  void symbolize_sequence(const std::vector<CaptureFrame>& frames) {
    std::vector<uint32_t>& out = pool_;
    // Capture frames are leaf first; emit root first.
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      const CaptureFrame& frame = *it;
      if (frame.kernel) {
        out.push_back(kernel_frame_id(frame.address));
        continue;
      }
      if (frame.python >= 0) {
        out.push_back(python_frame_id(static_cast<uint32_t>(frame.python)));
        continue;
      }
      if (frame.module < 0 && frame.jit >= 0) {
        out.push_back(jit_frame_id(static_cast<uint32_t>(frame.jit)));
        continue;
      }
      if (frame.module < 0) {
        ++result_.stats.unknown_frames;
        out.push_back(unknown_id());
        continue;
      }
      size_t module_index = static_cast<size_t>(frame.module);
      const CaptureModule& module = capture_.modules[module_index];
      uint32_t identity = module_identity_[module_index];
      uint32_t reader = module_reader_[module_index];
      if (reader != kNoReader) {
        AddressKey key{reader, frame.address};
        auto found = std::lower_bound(
            addresses_.begin(), addresses_.end(), key,
            [](const AddressFrames& entry, const AddressKey& k) { return entry.key < k; });
        if (found != addresses_.end() && found->key == key && found->begin != found->end) {
          for (uint32_t i = found->begin; i < found->end; ++i) {
            auto [slot, inserted] =
                named_ids_.try_emplace(uint64_t{i} << 32 | identity, 0);
            if (inserted) {
              SymbolizedFrame named;
              named.kind = FrameKind::Function;
              named.name = named_[i].name;
              named.system_name = named_[i].system_name;
              named.file = named_[i].file;
              named.line = named_[i].line;
              named.start_line = named_[i].start_line;
              named.inlined = named_[i].inlined;
              named.module_path = module.path;
              named.build_id = module.build_id;
              slot->second = add_frame(std::move(named));
            }
            out.push_back(slot->second);
          }
          continue;
        }
      }
      std::optional<uint64_t> offset = file_offset_of(module, frame.address);
      if (!offset || module_basename(module.path).empty()) {
        ++result_.stats.unknown_frames;
        out.push_back(unknown_id());
        continue;
      }
      ++result_.stats.unnamed_frames;
      if (reader != kNoReader)  // symbols, but none covers this address
        if (auto report = reports_.find(ReportKey(module.path, module.build_id)); report != reports_.end())
          ++report->second.unnamed_frames;
      auto [slot, inserted] = offset_ids_.try_emplace(std::make_pair(identity, *offset), 0);
      if (inserted) {
        char suffix[32];
        std::snprintf(suffix, sizeof suffix, "+0x%" PRIx64, *offset);
        SymbolizedFrame unnamed;
        unnamed.kind = FrameKind::ModuleOffset;
        unnamed.name = module_basename(module.path) + suffix;
        unnamed.module_path = module.path;
        unnamed.build_id = module.build_id;
        slot->second = add_frame(std::move(unnamed));
      }
      out.push_back(slot->second);
    }
  }

  static constexpr uint32_t kNoReader = UINT32_MAX;
  static constexpr uint32_t kNone = UINT32_MAX;
  using ReportKey = std::pair<std::string, BuildId>;

  const Capture& capture_;
  GsymLocator& locator_;
  const SymbolizeOptions& options_;
  gsym::LookupOptions lookup_options_;
  std::vector<uint64_t> start_offsets_;  // fill_start_lines' scratch

  std::vector<uint32_t> module_reader_;  // module index -> dense reader id
  std::vector<const gsym::Reader*> readers_;
  std::map<const gsym::Reader*, uint32_t> reader_ids_;
  std::vector<std::vector<ReportKey>> reader_reports_;  // reader id -> its modules' reports
  std::map<ReportKey, ModuleReport> reports_;
  std::set<ReportKey> lookup_error_noted_;  // reports whose note has their first lookup error
  std::vector<uint32_t> order_;          // counted stacks' indexes, sorted as needed
  std::vector<uint32_t> sequences_;      // unique sequence -> a stack index holding it
  std::vector<uint32_t> sequence_of_;    // stack index -> unique sequence (kNone: count 0)
  bool any_truncated_ = false;           // some counted stack is truncated
  std::vector<uint32_t> pool_;           // sequences' frame ids, root first; then ranks
  std::vector<size_t> sequence_begin_;   // sequence -> its start in pool_, then the end
  std::vector<AddressFrames> addresses_;  // sorted by key
  std::vector<NamedFrame> named_;
  std::unordered_map<std::string, std::string> demangled_;
  std::vector<uint32_t> module_identity_;  // module index -> dense (path, build ID) id
  std::vector<SymbolizedFrame> frames_;    // distinct frames, by id
  std::unordered_map<uint64_t, uint32_t> named_ids_;  // (named_ index, identity) -> id
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> offset_ids_;  // (identity, file offset) -> id
  std::unordered_map<size_t, uint32_t> kernel_ids_;  // kernel symbol index (SIZE_MAX: none) -> id
  std::unordered_map<uint32_t, uint32_t> jit_ids_;     // JIT symbol index -> id
  std::unordered_map<uint32_t, uint32_t> python_ids_;  // Python frame index -> id
  uint32_t unknown_id_ = kNone, truncated_id_ = kNone;
  std::vector<uint32_t> rank_;     // id -> rank
  std::vector<uint32_t> by_rank_;  // rank -> an id with that content
  uint32_t truncated_rank_ = kNone;
  std::array<uint32_t, kMarkers> marker_ids_ = filled(kNone), marker_ranks_ = filled(kNone);
  static constexpr std::array<uint32_t, kMarkers> filled(uint32_t value) {
    std::array<uint32_t, kMarkers> a{};
    a.fill(value);
    return a;
  }
  std::vector<uint32_t> comm_of_;   // stack index -> rank of its display comm
  std::vector<std::string> comms_;  // display comms by rank
  SymbolizeResult result_;
};

}  // namespace

std::string python_frame_name(const PythonFrame& frame) {
  // "<frozen importlib._bootstrap>" and "<string>" have no directory: the
  // whole file is the basename.
  std::string_view basename = frame.file;
  if (const size_t slash = basename.rfind('/'); slash != std::string_view::npos && slash + 1 < basename.size())
    basename.remove_prefix(slash + 1);
  std::string_view stem = basename;
  if (stem.size() > 3 && stem.ends_with(".py")) stem.remove_suffix(3);
  std::string name;
  if (!stem.empty()) {
    name += stem;
    name += '.';
  }
  name += frame.qualname;
  if (basename.empty() && frame.line == 0) return name;
  name += " (";
  name += basename;
  if (frame.line != 0) name += ":" + std::to_string(frame.line);
  name += ')';
  return name;
}

std::string local_elf_path_for(const CaptureModule& module, const SymbolizeOptions& options) {
  if (options.local_elf_path) return options.local_elf_path(module);
  return module.local_file.empty() ? module.path : module.local_file;
}

gsym::Expected<SymbolizeResult> symbolize(const Capture& capture, GsymLocator& locator,
                                          const SymbolizeOptions& options) {
  gsym::Expected<SymbolizeResult> result = Symbolizer(capture, locator, options).run();
  if (result) result->unit = weight_unit(capture);
  return result;
}

}  // namespace gsymprof
