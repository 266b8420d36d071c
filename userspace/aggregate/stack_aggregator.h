// userspace/aggregate/stack_aggregator.h - stage: raw samples -> unique stacks with
// counts -> Capture.
//
// Samples are aggregated on the raw (process image, comm, IPs) first; each
// unique stack is normalized once, in build(). add() checks the addresses of
// a stack only the first time it is seen, reading the process's maps again
// when one lies outside every known mapping (dlopen). Nothing here
// symbolizes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/capture/capture.h"
#include "userspace/sample/raw_sample.h"
#include "userspace/process/process_image.h"

namespace gsymprof {

class StackAggregator {
 public:
  explicit StackAggregator(ProcessTable& processes) : processes_(processes) {}

  void add(const RawSample& sample);
  // The process exec'd; later samples belong to its new image.
  void note_exec(uint32_t pid) { processes_.note_exec(pid); }

  uint64_t samples() const { return samples_; }
  size_t unique_stacks() const { return stacks_.size(); }

  // Normalizes every unique stack once and fills capture.modules, processes,
  // stacks and samples (other fields are left as they are). Only modules that
  // some frame references are included. The result is canonicalized.
  void build(Capture& capture) const;

 private:
  using Comm = std::array<char, 16>;
  struct Key {
    uint32_t image = 0;
    bool truncated = false;
    Comm comm{};
    std::vector<uint64_t> ips;
  };
  struct KeyView {
    uint32_t image = 0;
    bool truncated = false;
    Comm comm{};
    std::span<const uint64_t> ips;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const Key& k) const { return hash(k.image, k.truncated, k.comm, k.ips); }
    size_t operator()(const KeyView& k) const { return hash(k.image, k.truncated, k.comm, k.ips); }
    static size_t hash(uint32_t image, bool truncated, const Comm& comm,
                       std::span<const uint64_t> ips);
  };
  struct KeyEqual {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return a.image == b.image && a.truncated == b.truncated && a.comm == b.comm &&
             std::equal(a.ips.begin(), a.ips.end(), b.ips.begin(), b.ips.end());
    }
  };

  ProcessTable& processes_;
  std::unordered_map<Key, uint64_t, KeyHash, KeyEqual> stacks_;
  std::vector<uint64_t> lookup_scratch_;
  uint64_t samples_ = 0;
};

}  // namespace gsymprof
