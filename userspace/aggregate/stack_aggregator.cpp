#include "userspace/aggregate/stack_aggregator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "userspace/capture/capture.h"
#include "userspace/aggregate/normalize.h"

namespace gsymprof {

size_t StackAggregator::KeyHash::hash(uint32_t image, bool truncated, const Comm& comm,
                                      std::span<const uint64_t> ips) {
  // FNV-1a over the fields; stacks are short and this runs once per sample.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  mix(image);
  mix(truncated);
  uint64_t comm_words[2];
  std::memcpy(comm_words, comm.data(), sizeof(comm_words));
  mix(comm_words[0]);
  mix(comm_words[1]);
  for (uint64_t ip : ips) mix(ip);
  return static_cast<size_t>(h);
}

void StackAggregator::add(const RawSample& sample) {
  ++samples_;
  KeyView view;
  view.image = processes_.current_image(sample.pid);
  view.truncated = sample.truncated;
  std::memcpy(view.comm.data(), sample.comm.data(), std::min(sample.comm.size(), view.comm.size()));
  view.ips = sample.ips;
  auto it = stacks_.find(view);
  if (it != stacks_.end()) {
    ++it->second;
    return;
  }
  // First sight of this stack: make sure the process image covers it.
  lookup_scratch_.clear();
  for (size_t i = 0; i < sample.ips.size(); ++i)
    lookup_scratch_.push_back(lookup_address(sample.ips[i], i));
  processes_.cover(view.image, lookup_scratch_);
  Key key{view.image, view.truncated, view.comm,
          std::vector<uint64_t>(sample.ips.begin(), sample.ips.end())};
  stacks_.emplace(std::move(key), 1);
}

void StackAggregator::build(Capture& capture) const {
  capture.modules.clear();
  capture.processes.clear();
  capture.stacks.clear();
  capture.samples = 0;

  // (image, module index in image) -> capture module index
  std::map<std::pair<uint32_t, int32_t>, int32_t> module_index;
  std::map<uint32_t, size_t> process_index;  // pid -> capture process

  auto capture_module = [&](uint32_t image_id, int32_t module) -> int32_t {
    auto [it, inserted] = module_index.try_emplace({image_id, module}, 0);
    if (!inserted) return it->second;
    const ProcessImage& image = processes_.image(image_id);
    const ProcessModule& m = image.modules[static_cast<size_t>(module)];
    CaptureModule cm;
    cm.path = m.path;
    cm.build_id = m.identity.build_id;
    cm.error = m.error;
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
    it->second = static_cast<int32_t>(capture.modules.size());
    capture.modules.push_back(std::move(cm));
    return it->second;
  };

  for (const auto& [key, count] : stacks_) {
    const ProcessImage& image = processes_.image(key.image);
    CaptureStack stack;
    stack.pid = image.pid;
    stack.comm = std::string(key.comm.data(), strnlen(key.comm.data(), key.comm.size()));
    stack.truncated = key.truncated;
    stack.count = count;
    stack.frames.reserve(key.ips.size());
    auto [pit, new_process] = process_index.try_emplace(image.pid, capture.processes.size());
    if (new_process) capture.processes.push_back({image.pid, stack.comm, {}});

    for (size_t i = 0; i < key.ips.size(); ++i) {
      NormalizedFrame nf = normalize_frame(image, key.ips[i], i);
      CaptureFrame frame;
      if (nf.module >= 0) {
        frame.module = capture_module(key.image, nf.module);
        frame.address = nf.address;
      } else if (nf.reason == UnresolvedReason::ModuleUnreadable) {
        int32_t map = image.find_map(lookup_address(key.ips[i], i));
        frame.module = capture_module(key.image, image.map_module[static_cast<size_t>(map)]);
        frame.address = lookup_address(key.ips[i], i) -
                        capture.modules[static_cast<size_t>(frame.module)].load_bias;
      } else {
        frame.address = nf.address;
        frame.reason = nf.reason;
      }
      if (frame.module >= 0) {
        auto& modules = capture.processes[pit->second].modules;
        uint32_t index = static_cast<uint32_t>(frame.module);
        if (std::find(modules.begin(), modules.end(), index) == modules.end())
          modules.push_back(index);
      }
      stack.frames.push_back(frame);
    }
    capture.samples += count;
    capture.stacks.push_back(std::move(stack));
  }
  canonicalize(capture);
}

}  // namespace gsymprof
