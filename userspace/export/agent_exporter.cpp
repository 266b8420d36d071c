#include "userspace/export/agent_exporter.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "userspace/output/pprof_output.h"

namespace gsymprof {

AgentExporter::AgentExporter(AgentExporterOptions options, GsymLocator locator,
                             std::vector<std::unique_ptr<WindowSink>> sinks, AgentMetrics& metrics)
    : options_(std::move(options)), locator_(std::move(locator)), sinks_(std::move(sinks)), metrics_(metrics) {
  thread_ = std::thread([this] { run(); });
  if (options_.make_pull_locator) pull_thread_ = std::thread([this] { run_pulls(); });
}

void AgentExporter::pull_ready_locked(std::unique_ptr<Pull> pull) {
  if (options_.make_pull_locator) {
    ready_pulls_.push_back(std::move(pull));
    pull_wake_.notify_one();
    return;
  }
  // A client waits for it, with a deadline (go tool pprof: 1.5 times the
  // seconds asked): served before the windows queued.
  jobs_.push_front({Capture{}, std::move(pull)});
  wake_.notify_one();
}

AgentExporter::~AgentExporter() { finish(); }

void AgentExporter::enqueue_window_locked() {
  if (window_.stacks.empty() && window_.samples == 0 && window_.duration_ns == 0) return;
  if (jobs_.size() >= options_.max_queued) {
    // The export thread fell behind (a slow backend, a big conversion):
    // the oldest window goes, counted for every sink.
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (!it->pull) {
        jobs_.erase(it);
        for (const auto& sink : sinks_) metrics_.add_window(sink->name(), WindowOutcome::Dropped);
        break;
      }
  }
  jobs_.push_back({std::exchange(window_, Capture{}), nullptr});
  wake_.notify_one();
}

void AgentExporter::on_tick(Capture&& tick) {
  metrics_.add_tick(tick);
  std::lock_guard lock(mutex_);
  const double tick_s = static_cast<double>(tick.duration_ns) / 1e9;
  for (auto it = pulls_.begin(); it != pulls_.end();) {
    merge_capture((*it)->capture, tick);
    (*it)->remaining_s -= tick_s;
    if ((*it)->remaining_s <= 1e-3) {
      pull_ready_locked(std::move(*it));
      it = pulls_.erase(it);
    } else {
      ++it;
    }
  }
  merge_capture(window_, std::move(tick));
  if (static_cast<double>(window_.duration_ns) / 1e9 >= options_.window_s - 1e-3) enqueue_window_locked();
}

gsym::Expected<std::future<gsym::Expected<std::string>>> AgentExporter::pull(double seconds) {
  if (!(seconds >= 1 && seconds <= options_.max_pull_s))
    return gsym::Error("seconds must be from 1 to " + std::to_string(static_cast<int>(options_.max_pull_s)));
  std::lock_guard lock(mutex_);
  if (stopping_) return gsym::Error("the agent is stopping");
  if (pulls_.size() >= options_.max_pulls)
    return gsym::Error("already collecting " + std::to_string(pulls_.size()) + " profiles: try again later");
  auto pull = std::make_unique<Pull>();
  pull->remaining_s = seconds;
  auto future = pull->promise.get_future();
  pulls_.push_back(std::move(pull));
  return future;
}

void AgentExporter::finish() {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      enqueue_window_locked();
      // Profiles still collecting get what there is.
      for (auto& pull : pulls_) pull_ready_locked(std::move(pull));
      pulls_.clear();
      stopping_ = true;
    }
    wake_.notify_one();
    pull_wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  if (pull_thread_.joinable()) pull_thread_.join();
}

void AgentExporter::serve_pull(Pull& pull, GsymLocator& locator) {
  auto profile = pprof_profile(pull.capture, locator, options_.symbolize);
  metrics_.add_pull(profile.ok());
  if (profile) pull.promise.set_value(std::move(profile->gzipped));
  else pull.promise.set_value(profile.error());
}

void AgentExporter::run_pulls() {
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);  // as the export thread
  for (;;) {
    std::unique_ptr<Pull> pull;
    {
      std::unique_lock lock(mutex_);
      pull_wake_.wait(lock, [this] { return !ready_pulls_.empty() || stopping_; });
      if (ready_pulls_.empty()) return;  // stopping, all answered
      pull = std::move(ready_pulls_.front());
      ready_pulls_.pop_front();
    }
    GsymLocator locator = options_.make_pull_locator();
    serve_pull(*pull, locator);
  }
}

void AgentExporter::run() {
  // Symbolizing (and converting a module's debug info on a GSYM miss) is
  // the agent's heaviest work: below the profiled programs' priority.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      if (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return !jobs_.empty() || stopping_; })) {
        lock.unlock();
        for (const auto& sink : sinks_) sink->idle(metrics_);
        continue;
      }
      if (jobs_.empty()) return;  // stopping, all delivered
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.pull) {
      serve_pull(*job.pull, locator_);
      continue;
    }
    for (const auto& sink : sinks_) sink->deliver(job.capture, locator_, options_.symbolize, metrics_);
    metrics_.set_locator_bytes(locator_.reader_memory_bytes());
    if (options_.make_locator && (++windows_since_locator_ >= options_.windows_per_locator ||
                                  locator_.reader_memory_bytes() > options_.max_locator_bytes)) {
      locator_ = options_.make_locator();
      windows_since_locator_ = 0;
    } else {
      // The GSYMs stay mapped for the next window, not resident: between
      // windows they were most of the agent's RSS (26 MB of 113 MB on a
      // host compiling C++).
      locator_.release_pages();
    }
    // Symbolizing a window (and converting a module) frees what it
    // allocated; hand it back so the agent's memory stays flat.
    ::malloc_trim(0);
  }
}

}  // namespace gsymprof
