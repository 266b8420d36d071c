// userspace/sample/kernel_features.h - stage: what this kernel offers the
// sampler, probed before anything is loaded (libbpf's probes, /sys, /proc).
//
// Each feature names the oldest mainline kernel that has it, so a missing one
// is reported as "needs X (Linux A.B)", and what is lost without it.
#pragma once

#include <string>
#include <vector>

namespace gsymprof {

struct KernelFeature {
  const char* key;       // "find_vma": for has() and GSYMPROF_KERNEL_WITHOUT
  const char* name;      // "bpf_find_vma"
  const char* since;     // "5.17": the first mainline kernel with it
  const char* without;   // what is lost when it is missing; "" = sampling needs it
  bool present = false;
};

struct KernelFeatures {
  std::string release;  // uname -r
  std::string version;  // uname -v
  // Keys: btf, ringbuf, task_btf, task_pt_regs, ringbuf_dynptr, find_vma,
  // raw_tracepoint, perf_sideband.
  std::vector<KernelFeature> features;
  int perf_event_paranoid = -100;  // -100: unreadable
  std::string lockdown;            // "none", "integrity", "confidentiality", "" = unknown
  bool has(const char* key) const;
  const KernelFeature& feature(const char* key) const;  // the key must exist
  // The first feature sampling itself needs that is missing, or null.
  const KernelFeature* missing_for_sampling() const;
};

// Probes the running kernel (needs root for the BPF probes). The
// environment variable GSYMPROF_KERNEL_WITHOUT (keys, comma-separated)
// makes features count as missing, so what an older kernel gets can be
// tried on this one (the tests do; doctor shows it as missing too).
KernelFeatures probe_kernel_features();

// The libbpf gsymprof runs with ("1.1": it is linked dynamically).
std::string libbpf_version();

}  // namespace gsymprof
