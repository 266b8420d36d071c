// Unit tests of process_threads (sampling_events.h), which lists the threads
// that get a sampling event each under -p: this process's threads, listed
// while they exist; a process that is gone is NotFound.
#include <doctest/doctest.h>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "userspace/sample/sampling_events.h"

using gsymprof::process_threads;

TEST_CASE("process_threads lists every thread of a process, sorted") {
  const auto self = static_cast<uint32_t>(::getpid());
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<uint32_t> started_tids(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < started_tids.size(); ++i)
    threads.emplace_back([&, i] {
      started_tids[i] = static_cast<uint32_t>(::syscall(SYS_gettid));
      started.fetch_add(1);
      while (!stop.load()) std::this_thread::yield();
    });
  while (started.load() < 3) std::this_thread::yield();

  auto tids = process_threads(self);
  REQUIRE(tids);
  CHECK(std::is_sorted(tids->begin(), tids->end()));
  CHECK(std::count(tids->begin(), tids->end(), self) == 1);  // the main thread's id is the pid
  for (uint32_t tid : started_tids) CHECK(std::count(tids->begin(), tids->end(), tid) == 1);

  stop = true;
  for (auto& t : threads) t.join();
  auto after = process_threads(self);
  REQUIRE(after);
  for (uint32_t tid : started_tids) CHECK(std::count(after->begin(), after->end(), tid) == 0);
}

TEST_CASE("process_threads of a process that has exited is NotFound") {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  auto tids = process_threads(static_cast<uint32_t>(child));
  REQUIRE(!tids);
  CHECK(tids.error().code == gsym::ErrorCode::NotFound);
  CHECK(tids.error().message.find("/proc/" + std::to_string(child) + "/task") != std::string::npos);
}
