#include "userspace/export/agent_metrics.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "userspace/base/pseudo_file.h"
#include "userspace/base/text_fields.h"

namespace gsymprof {
namespace {

std::string number(uint64_t value) { return std::to_string(value); }

}  // namespace

// CPU seconds (utime + stime) and resident bytes of this process, from
// /proc/self/stat (fields 14, 15 and 24 after the command's ')').
void append_own_usage(std::string& out, const char* who) {
  double cpu_seconds = 0;
  uint64_t rss_bytes = 0;
  auto stat = read_pseudo_file("/proc/self/stat", 4096);
  const size_t paren = stat ? stat->rfind(')') : std::string::npos;
  if (paren != std::string::npos) {
    std::istringstream fields(stat->substr(paren + 1));
    std::string field;
    uint64_t utime = 0, stime = 0, rss_pages = 0;
    // After ')': state is field 3; utime 14, stime 15, rss 24.
    for (int n = 3; n <= 24 && fields >> field; ++n) {
      if (n == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
      if (n == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
      if (n == 24) rss_pages = std::strtoull(field.c_str(), nullptr, 10);
    }
    const long ticks = ::sysconf(_SC_CLK_TCK), page = ::sysconf(_SC_PAGESIZE);
    if (ticks > 0) cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks);
    if (page > 0) rss_bytes = rss_pages * static_cast<uint64_t>(page);
  }
  const std::string cpu_help = std::string("The ") + who + "'s own user and system CPU time.";
  const std::string rss_help = std::string("The ") + who + "'s resident memory.";
  prometheus_metric(out, "gsymprof_process_cpu_seconds_total", "counter", cpu_help.c_str());
  prometheus_sample(out, "gsymprof_process_cpu_seconds_total", "", std::to_string(cpu_seconds));
  prometheus_metric(out, "gsymprof_process_resident_memory_bytes", "gauge", rss_help.c_str());
  prometheus_sample(out, "gsymprof_process_resident_memory_bytes", "", std::to_string(rss_bytes));
}

void prometheus_metric(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void prometheus_sample(std::string& out, const std::string& name, const std::string& labels, const std::string& value) {
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
}

std::string prometheus_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void AgentMetrics::add_tick(const Capture& tick) {
  std::lock_guard lock(mutex_);
  ++ticks_;
  samples_ += tick.samples;
  for (const auto& [reason, count] : tick.lost) lost_[reason] += count;
  for (const auto& [reason, count] : tick.truncations) truncated_[reason] += count;
  for (const CaptureStack& stack : tick.stacks) off_cpu_ns_ += stack.off_cpu_ns;
}

void AgentMetrics::add_window(const std::string& sink, WindowOutcome outcome, uint64_t count) {
  std::lock_guard lock(mutex_);
  windows_[sink][static_cast<size_t>(outcome)] += count;
}

void AgentMetrics::add_pull(bool served) {
  std::lock_guard lock(mutex_);
  (served ? pulls_served_ : pulls_failed_) += 1;
}

void AgentMetrics::set_spool_bytes(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  spool_bytes_ = bytes;
}

void AgentMetrics::set_locator_bytes(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  locator_bytes_ = bytes;
}

std::string AgentMetrics::prometheus_text() const {
  std::lock_guard lock(mutex_);
  std::string out;
  prometheus_metric(out, "gsymprof_ticks_total", "counter", "Ticks (of --tick seconds) sampled.");
  prometheus_sample(out, "gsymprof_ticks_total", "", number(ticks_));
  prometheus_metric(out, "gsymprof_samples_total", "counter", "Samples recorded (off-CPU: waits).");
  prometheus_sample(out, "gsymprof_samples_total", "", number(samples_));
  prometheus_metric(out, "gsymprof_off_cpu_seconds_total", "counter", "Time off the CPU recorded (--off-cpu, --wall).");
  prometheus_sample(out, "gsymprof_off_cpu_seconds_total", "", std::to_string(static_cast<double>(off_cpu_ns_) / 1e9));
  prometheus_metric(out, "gsymprof_samples_lost_total", "counter", "Samples lost, by reason.");
  for (const auto& [reason, count] : lost_)
    prometheus_sample(out, "gsymprof_samples_lost_total", "reason=\"" + prometheus_label_value(reason) + "\"", number(count));
  prometheus_metric(out, "gsymprof_stacks_truncated_total", "counter", "Samples kept with a stack the unwinder cut short, by reason.");
  for (const auto& [reason, count] : truncated_)
    prometheus_sample(out, "gsymprof_stacks_truncated_total", "reason=\"" + prometheus_label_value(reason) + "\"", number(count));
  prometheus_metric(out, "gsymprof_windows_total", "counter", "Profile windows by sink and outcome (exported, failed, dropped).");
  static constexpr const char* kOutcomes[] = {"exported", "failed", "dropped"};
  for (const auto& [sink, counts] : windows_)
    for (size_t i = 0; i < counts.size(); ++i)
      prometheus_sample(out, "gsymprof_windows_total",
             "sink=\"" + prometheus_label_value(sink) + "\",outcome=\"" + kOutcomes[i] + "\"", number(counts[i]));
  prometheus_metric(out, "gsymprof_pulls_total", "counter", "Profiles served to /debug/pprof/profile, by outcome.");
  prometheus_sample(out, "gsymprof_pulls_total", "outcome=\"served\"", number(pulls_served_));
  prometheus_sample(out, "gsymprof_pulls_total", "outcome=\"failed\"", number(pulls_failed_));
  prometheus_metric(out, "gsymprof_spool_bytes", "gauge", "Bytes of windows waiting in the spool directory.");
  prometheus_sample(out, "gsymprof_spool_bytes", "", number(spool_bytes_));
  prometheus_metric(out, "gsymprof_gsym_reader_bytes", "gauge",
                    "Heap bytes of the open GSYM readers' lookup indexes (a new set past 32 MiB).");
  prometheus_sample(out, "gsymprof_gsym_reader_bytes", "", number(locator_bytes_));
  append_own_usage(out, "agent");
  return out;
}

}  // namespace gsymprof
