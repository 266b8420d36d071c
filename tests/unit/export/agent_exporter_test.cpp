// The agent's export side (userspace/export/agent_exporter.h): a pull, whose
// client waits with a deadline, is not held up by a window's export in
// progress (a big conversion, a slow backend) when it has its own thread.
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include <doctest/doctest.h>
#include "userspace/export/agent_exporter.h"

using namespace gsymprof;
using namespace std::chrono_literals;

namespace {

// A sink whose deliver() blocks until released: the export thread stays busy.
class BlockingSink final : public WindowSink {
 public:
  const char* name() const override { return "blocking"; }
  void deliver(const Capture&, GsymLocator&, const SymbolizeOptions&, AgentMetrics&) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
  }
  bool wait_entered() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [this] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false, released_ = false;
};

Capture one_second() {
  Capture tick;
  tick.duration_ns = 1'000'000'000;
  tick.frequency_hz = 19;
  return tick;
}

struct Exporter {
  AgentMetrics metrics;
  BlockingSink* sink = nullptr;
  std::unique_ptr<AgentExporter> exporter;
  explicit Exporter(bool pull_thread) {
    AgentExporterOptions options;
    options.window_s = 1;
    if (pull_thread) options.make_pull_locator = [] { return GsymLocator(LocatorOptions{}); };
    auto blocking = std::make_unique<BlockingSink>();
    sink = blocking.get();
    std::vector<std::unique_ptr<WindowSink>> sinks;
    sinks.push_back(std::move(blocking));
    exporter = std::make_unique<AgentExporter>(options, GsymLocator(LocatorOptions{}), std::move(sinks), metrics);
  }
};

}  // namespace

TEST_CASE("agent exporter: a pull is answered while a window's export is in progress") {
  Exporter agent(/*pull_thread=*/true);
  agent.exporter->on_tick(one_second());  // a whole window: its export blocks
  REQUIRE(agent.sink->wait_entered());
  auto pulled = agent.exporter->pull(1);
  REQUIRE(pulled);
  agent.exporter->on_tick(one_second());
  REQUIRE(pulled->wait_for(10s) == std::future_status::ready);
  gsym::Expected<std::string> profile = pulled->get();
  REQUIRE(profile);
  CHECK(profile->size() > 2);
  CHECK(static_cast<unsigned char>((*profile)[0]) == 0x1f);  // gzip
  agent.sink->release();
  agent.exporter->finish();
}

TEST_CASE("agent exporter: without a pull thread, a pull waits for the export thread") {
  Exporter agent(/*pull_thread=*/false);
  agent.exporter->on_tick(one_second());
  REQUIRE(agent.sink->wait_entered());
  auto pulled = agent.exporter->pull(1);
  REQUIRE(pulled);
  agent.exporter->on_tick(one_second());
  CHECK(pulled->wait_for(300ms) == std::future_status::timeout);
  agent.sink->release();
  REQUIRE(pulled->wait_for(10s) == std::future_status::ready);
  CHECK(pulled->get());
  agent.exporter->finish();
}

TEST_CASE("agent exporter: pulls still collecting at the end get what there is") {
  Exporter agent(/*pull_thread=*/true);
  agent.sink->release();
  auto pulled = agent.exporter->pull(5);
  REQUIRE(pulled);
  agent.exporter->on_tick(one_second());
  agent.exporter->finish();
  REQUIRE(pulled->wait_for(10s) == std::future_status::ready);
  CHECK(pulled->get());
}
