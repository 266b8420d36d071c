#include "userspace/capture/capture.h"

#include <algorithm>
#include <cstddef>
#include <tuple>

namespace gsymprof {
namespace {

// An enum's stable names: one table per enum, looked up both ways.
template <class Enum>
struct EnumName {
  Enum value;
  const char* name;
};

template <class Enum, size_t N>
const char* name_in(const EnumName<Enum> (&table)[N], Enum value, const char* unknown) {
  for (const EnumName<Enum>& entry : table)
    if (entry.value == value) return entry.name;
  return unknown;
}

template <class Enum, size_t N>
bool parse_in(const EnumName<Enum> (&table)[N], std::string_view name, Enum* value) {
  for (const EnumName<Enum>& entry : table)
    if (name == entry.name) {
      *value = entry.value;
      return true;
    }
  return false;
}

constexpr EnumName<UnresolvedReason> kReasonNames[] = {
    {UnresolvedReason::None, "none"},
    {UnresolvedReason::NoMapping, "no-mapping"},
    {UnresolvedReason::AnonymousMapping, "anonymous-mapping"},
    {UnresolvedReason::ModuleUnreadable, "module-unreadable"},
    {UnresolvedReason::NoSegment, "no-segment"},
    {UnresolvedReason::ProcessGone, "process-gone"},
    {UnresolvedReason::NotExecutable, "not-executable"},
};

constexpr EnumName<CallGraph> kCallGraphNames[] = {
    {CallGraph::FramePointer, "fp"},
    {CallGraph::Dwarf, "dwarf"},
    {CallGraph::None, "none"},
};

constexpr EnumName<ProfileClock> kClockNames[] = {
    {ProfileClock::Cpu, "cpu"},
    {ProfileClock::OffCpu, "off-cpu"},
    {ProfileClock::Wall, "wall"},
};

constexpr EnumName<ModuleErrorKind> kModuleErrorNames[] = {
    {ModuleErrorKind::None, "none"},
    {ModuleErrorKind::ProcessExited, "process-exited"},
    {ModuleErrorKind::Unreadable, "unreadable"},
};

// The letters are ps(1)'s and /proc/PID/stat's.
constexpr EnumName<OffCpuReason> kOffCpuNames[] = {
    {OffCpuReason::None, "none"},
    {OffCpuReason::Runqueue, "runqueue"},
    {OffCpuReason::Sleep, "S"},
    {OffCpuReason::DiskSleep, "D"},
    {OffCpuReason::Idle, "I"},
    {OffCpuReason::Stopped, "T"},
    {OffCpuReason::Traced, "t"},
    {OffCpuReason::Other, "?"},
};

auto mapping_key(const ModuleMapping& m) { return std::tie(m.start, m.end, m.file_offset, m.perms); }

bool module_less(const CaptureModule& a, const CaptureModule& b) {
  if (a.path != b.path) return a.path < b.path;
  if (a.build_id != b.build_id) return a.build_id < b.build_id;
  if (a.load_bias != b.load_bias) return a.load_bias < b.load_bias;
  if (a.error_kind != b.error_kind) return a.error_kind < b.error_kind;
  if (a.error != b.error) return a.error < b.error;
  return std::lexicographical_compare(
      a.mappings.begin(), a.mappings.end(), b.mappings.begin(), b.mappings.end(),
      [](const ModuleMapping& x, const ModuleMapping& y) { return mapping_key(x) < mapping_key(y); });
}

bool module_equal(const CaptureModule& a, const CaptureModule& b) {
  return !module_less(a, b) && !module_less(b, a);
}

// Sorts `entries` (jit_symbols, python_frames: what frames name by index),
// merging equal ones and dropping those no frame's `field` refers to.
// Returns each old index's new one (-1: dropped); frames are not touched.
template <class Entry>
std::vector<int32_t> sort_used_entries(std::vector<Entry>& entries, const std::vector<CaptureStack>& stacks,
                                       int32_t CaptureFrame::*field) {
  std::vector<bool> used(entries.size(), false);
  for (const CaptureStack& s : stacks)
    for (const CaptureFrame& f : s.frames) {
      const int32_t index = f.*field;
      if (index >= 0 && static_cast<size_t>(index) < used.size()) used[static_cast<size_t>(index)] = true;
    }
  std::vector<uint32_t> order(entries.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return entries[a] < entries[b]; });
  std::vector<Entry> kept;
  std::vector<int32_t> new_index(entries.size(), -1);
  for (uint32_t old : order) {
    if (!used[old]) continue;
    if (kept.empty() || kept.back() != entries[old]) kept.push_back(std::move(entries[old]));
    new_index[old] = static_cast<int32_t>(kept.size() - 1);
  }
  entries = std::move(kept);
  return new_index;
}

}  // namespace

const char* to_string(UnresolvedReason reason) { return unresolved_reason_name(reason); }

const char* unresolved_reason_name(UnresolvedReason reason) { return name_in(kReasonNames, reason, "unknown"); }
bool parse_unresolved_reason(std::string_view name, UnresolvedReason* reason) {
  return parse_in(kReasonNames, name, reason);
}
const char* call_graph_name(CallGraph call_graph) { return name_in(kCallGraphNames, call_graph, "?"); }
bool parse_call_graph(std::string_view name, CallGraph* call_graph) {
  return parse_in(kCallGraphNames, name, call_graph);
}
const char* clock_name(ProfileClock clock) { return name_in(kClockNames, clock, "?"); }
bool parse_clock(std::string_view name, ProfileClock* clock) { return parse_in(kClockNames, name, clock); }
const char* module_error_kind_name(ModuleErrorKind kind) { return name_in(kModuleErrorNames, kind, "?"); }
bool parse_module_error_kind(std::string_view name, ModuleErrorKind* kind) {
  return parse_in(kModuleErrorNames, name, kind);
}
const char* off_cpu_reason_name(OffCpuReason reason) { return name_in(kOffCpuNames, reason, "?"); }
bool parse_off_cpu_reason(std::string_view name, OffCpuReason* reason) {
  return parse_in(kOffCpuNames, name, reason);
}

std::string off_cpu_frame_name(OffCpuReason reason) {
  if (reason == OffCpuReason::Runqueue) return "[runqueue]";
  return std::string("[off-cpu ") + off_cpu_reason_name(reason) + "]";
}

uint64_t stack_weight(const Capture& capture, const CaptureStack& stack) {
  if (capture.clock == ProfileClock::Cpu) return stack.count;
  if (stack.off_cpu != OffCpuReason::None) return stack.off_cpu_ns;
  // An on-CPU sample stands for one sampling period.
  const uint64_t period_ns = capture.frequency_hz ? 1000000000ull / capture.frequency_hz : 0;
  return stack.count * period_ns;
}

const char* weight_unit(const Capture& capture) {
  return capture.clock == ProfileClock::Cpu ? "samples" : "ns";
}

void canonicalize(Capture& capture) {
  // Modules: sorted, identical entries (e.g. a forked child's) merged.
  for (CaptureModule& m : capture.modules)
    std::sort(m.mappings.begin(), m.mappings.end(),
              [](const ModuleMapping& x, const ModuleMapping& y) { return mapping_key(x) < mapping_key(y); });
  std::vector<size_t> order(capture.modules.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return module_less(capture.modules[a], capture.modules[b]);
  });
  std::vector<CaptureModule> modules;
  std::vector<int32_t> new_index(capture.modules.size(), -1);
  for (size_t old : order) {
    if (modules.empty() || !module_equal(modules.back(), capture.modules[old]))
      modules.push_back(std::move(capture.modules[old]));
    new_index[old] = static_cast<int32_t>(modules.size() - 1);
  }
  capture.modules = std::move(modules);
  auto remap = [&](int64_t old) -> int32_t {
    return old >= 0 && static_cast<size_t>(old) < new_index.size() ? new_index[old] : -1;
  };

  for (CaptureProcess& p : capture.processes) {
    for (uint32_t& m : p.modules) m = static_cast<uint32_t>(remap(m));
    std::sort(p.modules.begin(), p.modules.end());
    p.modules.erase(std::unique(p.modules.begin(), p.modules.end()), p.modules.end());
  }
  std::stable_sort(capture.processes.begin(), capture.processes.end(),
                   [](const CaptureProcess& a, const CaptureProcess& b) {
                     return std::tie(a.pid, a.comm) < std::tie(b.pid, b.comm);
                   });

  // JIT symbols and Python frames: sorted, merged, only those a frame uses.
  const std::vector<int32_t> jit_index = sort_used_entries(capture.jit_symbols, capture.stacks, &CaptureFrame::jit);
  const std::vector<int32_t> python_index =
      sort_used_entries(capture.python_frames, capture.stacks, &CaptureFrame::python);
  auto remap_entry = [](int32_t old, const std::vector<int32_t>& index) -> int32_t {
    return old >= 0 && static_cast<size_t>(old) < index.size() ? index[static_cast<size_t>(old)] : -1;
  };

  for (CaptureStack& s : capture.stacks)
    for (CaptureFrame& f : s.frames) {
      if (f.module >= 0) f.module = remap(f.module);
      if (f.jit >= 0) f.jit = remap_entry(f.jit, jit_index);
      if (f.python >= 0) f.python = remap_entry(f.python, python_index);
    }
  for (CaptureStack& s : capture.stacks) {
    if (s.times_us.size() != s.count) s.times_us.clear();
    if (!std::is_sorted(s.times_us.begin(), s.times_us.end())) std::sort(s.times_us.begin(), s.times_us.end());
  }
  auto stack_key = [](const CaptureStack& s) {
    return std::tie(s.pid, s.tid, s.comm, s.frames, s.truncated, s.off_cpu, s.short_waits);
  };
  std::sort(capture.stacks.begin(), capture.stacks.end(),
            [&](const CaptureStack& a, const CaptureStack& b) { return stack_key(a) < stack_key(b); });
  std::vector<CaptureStack> merged;
  for (CaptureStack& s : capture.stacks) {
    if (!merged.empty() && stack_key(merged.back()) == stack_key(s)) {
      CaptureStack& into = merged.back();
      // Times stay only while every merged stack has them (one per sample).
      if (into.times_us.empty() || s.times_us.empty()) {
        into.times_us.clear();
      } else {
        const size_t middle = into.times_us.size();
        into.times_us.insert(into.times_us.end(), s.times_us.begin(), s.times_us.end());
        std::inplace_merge(into.times_us.begin(), into.times_us.begin() + static_cast<ptrdiff_t>(middle),
                           into.times_us.end());
      }
      into.count += s.count;
      into.off_cpu_ns += s.off_cpu_ns;
    } else {
      merged.push_back(std::move(s));
    }
  }
  capture.stacks = std::move(merged);

  std::vector<KernelSymbol>& symbols = capture.kernel.symbols;
  auto symbol_key = [](const KernelSymbol& k) { return std::tie(k.start, k.end, k.name, k.module); };
  std::sort(symbols.begin(), symbols.end(),
            [&](const KernelSymbol& a, const KernelSymbol& b) { return symbol_key(a) < symbol_key(b); });
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
}

void merge_capture(Capture& into, Capture from) {
  const bool empty = into.modules.empty() && into.stacks.empty() && into.processes.empty() &&
                     into.start_time_unix_ns == 0;
  if (empty) {
    into.host = from.host;
    into.kernel_release = from.kernel_release;
    into.frequency_hz = from.frequency_hz;
    into.start_time_unix_ns = from.start_time_unix_ns;
    into.call_graph = from.call_graph;
    into.clock = from.clock;
    into.kernel.build_id = from.kernel.build_id;
    into.kernel.error = from.kernel.error;
  }
  into.duration_ns += from.duration_ns;
  into.samples += from.samples;
  for (const auto& [reason, count] : from.lost) into.lost[reason] += count;
  for (const auto& [reason, count] : from.truncations) into.truncations[reason] += count;
  if (into.kernel.error.empty()) into.kernel.error = from.kernel.error;
  into.kernel.symbols.insert(into.kernel.symbols.end(), from.kernel.symbols.begin(), from.kernel.symbols.end());

  const int32_t module_base = static_cast<int32_t>(into.modules.size());
  const int32_t jit_base = static_cast<int32_t>(into.jit_symbols.size());
  const int32_t python_base = static_cast<int32_t>(into.python_frames.size());
  for (CaptureModule& m : from.modules) into.modules.push_back(std::move(m));
  for (JitSymbol& j : from.jit_symbols) into.jit_symbols.push_back(std::move(j));
  for (PythonFrame& p : from.python_frames) into.python_frames.push_back(std::move(p));
  for (CaptureProcess& p : from.processes) {
    for (uint32_t& m : p.modules) m += static_cast<uint32_t>(module_base);
    auto same = std::find_if(into.processes.begin(), into.processes.end(),
                             [&](const CaptureProcess& q) { return q.pid == p.pid && q.comm == p.comm; });
    if (same == into.processes.end()) {
      into.processes.push_back(std::move(p));
    } else {
      same->modules.insert(same->modules.end(), p.modules.begin(), p.modules.end());
    }
  }
  // Sample times count from `into`'s start; `from` may start later (the
  // agent's ticks) or, merged out of order, earlier (saturated at 0).
  const int64_t shift_us = (static_cast<int64_t>(from.start_time_unix_ns - into.start_time_unix_ns)) / 1000;
  for (CaptureStack& s : from.stacks) {
    for (uint64_t& t : s.times_us)
      t = shift_us >= 0 ? t + static_cast<uint64_t>(shift_us)
                        : t - std::min(t, static_cast<uint64_t>(-shift_us));
    for (CaptureFrame& f : s.frames) {
      if (f.module >= 0) f.module += module_base;
      if (f.jit >= 0) f.jit += jit_base;
      if (f.python >= 0) f.python += python_base;
    }
    into.stacks.push_back(std::move(s));
  }
  canonicalize(into);
}

int32_t mapping_holding(const CaptureModule& module, uint64_t runtime) {
  for (size_t m = 0; m < module.mappings.size(); ++m)
    if (runtime >= module.mappings[m].start && runtime < module.mappings[m].end) return static_cast<int32_t>(m);
  return -1;
}

uint64_t runtime_address(const Capture& capture, const CaptureFrame& frame) {
  if (frame.kernel || frame.module < 0) return frame.address;
  return frame.address + capture.modules[static_cast<size_t>(frame.module)].load_bias;  // wraps as the CPU's would
}

std::pair<uint64_t, uint64_t> kernel_address_range(const Capture& capture) {
  uint64_t low = UINT64_MAX, high = 0;
  for (const CaptureStack& stack : capture.stacks)
    for (const CaptureFrame& frame : stack.frames)
      if (frame.kernel) {
        low = std::min(low, frame.address);
        high = std::max(high, frame.address);
      }
  return {low, high + 1};
}

bool has_kernel_frames(const Capture& capture) {
  for (const CaptureStack& stack : capture.stacks)
    for (const CaptureFrame& frame : stack.frames)
      if (frame.kernel) return true;
  return false;
}

const KernelSymbol* find_kernel_symbol(const CaptureKernel& kernel, uint64_t address) {
  auto it = std::upper_bound(kernel.symbols.begin(), kernel.symbols.end(), address,
                             [](uint64_t a, const KernelSymbol& k) { return a < k.start; });
  if (it == kernel.symbols.begin()) return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

}  // namespace gsymprof
