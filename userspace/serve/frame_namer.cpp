#include "userspace/serve/frame_namer.h"

#include "userspace/symbolize/demangle.h"

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
    auto [d, added] = demangled_.try_emplace(std::string(frame.name));
    if (added) d->second = demangle(frame.name);
    line.name = d->second;
    if (line.name != frame.name) line.system_name = std::string(frame.name);
    if (!frame.directory.empty() && !frame.basename.empty())
      line.file = std::string(frame.directory) + "/" + std::string(frame.basename);
    else
      line.file = std::string(frame.basename);
    line.line = frame.line;
    lines.push_back(std::move(line));
  }
  return FrameOutcome::Named;
}

}  // namespace gsymprof
