#include "userspace/serve/serve_metrics.h"

#include <cstdio>

#include "userspace/export/agent_metrics.h"

namespace gsymprof {
namespace {

std::string label(const char* key, const std::string& value) {
  return std::string(key) + "=\"" + prometheus_label_value(value) + "\"";
}

std::string decimal(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

const char* to_string(FrameOutcome outcome) {
  switch (outcome) {
    case FrameOutcome::Named: return "named";
    case FrameOutcome::AlreadyNamed: return "already_named";
    case FrameOutcome::NoMapping: return "no_mapping";
    case FrameOutcome::NoBuildId: return "no_build_id";
    case FrameOutcome::NoSymbols: return "no_symbols";
    case FrameOutcome::PendingConversion: return "pending_conversion";
    case FrameOutcome::ConversionFailed: return "conversion_failed";
    case FrameOutcome::QueueFull: return "queue_full";
    case FrameOutcome::OutsideMapping: return "outside_mapping";
    case FrameOutcome::NoFunction: return "no_function";
    case FrameOutcome::LookupError: return "lookup_error";
    case FrameOutcome::Deadline: return "deadline";
    case FrameOutcome::kCount: break;
  }
  return "unknown";
}

void ServeMetrics::add_request(const std::string& path, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{path, status}];
  Latency& latency = latency_[path];
  ++latency.count;
  latency.sum += seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) {
      ++latency.buckets[i];
      break;
    }
}

void ServeMetrics::add_frames(const FrameCounts& counts) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < counts.size(); ++i) frames_[i] += counts[i];
}

void ServeMetrics::add_cache(bool hit) {
  std::lock_guard lock(mutex_);
  ++(hit ? cache_hits_ : cache_misses_);
}

void ServeMetrics::add_conversion(ConversionOutcome outcome) {
  std::lock_guard lock(mutex_);
  ++conversions_[static_cast<size_t>(outcome)];
}

void ServeMetrics::set_conversions_waiting(uint64_t waiting) {
  std::lock_guard lock(mutex_);
  conversions_waiting_ = waiting;
}

void ServeMetrics::add_upload(const std::string& outcome) {
  std::lock_guard lock(mutex_);
  ++uploads_[outcome];
}

void ServeMetrics::add_forward(const std::string& outcome) {
  std::lock_guard lock(mutex_);
  ++forwards_[outcome];
}

std::string ServeMetrics::prometheus_text() const {
  std::lock_guard lock(mutex_);
  std::string out;
  prometheus_metric(out, "gsymprof_serve_requests_total", "counter", "Requests by path and HTTP status (gRPC: 200 or 500).");
  for (const auto& [key, count] : requests_)
    prometheus_sample(out, "gsymprof_serve_requests_total",
                      label("path", key.first) + "," + label("code", std::to_string(key.second)), std::to_string(count));
  prometheus_metric(out, "gsymprof_serve_request_seconds", "histogram", "Time to answer a request, by path.");
  for (const auto& [path, latency] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += latency.buckets[i];
      prometheus_sample(out, "gsymprof_serve_request_seconds_bucket",
                        label("path", path) + "," + label("le", decimal(kBuckets[i])), std::to_string(cumulative));
    }
    prometheus_sample(out, "gsymprof_serve_request_seconds_bucket", label("path", path) + ",le=\"+Inf\"",
                      std::to_string(latency.count));
    prometheus_sample(out, "gsymprof_serve_request_seconds_sum", label("path", path), decimal(latency.sum));
    prometheus_sample(out, "gsymprof_serve_request_seconds_count", label("path", path), std::to_string(latency.count));
  }
  prometheus_metric(out, "gsymprof_serve_frames_total", "counter",
                    "Locations of the profiles received, by outcome: named, or why not.");
  for (size_t i = 0; i < frames_.size(); ++i)
    prometheus_sample(out, "gsymprof_serve_frames_total", label("outcome", to_string(static_cast<FrameOutcome>(i))),
                      std::to_string(frames_[i]));
  prometheus_metric(out, "gsymprof_serve_gsym_cache_total", "counter", "Build IDs looked up among the open GSYMs: hit or miss.");
  prometheus_sample(out, "gsymprof_serve_gsym_cache_total", "outcome=\"hit\"", std::to_string(cache_hits_));
  prometheus_sample(out, "gsymprof_serve_gsym_cache_total", "outcome=\"miss\"", std::to_string(cache_misses_));
  prometheus_metric(out, "gsymprof_serve_conversions_total", "counter", "Debug files converted to GSYM, by outcome.");
  prometheus_sample(out, "gsymprof_serve_conversions_total", "outcome=\"converted\"",
                    std::to_string(conversions_[static_cast<size_t>(ConversionOutcome::Converted)]));
  prometheus_sample(out, "gsymprof_serve_conversions_total", "outcome=\"failed\"",
                    std::to_string(conversions_[static_cast<size_t>(ConversionOutcome::Failed)]));
  prometheus_metric(out, "gsymprof_serve_conversions_waiting", "gauge", "Build IDs queued or being converted.");
  prometheus_sample(out, "gsymprof_serve_conversions_waiting", "", std::to_string(conversions_waiting_));
  prometheus_metric(out, "gsymprof_serve_uploads_total", "counter", "Uploads by outcome.");
  for (const auto& [outcome, count] : uploads_)
    prometheus_sample(out, "gsymprof_serve_uploads_total", label("outcome", outcome), std::to_string(count));
  prometheus_metric(out, "gsymprof_serve_forwards_total", "counter", "OTLP requests passed on to --forward, by outcome.");
  for (const auto& [outcome, count] : forwards_)
    prometheus_sample(out, "gsymprof_serve_forwards_total", label("outcome", outcome), std::to_string(count));
  append_own_usage(out, "service");
  return out;
}

}  // namespace gsymprof
