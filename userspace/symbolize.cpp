#include "userspace/symbolize.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <utility>

#include "userspace/demangle.h"

namespace gsymprof {
namespace {

// One frame resolved from a GSYM, before module identity is attached.
struct NamedFrame {
  std::string name, file;
  uint32_t line = 0;
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

    std::vector<std::vector<SymbolizedFrame>> symbolized(sequences_.size());
    for (const auto& [frames, index] : sequences_) symbolized[index] = symbolize_sequence(frames);
    result_.stats.unique_stacks = sequences_.size();

    std::vector<SymbolizedStack> stacks;
    for (const CaptureStack& stack : capture_.stacks) {
      if (stack.count == 0) continue;
      SymbolizedStack out;
      out.comm = options_.pid_in_comm ? stack.comm + "-" + std::to_string(stack.pid) : stack.comm;
      const std::vector<SymbolizedFrame>& frames = symbolized[sequences_.at(stack.frames)];
      out.frames.reserve(frames.size() + 1);
      if (stack.truncated) {
        SymbolizedFrame truncated;
        truncated.kind = FrameKind::Truncated;
        truncated.name = "[truncated]";
        out.frames.push_back(std::move(truncated));
      }
      out.frames.insert(out.frames.end(), frames.begin(), frames.end());
      out.count = stack.count;
      stacks.push_back(std::move(out));
    }
    std::sort(stacks.begin(), stacks.end(), [](const SymbolizedStack& a, const SymbolizedStack& b) {
      if (a.comm != b.comm) return a.comm < b.comm;
      return a.frames < b.frames;
    });
    for (SymbolizedStack& stack : stacks) {
      if (!result_.stacks.empty() && result_.stacks.back().comm == stack.comm &&
          result_.stacks.back().frames == stack.frames)
        result_.stacks.back().count += stack.count;
      else
        result_.stacks.push_back(std::move(stack));
    }
    for (auto& [key, report] : reports_) result_.modules.push_back(std::move(report));
    return std::move(result_);
  }

 private:
  gsym::Status validate() const {
    for (size_t s = 0; s < capture_.stacks.size(); ++s) {
      const std::vector<CaptureFrame>& frames = capture_.stacks[s].frames;
      for (size_t f = 0; f < frames.size(); ++f) {
        if (frames[f].module >= 0 &&
            static_cast<size_t>(frames[f].module) >= capture_.modules.size())
          return gsym::Error("stack " + std::to_string(s) + " frame " + std::to_string(f) +
                             ": module index " + std::to_string(frames[f].module) +
                             " out of range (" + std::to_string(capture_.modules.size()) +
                             " modules)");
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
          if (frame.module >= 0) used[static_cast<size_t>(frame.module)] = true;
    module_reader_.assign(capture_.modules.size(), kNoReader);
    for (size_t m = 0; m < capture_.modules.size(); ++m) {
      if (!used[m]) continue;
      const CaptureModule& module = capture_.modules[m];
      std::string elf_path = options_.local_elf_path ? options_.local_elf_path(module) : module.path;
      ModuleReport report;
      report.path = module.path;
      const gsym::Reader* reader = locator_.locate(module.build_id, elf_path, report);
      auto key = std::make_pair(module.path, module.build_id);
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
  }

  // Unique frame sequences, each symbolized once.
  void collect_sequences() {
    for (const CaptureStack& stack : capture_.stacks)
      if (stack.count != 0) sequences_.try_emplace(stack.frames, sequences_.size());
  }

  // Every unique (reader, address), looked up once, in sorted order per reader.
  void look_up_addresses() {
    std::vector<AddressKey> keys;
    for (const auto& [frames, index] : sequences_)
      for (const CaptureFrame& frame : frames)
        if (frame.module >= 0) {
          uint32_t reader = module_reader_[static_cast<size_t>(frame.module)];
          if (reader != kNoReader) keys.push_back({reader, frame.address});
        }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    result_.stats.unique_addresses = keys.size();

    gsym::LookupScratch scratch;
    addresses_.reserve(keys.size());
    for (const AddressKey& key : keys) {
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
          if (options_.line_information) {
            named.file = join_path(it->directory, it->basename);
            named.line = it->line;
          }
          named.inlined = it->inlined;
          named_.push_back(std::move(named));
        }
        entry.end = static_cast<uint32_t>(named_.size());
      }
      addresses_.push_back(entry);
    }
  }

  void note_lookup_error(const AddressKey& key, const gsym::Error& error) {
    ++result_.stats.lookup_errors;
    char address[32];
    std::snprintf(address, sizeof address, "0x%" PRIx64, key.address);
    for (const auto& report_key : reader_reports_[key.reader]) {
      ModuleReport& report = reports_.at(report_key);
      // The first error says what is wrong; later ones would only repeat it.
      if (report.note.find("lookup error") != std::string::npos) continue;
      if (!report.note.empty()) report.note += "; ";
      report.note += std::string("lookup error at ") + address + ": " + error.to_string();
    }
  }

  const std::string& demangled(std::string_view raw) {
    auto [it, inserted] = demangled_.try_emplace(std::string(raw));
    if (inserted) it->second = demangle(raw);
    return it->second;
  }

  std::vector<SymbolizedFrame> symbolize_sequence(const std::vector<CaptureFrame>& frames) {
    std::vector<SymbolizedFrame> out;
    out.reserve(frames.size());
    // Capture frames are leaf first; emit root first.
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      const CaptureFrame& frame = *it;
      if (frame.module < 0) {
        ++result_.stats.unknown_frames;
        out.push_back(unknown_frame());
        continue;
      }
      const CaptureModule& module = capture_.modules[static_cast<size_t>(frame.module)];
      uint32_t reader = module_reader_[static_cast<size_t>(frame.module)];
      if (reader != kNoReader) {
        AddressKey key{reader, frame.address};
        auto found = std::lower_bound(
            addresses_.begin(), addresses_.end(), key,
            [](const AddressFrames& entry, const AddressKey& k) { return entry.key < k; });
        if (found != addresses_.end() && found->key == key && found->begin != found->end) {
          for (uint32_t i = found->begin; i < found->end; ++i) {
            SymbolizedFrame named;
            named.kind = FrameKind::Function;
            named.name = named_[i].name;
            named.file = named_[i].file;
            named.line = named_[i].line;
            named.inlined = named_[i].inlined;
            named.module_path = module.path;
            named.build_id = module.build_id;
            out.push_back(std::move(named));
          }
          continue;
        }
      }
      std::optional<uint64_t> offset = file_offset_of(module, frame.address);
      std::string name = module_basename(module.path);
      if (!offset || name.empty()) {
        ++result_.stats.unknown_frames;
        out.push_back(unknown_frame());
        continue;
      }
      ++result_.stats.unnamed_frames;
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "+0x%" PRIx64, *offset);
      SymbolizedFrame unnamed;
      unnamed.kind = FrameKind::ModuleOffset;
      unnamed.name = name + suffix;
      unnamed.module_path = module.path;
      unnamed.build_id = module.build_id;
      out.push_back(std::move(unnamed));
    }
    return out;
  }

  static constexpr uint32_t kNoReader = UINT32_MAX;
  using ReportKey = std::pair<std::string, BuildId>;

  const Capture& capture_;
  GsymLocator& locator_;
  const SymbolizeOptions& options_;
  gsym::LookupOptions lookup_options_;

  std::vector<uint32_t> module_reader_;  // module index -> dense reader id
  std::vector<const gsym::Reader*> readers_;
  std::map<const gsym::Reader*, uint32_t> reader_ids_;
  std::vector<std::vector<ReportKey>> reader_reports_;  // reader id -> its modules' reports
  std::map<ReportKey, ModuleReport> reports_;
  std::map<std::vector<CaptureFrame>, size_t> sequences_;
  std::vector<AddressFrames> addresses_;  // sorted by key
  std::vector<NamedFrame> named_;
  std::unordered_map<std::string, std::string> demangled_;
  SymbolizeResult result_;
};

}  // namespace

gsym::Expected<SymbolizeResult> symbolize(const Capture& capture, GsymLocator& locator,
                                          const SymbolizeOptions& options) {
  return Symbolizer(capture, locator, options).run();
}

}  // namespace gsymprof
