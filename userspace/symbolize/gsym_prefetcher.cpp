#include "userspace/symbolize/gsym_prefetcher.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "userspace/base/text_escape.h"

namespace gsymprof {

struct GsymPrefetcher::State {
  struct Item {
    BuildId build_id;
    std::string local_elf_path, module_path;
  };

  explicit State(GsymLocator& l) : locator(l) {}
  ProgressFn progress;

  GsymLocator& locator;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Item> queue;
  std::set<BuildId> added;
  std::string in_flight;  // module path being located ("" = none)
  bool stopping = false, finished = false;
  std::atomic<pid_t> worker_tid{0};
  PrefetchStats stats;
  std::thread worker;

  void run() {
    // Signals that end gsymprof are handled by the main thread, which then
    // removes temporary files (file_io.h) while this one stays out of its way.
    sigset_t ending;
    sigemptyset(&ending);
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) sigaddset(&ending, signal);
    pthread_sigmask(SIG_BLOCK, &ending, nullptr);
    worker_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    // Idle priority: only CPU time nothing else wants. Best effort: a failure
    // leaves the worker at normal priority, still single-threaded.
    struct sched_param idle {};
    (void)::sched_setscheduler(0, SCHED_IDLE, &idle);
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left to drain
      Item item = std::move(queue.front());
      queue.pop_front();
      in_flight = item.module_path;
      lock.unlock();
      ModuleReport report;
      report.path = item.module_path;
      (void)locator.locate(item.build_id, item.local_elf_path, report);
      lock.lock();
      in_flight.clear();
      ++stats.located;
      wake.notify_all();
    }
  }
};

GsymPrefetcher::GsymPrefetcher(GsymLocator& locator, ProgressFn progress)
    : state_(std::make_unique<State>(locator)) {
  state_->progress = std::move(progress);
  state_->locator.set_conversion_threads(1);
  state_->worker = std::thread([s = state_.get()] { s->run(); });
}

GsymPrefetcher::~GsymPrefetcher() { finish(); }

void GsymPrefetcher::add(const BuildId& build_id, std::string local_elf_path, std::string module_path) {
  if (build_id.empty()) return;
  std::lock_guard lock(state_->mutex);
  if (state_->stopping || !state_->added.insert(build_id).second) return;
  state_->queue.push_back({build_id, std::move(local_elf_path), std::move(module_path)});
  state_->wake.notify_all();
}

PrefetchStats GsymPrefetcher::finish(bool drain_queue) {
  State& s = *state_;
  if (s.finished) return s.stats;
  const auto start = std::chrono::steady_clock::now();
  std::string waiting_for;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    if (!drain_queue) {
      s.stats.dropped = s.queue.size();
      s.queue.clear();
    }
    waiting_for = !s.queue.empty() ? s.queue.back().module_path : s.in_flight;
    s.wake.notify_all();
  }
  // The output waits for it now: full speed.
  if (pid_t tid = s.worker_tid.load(); tid > 0) {
    struct sched_param normal {};
    (void)::sched_setscheduler(tid, SCHED_OTHER, &normal);
  }
  const bool shown = !waiting_for.empty() && s.progress;
  if (shown) s.progress("finishing the symbol conversion of " + waiting_for + "...");
  s.worker.join();
  if (shown) s.progress("");
  s.locator.set_conversion_threads(0);
  s.stats.finish_wait_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.finished = true;
  return s.stats;
}

}  // namespace gsymprof
