// userspace/assemble/stack_aggregator.h - stage: raw samples -> unique stacks with
// counts -> Capture.
//
// Samples are aggregated on the raw (process image, thread, comm, kernel
// IPs, user IPs) first; each
// unique stack is normalized once, in build(). add() checks the addresses of
// a stack only the first time it is seen, reading the process's maps again
// when one lies outside every known mapping (dlopen). Nothing here
// symbolizes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "userspace/assemble/python_stacks.h"
#include "userspace/capture/capture.h"
#include "userspace/events/events.h"
#include "userspace/process/perf_map.h"
#include "userspace/process/process_image.h"

namespace gsymprof {

// Samples whose stack holds a frame in anonymous executable memory (JIT
// code) that no perf map (or jitdump) names, by pid; what build() saw.
struct JitReport {
  uint64_t named_samples = 0;    // samples with a frame named from a perf map or jitdump
  uint64_t unnamed_samples = 0;  // samples with an unnamed frame in anonymous executable memory
  std::map<uint32_t, uint64_t> unnamed_by_pid;  // of those: pid -> samples
  std::map<uint32_t, bool> has_map;             // of those pids: whether a perf map was read
  // Processes with JIT frames whose jitdump stopped being read: why (one line).
  std::map<uint32_t, std::string> jitdump_errors;
};

class StackAggregator {
 public:
  // `perf_maps` (optional): names frames in anonymous executable memory
  // (JIT code) from the processes' perf maps (perf_map.h). `python`
  // (optional): puts CPython processes' Python frames in their stacks.
  explicit StackAggregator(ProcessTable& processes, PerfMaps* perf_maps = nullptr,
                           PythonStacks* python = nullptr)
      : processes_(processes), perf_maps_(perf_maps), python_(python) {}

  void add(const RawSample& sample);
  // Off-CPU waits summed by the kernel: one frameless stack per thread and reason.
  void add(const RawShortWaits& waits);
  // The same, from the side-band: the new image is built from its events.
  void note_exec(uint32_t pid, uint64_t mm) {
    processes_.note_exec(pid, mm);
    if (perf_maps_) perf_maps_->note_exec(pid);
  }

  // A module some stack uses: (image id, index into that image's modules).
  struct ModuleUse {
    uint32_t image = 0;
    int32_t module = 0;
    auto operator<=>(const ModuleUse&) const = default;
  };
  // The modules stacks used for the first time since the last call, in the
  // order first used (work that may start before build(): GSYM prefetch).
  std::vector<ModuleUse> take_new_module_uses() { return std::exchange(new_module_uses_, {}); }

  // Keeps each sample's time (RawSample::time_ns) with its stack; build()
  // gives them as CaptureStack::times_us, microseconds after `origin_ns`
  // (the same clock; earlier ones become 0). Off by default: the agent needs
  // no memory per sample, only per unique stack.
  void keep_sample_times(uint64_t origin_ns) {
    keep_times_ = true;
    time_origin_ns_ = origin_ns;
  }

  uint64_t samples() const { return samples_; }
  // The agent's next window: no stacks, no samples; with `images_renumbered`
  // (ProcessTable::compact) the modules seen are forgotten too.
  void clear(bool images_renumbered);
  size_t unique_stacks() const { return stacks_.size(); }

  // Normalizes every unique stack once and fills capture.modules, processes,
  // stacks and samples (other fields are left as they are). Only modules that
  // some frame references are included. The result is canonicalized. JIT
  // frames are named (capture.jit_symbols) and `jit` says what was not.
  void build(Capture& capture, JitReport* jit = nullptr) const;

 private:
  using Comm = std::array<char, 16>;
  // What a stack is besides its addresses.
  struct KeyHeader {
    uint32_t image = 0, tid = 0;
    bool truncated = false;
    OffCpuReason off_cpu = OffCpuReason::None;
    bool short_waits = false;
    // The user frames hold Python frames (PythonStacks::is_frame): only
    // then is a value with the tag bits one (any other stack's value is an
    // address, whatever a recording says).
    bool python = false;
    uint32_t kernel_count = 0;
    Comm comm{};
    bool operator==(const KeyHeader&) const = default;
  };
  // ips holds the kernel frames (kernel_count of them), then the user frames.
  struct Key : KeyHeader {
    std::vector<uint64_t> ips;
  };
  // A sample's stack looked up without copying its addresses.
  struct KeyView : KeyHeader {
    std::span<const uint64_t> kernel_ips, user_ips;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const Key& k) const;
    size_t operator()(const KeyView& k) const;
  };
  struct KeyEqual {
    using is_transparent = void;
    bool operator()(const Key& a, const Key& b) const;
    bool operator()(const KeyView& a, const Key& b) const;
    bool operator()(const Key& a, const KeyView& b) const { return (*this)(b, a); }
  };

  // Records the modules lookup_scratch_'s addresses fall in (new_module_uses_).
  void note_module_uses(uint32_t image_id, const ProcessImage& image);
  // The index into capture.jit_symbols of the perf-map entry naming JIT code
  // at `address` of `pid` (added on first use), or -1: no entry.
  int32_t jit_symbol_index(uint32_t pid, uint64_t address, Capture& capture,
                           std::map<JitSymbol, int32_t>& index) const;
  // Whether user frame `index` (IP `ip`) lies in anonymous executable memory.
  static bool in_anonymous_code(const ProcessImage& image, uint64_t ip, size_t index);
  // Whether user frame value `ip` of a stack is a Python frame.
  static bool python_frame(const KeyHeader& key, uint64_t ip) { return key.python && PythonStacks::is_frame(ip); }

  ProcessTable& processes_;
  PerfMaps* perf_maps_ = nullptr;
  PythonStacks* python_ = nullptr;
  // What a unique stack adds up to: its samples (or waits) and, off the
  // CPU, their time.
  struct Weight {
    uint64_t count = 0, off_cpu_ns = 0;
    std::vector<uint64_t> times_ns;  // with keep_sample_times: one per sample
  };
  std::unordered_map<Key, Weight, KeyHash, KeyEqual> stacks_;
  // The entries of recently seen stacks, direct-mapped by their hash, in
  // front of stacks_: at high rates the reader's time per sample goes to
  // cache misses, and the table's lookup is three dependent loads (bucket,
  // node, addresses) where a hit here is one before the comparison. Entries
  // point into stacks_ (its elements never move) and are dropped with it.
  struct RecentStack {
    size_t hash = 0;
    std::pair<const Key, Weight>* entry = nullptr;
  };
  std::array<RecentStack, 1024> recent_stacks_{};
  RecentStack& recent_stack(size_t hash) { return recent_stacks_[(hash ^ hash >> 32) % recent_stacks_.size()]; }
  std::vector<uint64_t> lookup_scratch_;
  std::set<ModuleUse> used_modules_;
  std::vector<ModuleUse> new_module_uses_;
  uint64_t samples_ = 0;
  bool keep_times_ = false;
  uint64_t time_origin_ns_ = 0;
};

}  // namespace gsymprof
