// userspace/serve/serve_metrics.h - what `gsymprof serve` counts, as its
// /metrics serves it (Prometheus text 0.0.4): requests by path and status
// with a latency histogram, frames by outcome (named, or why not), the
// open-GSYM cache, conversions, uploads, forwarded requests, and the
// service's own CPU and memory. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace gsymprof {

// What became of one location of a request.
enum class FrameOutcome : uint8_t {
  Named = 0,          // lines filled from a GSYM
  AlreadyNamed,       // it had lines: left as it was
  NoMapping,          // no mapping: nothing says which file it is in
  NoBuildId,          // its mapping has no GNU build ID (a Go build ID, a file-ID hash only)
  NoSymbols,          // no GSYM, no debug file in the store, debuginfod not asked or without it
  PendingConversion,  // its debug file is being converted (off the request path): try again
  ConversionFailed,   // converting its debug file failed (remembered for a while)
  QueueFull,          // too many conversions waiting: not queued
  OutsideMapping,     // the address is outside its mapping, or in no PT_LOAD segment
  NoFunction,         // the GSYM has no function at the address
  LookupError,        // the GSYM record at the address is corrupt
  Deadline,           // the request's deadline passed before it was looked up
  kCount,
};
const char* to_string(FrameOutcome outcome);  // "named", "no_build_id", ...

using FrameCounts = std::array<uint64_t, static_cast<size_t>(FrameOutcome::kCount)>;

enum class ConversionOutcome : uint8_t { Converted = 0, Failed, kCount };

class ServeMetrics {
 public:
  // One request on `path` (a fixed route name) answered with `status`
  // after `seconds`.
  void add_request(const std::string& path, int status, double seconds);
  void add_frames(const FrameCounts& counts);
  void add_cache(bool hit);
  void add_conversion(ConversionOutcome outcome);
  void set_conversions_waiting(uint64_t waiting);
  void add_upload(const std::string& outcome);   // "stored", "mismatch", "too_large", ...
  void add_forward(const std::string& outcome);  // "sent", "failed", "not_configured"
  std::string prometheus_text() const;

  // Upper bounds of the latency histogram's buckets, in seconds.
  static constexpr std::array<double, 10> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};

 private:
  struct Latency {
    std::array<uint64_t, kBuckets.size()> buckets{};  // not cumulative here
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Latency> latency_;
  FrameCounts frames_{};
  uint64_t cache_hits_ = 0, cache_misses_ = 0, conversions_waiting_ = 0;
  std::array<uint64_t, static_cast<size_t>(ConversionOutcome::kCount)> conversions_{};
  std::map<std::string, uint64_t> uploads_, forwards_;
};

}  // namespace gsymprof
