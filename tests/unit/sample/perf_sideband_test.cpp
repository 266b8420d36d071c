// Tests for userspace/sample/perf_sideband: records as the kernel lays them
// out decode into side-band events (paths, deleted files, anonymous code,
// the vDSO, threads ignored); the target set follows forks and forgets a
// reused pid, but not a pid made a target after its fork; and the live
// rings, on this kernel, report a child's fork, exec, executable mappings
// (with the file's device and inode) and exit, in time order.
#include <doctest/doctest.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "userspace/perf_data/perf_data_format.h"
#include "userspace/perf_data/perf_data_reader.h"
#include "userspace/sample/perf_sideband.h"
#include "userspace/sample/sampler.h"

using namespace gsymprof;

namespace {

PerfEventAttr sideband_attr() {
  PerfEventAttr attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.flags = perf_data::kAttrFlagSampleIdAll;
  return attr;
}

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// An MMAP2 record's body (after its header) with the sample_id trailer.
std::vector<uint8_t> mmap2_body(uint32_t pid, uint64_t addr, uint64_t len, uint64_t pgoff,
                                uint32_t maj, uint32_t min, uint64_t ino, uint32_t prot,
                                uint32_t flags, const std::string& name, uint64_t time) {
  std::vector<uint8_t> body;
  put(body, pid), put(body, pid);
  put(body, addr), put(body, len), put(body, pgoff);
  put(body, maj), put(body, min), put(body, ino), put<uint64_t>(body, 0);  // ino_generation
  put(body, prot), put(body, flags);
  std::string padded = name;
  padded.resize((name.size() + 8) / 8 * 8, '\0');
  body.insert(body.end(), padded.begin(), padded.end());
  put(body, pid), put(body, pid), put(body, time);
  return body;
}

SidebandEvent decode(uint32_t type, uint16_t misc, const std::vector<uint8_t>& body, bool* is_event) {
  PerfRecord record;
  REQUIRE(decode_perf_record(sideband_attr(), type, misc, body, 0, record));
  SidebandEvent event;
  *is_event = sideband_event_from_record(record, event);
  return event;
}

}  // namespace

TEST_CASE("perf side-band: MMAP2 records become mappings with their file, prot and time") {
  bool ok = false;
  SidebandEvent e = decode(PERF_RECORD_MMAP2, 0,
                           mmap2_body(42, 0x7f0000001000, 0x5000, 0x1000, 8, 1, 1234, 5, 2,
                                      "/usr/lib/libc.so.6", 777),
                           &ok);
  REQUIRE(ok);
  CHECK(e.kind == SidebandEvent::Kind::Mapping);
  CHECK(e.time_ns == 777);
  CHECK(e.mapping.pid == 42);
  CHECK(e.mapping.start == 0x7f0000001000);
  CHECK(e.mapping.end == 0x7f0000006000);
  CHECK(e.mapping.file_offset == 0x1000);
  CHECK(e.mapping.dev_major == 8);
  CHECK(e.mapping.dev_minor == 1);
  CHECK(e.mapping.inode == 1234);
  CHECK(e.mapping.readable);
  CHECK_FALSE(e.mapping.writable);
  CHECK_FALSE(e.mapping.shared);
  CHECK(e.path == "/usr/lib/libc.so.6");
  CHECK(e.mapping.path_complete);
  CHECK_FALSE(e.mapping.deleted);

  // A deleted file: the suffix goes, the path no longer names it.
  e = decode(PERF_RECORD_MMAP2, 0,
             mmap2_body(42, 0x1000, 0x1000, 0, 8, 1, 99, 5, 2, "/tmp/jit.so (deleted)", 1), &ok);
  REQUIRE(ok);
  CHECK(e.path == "/tmp/jit.so");
  CHECK(e.mapping.deleted);
  CHECK_FALSE(e.mapping.path_complete);

  // Anonymous code (JIT) and the vDSO carry no file.
  e = decode(PERF_RECORD_MMAP2, 0, mmap2_body(42, 0x1000, 0x1000, 0, 0, 0, 0, 7, 0x22, "//anon", 1), &ok);
  REQUIRE(ok);
  CHECK(e.mapping.inode == 0);
  CHECK(e.path.empty());
  CHECK(e.mapping.writable);
  e = decode(PERF_RECORD_MMAP2, 0, mmap2_body(42, 0x1000, 0x2000, 0, 0, 0, 0, 5, 2, "[vdso]", 1), &ok);
  REQUIRE(ok);
  CHECK(e.mapping.vdso);
  CHECK(e.mapping.inode == 0);

  // Data mappings are not side-band events.
  decode(PERF_RECORD_MMAP2, 0, mmap2_body(42, 0x1000, 0x1000, 0, 8, 1, 5, 3, 2, "/data", 1), &ok);
  CHECK_FALSE(ok);
}

TEST_CASE("perf side-band: exec, process forks and exits; threads and renames are ignored") {
  auto task = [](uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid) {
    std::vector<uint8_t> body;
    put(body, pid), put(body, ppid), put(body, tid), put(body, ptid), put<uint64_t>(body, 5);
    put(body, pid), put(body, tid), put<uint64_t>(body, 9);
    return body;
  };
  bool ok = false;
  SidebandEvent e = decode(PERF_RECORD_FORK, 0, task(20, 10, 20, 10), &ok);
  REQUIRE(ok);
  CHECK(e.kind == SidebandEvent::Kind::Fork);
  CHECK(e.pid == 10);
  CHECK(e.child == 20);
  CHECK(e.time_ns == 9);  // the trailer's time
  decode(PERF_RECORD_FORK, 0, task(10, 10, 21, 10), &ok);  // a new thread of 10
  CHECK_FALSE(ok);
  e = decode(PERF_RECORD_EXIT, 0, task(20, 10, 20, 10), &ok);
  REQUIRE(ok);
  CHECK(e.kind == SidebandEvent::Kind::Exit);
  decode(PERF_RECORD_EXIT, 0, task(10, 10, 21, 21), &ok);  // a thread ended
  CHECK_FALSE(ok);

  auto comm = [](uint32_t pid, uint32_t tid) {
    std::vector<uint8_t> body;
    put(body, pid), put(body, tid);
    const char name[8] = "true";
    body.insert(body.end(), name, name + 8);
    put(body, pid), put(body, tid), put<uint64_t>(body, 3);
    return body;
  };
  e = decode(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, comm(20, 20), &ok);
  REQUIRE(ok);
  CHECK(e.kind == SidebandEvent::Kind::Exec);
  CHECK(e.pid == 20);
  decode(PERF_RECORD_COMM, 0, comm(20, 20), &ok);  // prctl(PR_SET_NAME)
  CHECK_FALSE(ok);
}

TEST_CASE("perf side-band: targets follow forks; a reused pid is dropped unless added later") {
  SidebandTargets targets(/*filter=*/true, /*follow_forks=*/true);
  targets.add(100, 50);
  SidebandEvent fork;
  fork.kind = SidebandEvent::Kind::Fork;
  fork.pid = 100, fork.child = 101, fork.time_ns = 60;
  CHECK(targets.accept(fork));
  SidebandEvent mapping;
  mapping.kind = SidebandEvent::Kind::Mapping;
  mapping.pid = 101, mapping.time_ns = 61;
  CHECK(targets.accept(mapping));
  // 101 exits; another process (not a target) forks a new 101.
  fork.pid = 7, fork.child = 101, fork.time_ns = 70;
  CHECK_FALSE(targets.accept(fork));
  mapping.time_ns = 71;
  CHECK_FALSE(targets.accept(mapping));
  // gsymprof's own held child: made a target after the fork record's time.
  targets.add(300, 90);
  fork.pid = 1, fork.child = 300, fork.time_ns = 80;
  CHECK_FALSE(targets.accept(fork));
  mapping.pid = 300, mapping.time_ns = 95;
  CHECK(targets.accept(mapping));

  SidebandTargets everything(/*filter=*/false, true);
  CHECK(everything.accept(mapping));
}

namespace {

class RecordingSink : public EventSink {
 public:
  std::vector<std::string> events;
  std::vector<RawMapping> mappings;
  std::vector<std::string> paths;
  void on_sample(const RawSample&) override {}
  void on_stack_copy(const RawStackCopy&) override {}
  void on_short_waits(const RawShortWaits&) override {}
  void on_exec(uint32_t pid, uint64_t) override { events.push_back("exec " + std::to_string(pid)); }
  void on_mapping(const RawMapping& m) override {
    events.push_back("map " + std::to_string(m.pid) + " " + std::string(m.path));
    mappings.push_back(m);
    paths.emplace_back(m.path);
  }
  void on_fork(uint32_t parent, uint32_t child, uint64_t) override {
    events.push_back("fork " + std::to_string(parent) + " " + std::to_string(child));
  }
  void on_exit(uint32_t pid) override { events.push_back("exit " + std::to_string(pid)); }
  void on_lost(std::string_view, uint64_t) override {}
};

}  // namespace

TEST_CASE("perf side-band: the live rings report a child's fork, exec, mappings and exit") {
  auto sideband = PerfSideband::open(std::vector<int>{0, 1}, 16);
  if (!sideband) {
    MESSAGE("skipped: " << sideband.error().message << " (needs root)");
    return;
  }
  const char* program = "/usr/bin/true";
  struct stat st {};
  REQUIRE(::stat(program, &st) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    execl(program, program, (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  SidebandTargets targets(true, true);
  targets.add(static_cast<uint32_t>(getpid()), 0);
  RecordingSink sink;
  (*sideband)->read();
  (*sideband)->deliver_until(UINT64_MAX, targets, sink);
  const std::string pid = std::to_string(child);
  std::vector<std::string> mine;
  for (const std::string& e : sink.events)
    if (e.find(" " + pid) != std::string::npos) mine.push_back(e);
  REQUIRE(mine.size() >= 4);
  CHECK(mine.front() == "fork " + std::to_string(getpid()) + " " + pid);
  CHECK(mine[1] == "exec " + pid);
  CHECK(mine.back() == "exit " + pid);
  bool program_mapped = false;
  for (size_t i = 0; i < sink.mappings.size(); ++i) {
    const RawMapping& m = sink.mappings[i];
    if (m.pid != static_cast<uint32_t>(child) || sink.paths[i] != program) continue;
    program_mapped = true;
    CHECK(m.inode == st.st_ino);
    CHECK(makedev(m.dev_major, m.dev_minor) == st.st_dev);
    CHECK(m.path_complete);
    CHECK(m.time_ns > 0);
  }
  CHECK(program_mapped);
  CHECK((*sideband)->lost() == 0);
}
