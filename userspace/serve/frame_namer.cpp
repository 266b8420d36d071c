#include "userspace/serve/frame_namer.h"

namespace gsymprof {

FrameNamer::FrameNamer(SymbolStore& store, std::chrono::steady_clock::time_point deadline)
    : store_(store), deadline_(deadline) {}

FrameOutcome FrameNamer::name(const BuildId& id, const MappingView& mapping, uint64_t address,
                              std::vector<NamedLine>& lines) {
  lines.clear();
  // The clock read every 256 lookups: a lookup takes well under a microsecond.
  if (!late_ && (since_clock_++ % 256 == 0)) late_ = std::chrono::steady_clock::now() >= deadline_;
  if (late_) return FrameOutcome::Deadline;
  auto it = modules_.find(id);
  if (it == modules_.end()) it = modules_.emplace(id, store_.find(id)).first;
  const StoreLookup& module = it->second;
  if (module.outcome != FrameOutcome::Named) return module.outcome;
  auto gsym_addr = gsym_address(*module.rule, mapping.memory_start, mapping.memory_limit, mapping.file_offset, address);
  if (!gsym_addr) return FrameOutcome::OutsideMapping;
  gsym::Expected<bool> found = module.reader->lookup_into(*gsym_addr, gsym::LookupOptions{}, scratch_);
  if (!found) return FrameOutcome::LookupError;
  if (!*found || scratch_.frames.empty()) return FrameOutcome::NoFunction;
  for (const gsym::LookupFrame& frame : scratch_.frames) {  // innermost first
    NamedLine line;
    // The views of a frame point into the reader's mapped GSYM, which
    // modules_ holds: equal pointers are the same string.
    auto [d, added] = demangled_.try_emplace(frame.name.data());
    if (added) {
      std::string spare;
      std::string_view plain = module.names->get(frame.name, spare);
      if (!spare.empty()) {  // the shared cache is full: this request keeps it
        kept_.push_back(std::move(spare));
        plain = kept_.back();
      }
      d->second = plain;
    }
    if (d->second.empty()) {
      line.name = frame.name;
    } else {
      line.name = d->second;
      line.system_name = frame.name;
    }
    if (!frame.directory.empty() && !frame.basename.empty()) {
      auto [f, new_file] = files_.try_emplace({frame.directory.data(), frame.basename.data()});
      if (new_file) f->second.append(frame.directory).append("/").append(frame.basename);
      line.file = f->second;
    } else {
      line.file = frame.basename;
    }
    line.line = frame.line;
    lines.push_back(line);
  }
  return FrameOutcome::Named;
}

}  // namespace gsymprof
