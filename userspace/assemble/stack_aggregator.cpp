#include "userspace/assemble/stack_aggregator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "userspace/capture/capture.h"
#include "userspace/process/normalize.h"

namespace gsymprof {

namespace {

// FNV-1a over the key's fields; stacks are short and this runs once per sample.
class KeyHasher {
 public:
  void mix(uint64_t v) {
    h_ ^= v;
    h_ *= 1099511628211ull;
  }
  template <class Comm>
  void mix_comm(const Comm& comm) {
    uint64_t words[2];
    static_assert(sizeof(words) == sizeof(comm));
    std::memcpy(words, comm.data(), sizeof(words));
    mix(words[0]);
    mix(words[1]);
  }
  void mix(std::span<const uint64_t> ips) {
    for (uint64_t ip : ips) mix(ip);
  }
  size_t value() const { return static_cast<size_t>(h_); }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

template <class K>
void mix_header(KeyHasher& h, const K& k) {
  h.mix(k.image);
  h.mix(k.tid);
  h.mix(k.truncated);
  h.mix(static_cast<uint64_t>(k.off_cpu) << 2 | k.python << 1 | k.short_waits);
  h.mix(k.kernel_count);
  h.mix_comm(k.comm);
}

// The capture's modules, one per (process image, module of that image),
// made when a frame first uses one: its path, identity, mappings and load
// bias.
class CaptureModules {
 public:
  CaptureModules(const ProcessTable& processes, Capture& capture)
      : processes_(processes), capture_(capture) {}

  int32_t index(uint32_t image_id, int32_t module) {
    auto [it, inserted] = index_.try_emplace({image_id, module}, 0);
    if (!inserted) return it->second;
    const ProcessImage& image = processes_.image(image_id);
    const ProcessModule& m = image.modules[static_cast<size_t>(module)];
    CaptureModule cm;
    cm.path = m.path;
    cm.build_id = m.identity.build_id;
    cm.error = m.error;
    cm.error_kind = m.error_kind;
    cm.local_file = m.identity.local_file;
    bool have_bias = false;
    for (size_t i = 0; i < image.maps.size(); ++i) {
      if (image.map_module[i] != module) continue;
      const MapEntry& map = image.maps[i];
      cm.mappings.push_back({map.start, map.end, map.file_offset, map.perms});
      if (have_bias) continue;
      if (!m.error.empty()) {
        // No segments: any constant bias round-trips the runtime address,
        // which is all a module+offset frame needs.
        cm.load_bias = map.start - map.file_offset;
        have_bias = true;
      } else if (auto bias = gsymprof::load_bias(m.identity.segments, map)) {
        cm.load_bias = *bias;
        have_bias = true;
      }
    }
    it->second = static_cast<int32_t>(capture_.modules.size());
    capture_.modules.push_back(std::move(cm));
    return it->second;
  }

 private:
  const ProcessTable& processes_;
  Capture& capture_;
  std::map<std::pair<uint32_t, int32_t>, int32_t> index_;  // (image, module) -> capture module
};

// Kernel frames: the kernel's own addresses, leaf exact, return addresses
// minus one.
void append_kernel_frames(std::span<const uint64_t> ips, CaptureStack& stack) {
  for (size_t i = 0; i < ips.size(); ++i) {
    CaptureFrame frame;
    frame.kernel = true;
    frame.address = lookup_address(ips[i], i);
    stack.frames.push_back(frame);
  }
}

void note_process_module(CaptureProcess& process, int32_t module) {
  const uint32_t index = static_cast<uint32_t>(module);
  if (std::find(process.modules.begin(), process.modules.end(), index) == process.modules.end())
    process.modules.push_back(index);
}

}  // namespace

int32_t StackAggregator::jit_symbol_index(uint32_t pid, uint64_t address, Capture& capture,
                                          std::map<JitSymbol, int32_t>& index) const {
  const JitSymbol* symbol = perf_maps_ ? perf_maps_->find(pid, address, /*final=*/true) : nullptr;
  if (!symbol) return -1;
  auto [it, added] = index.try_emplace(*symbol, static_cast<int32_t>(capture.jit_symbols.size()));
  if (added) capture.jit_symbols.push_back(*symbol);
  return it->second;
}

size_t StackAggregator::KeyHash::operator()(const Key& k) const {
  KeyHasher h;
  mix_header(h, k);
  h.mix(k.ips);
  return h.value();
}

size_t StackAggregator::KeyHash::operator()(const KeyView& k) const {
  KeyHasher h;
  mix_header(h, k);
  h.mix(k.kernel_ips);
  h.mix(k.user_ips);
  return h.value();
}

bool StackAggregator::KeyEqual::operator()(const Key& a, const Key& b) const {
  return static_cast<const KeyHeader&>(a) == static_cast<const KeyHeader&>(b) && a.ips == b.ips;
}

bool StackAggregator::KeyEqual::operator()(const KeyView& a, const Key& b) const {
  if (!(static_cast<const KeyHeader&>(a) == static_cast<const KeyHeader&>(b)) ||
      a.kernel_ips.size() + a.user_ips.size() != b.ips.size())
    return false;
  return std::equal(a.kernel_ips.begin(), a.kernel_ips.end(), b.ips.begin()) &&
         std::equal(a.user_ips.begin(), a.user_ips.end(), b.ips.begin() + a.kernel_ips.size());
}

void StackAggregator::add(const RawSample& sample) {
  ++samples_;
  KeyView view;
  view.image = sample.image != RawSample::kNoImage ? sample.image : processes_.current_image(sample.pid);
  view.tid = sample.tid;
  view.truncated = sample.truncated;
  view.off_cpu = sample.off_cpu.reason;
  view.kernel_count = static_cast<uint32_t>(sample.kernel_ips.size());
  std::memcpy(view.comm.data(), sample.comm.data(), std::min(sample.comm.size(), view.comm.size()));
  view.kernel_ips = sample.kernel_ips;
  view.user_ips = sample.ips;
  if (python_) {
    python_->note_image(view.image);
    bool cut_short = false;
    if (std::span<const uint64_t> merged = python_->merge(sample, view.image, &cut_short); !merged.empty()) {
      view.user_ips = merged;
      view.python = true;
      view.truncated = view.truncated || cut_short;
    }
  }
  const size_t hash = KeyHash{}(view);
  RecentStack& recent = recent_stack(hash);
  Weight* seen = nullptr;
  if (recent.entry && recent.hash == hash && KeyEqual{}(view, recent.entry->first)) {
    seen = &recent.entry->second;
  } else if (auto it = stacks_.find(view); it != stacks_.end()) {
    recent = {hash, &*it};
    seen = &it->second;
  }
  if (seen) {
    ++seen->count;
    seen->off_cpu_ns += sample.off_cpu.ns;
    if (keep_times_) seen->times_ns.push_back(sample.time_ns);
    return;
  }
  // First sight of this stack: make sure the process image covers it.
  lookup_scratch_.clear();
  for (size_t i = 0; i < view.user_ips.size(); ++i)
    if (!python_frame(view, view.user_ips[i]))
      lookup_scratch_.push_back(lookup_address(view.user_ips[i], i));
  if (!lookup_scratch_.empty()) processes_.cover(view.image, lookup_scratch_);
  const ProcessImage& image = processes_.image(view.image);
  // JIT code: read the perf map now, while the process is alive and the
  // code is where the map says (the runtime may free it later).
  if (perf_maps_) {
    for (size_t i = 0; i < view.user_ips.size(); ++i)
      if (!python_frame(view, view.user_ips[i]) && in_anonymous_code(image, view.user_ips[i], i))
        perf_maps_->find(sample.pid, lookup_address(view.user_ips[i], i));
  }
  note_module_uses(view.image, image);
  Key key{static_cast<const KeyHeader&>(view), {}};
  key.ips.reserve(sample.kernel_ips.size() + view.user_ips.size());
  key.ips.assign(sample.kernel_ips.begin(), sample.kernel_ips.end());
  key.ips.insert(key.ips.end(), view.user_ips.begin(), view.user_ips.end());
  Weight weight{1, sample.off_cpu.ns, {}};
  if (keep_times_) weight.times_ns.push_back(sample.time_ns);
  recent = {hash, &*stacks_.emplace(std::move(key), std::move(weight)).first};
}

void StackAggregator::clear(bool images_renumbered) {
  stacks_.clear();
  recent_stacks_.fill({});
  samples_ = 0;
  if (python_) {
    python_->clear_names();
    if (images_renumbered) python_->clear_images();
  }
  if (images_renumbered) {
    used_modules_.clear();
    new_module_uses_.clear();
  }
}

void StackAggregator::add(const RawShortWaits& waits) {
  samples_ += waits.count;
  Key key;
  key.image = processes_.current_image(waits.pid);
  key.tid = waits.tid;
  key.off_cpu = waits.reason;
  key.short_waits = true;
  std::memcpy(key.comm.data(), waits.comm.data(), std::min(waits.comm.size(), key.comm.size()));
  Weight& weight = stacks_[std::move(key)];
  weight.count += waits.count;
  weight.off_cpu_ns += waits.ns;
}

void StackAggregator::note_module_uses(uint32_t image_id, const ProcessImage& image) {
  int32_t previous = -1;  // frames run in one module for a while: one set lookup each
  for (uint64_t addr : lookup_scratch_) {
    const int32_t map = image.find_map(addr);
    if (map < 0 || !image.maps[static_cast<size_t>(map)].executable()) continue;
    const int32_t module = image.map_module[static_cast<size_t>(map)];
    if (module < 0 || module == previous) continue;
    previous = module;
    if (used_modules_.insert({image_id, module}).second) new_module_uses_.push_back({image_id, module});
  }
}

bool StackAggregator::in_anonymous_code(const ProcessImage& image, uint64_t ip, size_t index) {
  const int32_t map = image.find_map(lookup_address(ip, index));
  return map >= 0 && image.map_module[static_cast<size_t>(map)] < 0 &&
         image.maps[static_cast<size_t>(map)].executable();
}

void StackAggregator::build(Capture& capture, JitReport* jit) const {
  capture.modules.clear();
  capture.processes.clear();
  capture.stacks.clear();
  capture.jit_symbols.clear();
  capture.python_frames.clear();
  capture.samples = 0;
  std::map<JitSymbol, int32_t> jit_index;
  std::map<uint32_t, int32_t> python_index;  // PythonStacks frame id -> capture.python_frames
  JitReport report;

  CaptureModules modules(processes_, capture);
  std::map<uint32_t, size_t> process_index;  // pid -> capture process
  capture.stacks.reserve(stacks_.size());  // no doubling's slack nor copy at the run's peak

  for (const auto& [key, weight] : stacks_) {
    const uint64_t count = weight.count;
    const ProcessImage& image = processes_.image(key.image);
    CaptureStack stack;
    stack.pid = image.pid;
    stack.tid = key.tid;
    stack.comm = std::string(key.comm.data(), strnlen(key.comm.data(), key.comm.size()));
    stack.truncated = key.truncated;
    stack.count = count;
    stack.off_cpu = key.off_cpu;
    stack.off_cpu_ns = weight.off_cpu_ns;
    stack.short_waits = key.short_waits;
    // Summed short waits have no times: their stack gets none.
    if (weight.times_ns.size() == count) {
      stack.times_us.reserve(count);
      for (uint64_t t : weight.times_ns)
        stack.times_us.push_back((t - std::min(t, time_origin_ns_)) / 1000);
    }
    stack.frames.reserve(key.ips.size());
    auto [pit, new_process] = process_index.try_emplace(image.pid, capture.processes.size());
    if (new_process) capture.processes.push_back({image.pid, stack.comm, {}});

    append_kernel_frames(std::span<const uint64_t>(key.ips).first(key.kernel_count), stack);
    const std::span<const uint64_t> user_ips =
        std::span<const uint64_t>(key.ips).subspan(key.kernel_count);
    bool jit_named = false, jit_unnamed = false;
    for (size_t i = 0; i < user_ips.size(); ++i) {
      CaptureFrame frame;
      if (python_ && python_frame(key, user_ips[i])) {
        const uint32_t id = PythonStacks::frame_id(user_ips[i]);
        auto [at, added] = python_index.try_emplace(id, static_cast<int32_t>(capture.python_frames.size()));
        if (added) capture.python_frames.push_back(python_->frame(id));
        frame.python = at->second;
        stack.frames.push_back(frame);
        continue;
      }
      NormalizedFrame nf = normalize_frame(image, user_ips[i], i);
      if (nf.module >= 0) {
        frame.module = modules.index(key.image, nf.module);
        frame.address = nf.address;
      } else if (nf.reason == UnresolvedReason::ModuleUnreadable) {
        int32_t map = image.find_map(lookup_address(user_ips[i], i));
        frame.module = modules.index(key.image, image.map_module[static_cast<size_t>(map)]);
        frame.address = lookup_address(user_ips[i], i) -
                        capture.modules[static_cast<size_t>(frame.module)].load_bias;
      } else {
        frame.address = nf.address;
        frame.reason = nf.reason;
        if (nf.reason == UnresolvedReason::AnonymousMapping && in_anonymous_code(image, user_ips[i], i)) {
          frame.jit = jit_symbol_index(image.pid, lookup_address(user_ips[i], i), capture, jit_index);
          (frame.jit >= 0 ? jit_named : jit_unnamed) = true;
        }
      }
      if (frame.module >= 0) note_process_module(capture.processes[pit->second], frame.module);
      stack.frames.push_back(frame);
    }
    if ((jit_named || jit_unnamed) && perf_maps_) {
      std::string error = perf_maps_->jitdump_error(image.pid);
      if (!error.empty()) report.jitdump_errors[image.pid] = std::move(error);
    }
    if (jit_named) report.named_samples += count;
    if (jit_unnamed) {
      report.unnamed_samples += count;
      report.unnamed_by_pid[image.pid] += count;
    }
    capture.samples += count;
    capture.stacks.push_back(std::move(stack));
  }
  for (const auto& [pid, samples] : report.unnamed_by_pid)
    report.has_map[pid] = perf_maps_ && perf_maps_->has_map(pid);
  if (jit) *jit = std::move(report);
  canonicalize(capture);
}

}  // namespace gsymprof
