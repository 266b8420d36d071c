// Test tool for tests/e2e/cfi_snapshot_unwind.sh (built by the Makefile as
// $(BUILD)/test-tools/cfi_snapshot_tool).
//
//   cfi_snapshot_tool capture --count N --interval-ms MS --stack-bytes B --out DIR -- PROG ARGS...
//     Runs PROG under ptrace and, every MS milliseconds after a warm-up, stops
//     it, reads IP/SP/BP and the top B bytes of its stack (as the BPF program
//     does: from SP up, never past the end of [stack]), records its executable
//     modules (path, build ID, load bias) and writes DIR/NNNN.snap.
//   cfi_snapshot_tool replay [--max-frames N] SNAPSHOT...
//     Reads each snapshot, unwinds it with the CFI unwinder and prints
//     "<stop reason>\t<frames root first, ';'-separated>" (symbol-table names).
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/recorded_snapshot.h"
#include "tests/support/snapshot_support.h"
#include "userspace/unwind/cfi_unwinder.h"

namespace {

int usage() {
  std::fputs(
      "usage: cfi_snapshot_tool capture --count N --interval-ms MS --stack-bytes B --out DIR -- PROG ARGS...\n"
      "       cfi_snapshot_tool replay [--max-frames N] SNAPSHOT...\n",
      stderr);
  return 2;
}

bool take_snapshot(pid_t pid, size_t stack_bytes, gsymprof::RecordedSnapshot& out, std::string& error) {
  user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) {
    error = "PTRACE_GETREGS failed";
    return false;
  }
  std::string pid_text = std::to_string(pid);
  auto stack = snapshot_support::find_mapping(pid_text, "[stack]");
  if (!stack || regs.rsp < stack->first || regs.rsp >= stack->second) {
    error = "SP outside [stack]";
    return false;
  }
  size_t size = std::min<uint64_t>(stack_bytes, stack->second - regs.rsp);
  out.snapshot.regs = {regs.rip, regs.rsp, regs.rbp};
  out.snapshot.stack_start = regs.rsp;
  out.snapshot.stack.resize(size);
  iovec local{out.snapshot.stack.data(), size};
  iovec remote{reinterpret_cast<void*>(regs.rsp), size};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(size)) {
    error = "process_vm_readv of the stack failed";
    return false;
  }
  return snapshot_support::add_process_modules(pid_text, out, error);
}

// utime + stime of `pid` in clock ticks (fields 14 and 15 of /proc/PID/stat).
long cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  size_t comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) return 0;
  std::istringstream fields(stat.substr(comm_end + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atol(field.c_str());
    if (i == 15) stime = std::atol(field.c_str());
  }
  return utime + stime;
}

int capture(int argc, char** argv) {
  int count = 0, interval_ms = 0;
  size_t stack_bytes = 0;
  std::string out_dir;
  int i = 0;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (i + 1 >= argc) return usage();
    if (arg == "--count") count = std::atoi(argv[++i]);
    else if (arg == "--interval-ms") interval_ms = std::atoi(argv[++i]);
    else if (arg == "--stack-bytes") stack_bytes = std::strtoull(argv[++i], nullptr, 0);
    else if (arg == "--out") out_dir = argv[++i];
    else return usage();
  }
  if (i + 1 >= argc || count <= 0 || interval_ms <= 0 || stack_bytes == 0 || out_dir.empty()) return usage();
  char** command = argv + i + 1;

  pid_t pid = fork();
  if (pid == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    execvp(command[0], command);
    std::perror(command[0]);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {  // stopped at exec
    std::fprintf(stderr, "cfi_snapshot_tool: %s did not start\n", command[0]);
    return 1;
  }
  ptrace(PTRACE_SETOPTIONS, pid, nullptr, PTRACE_O_EXITKILL);
  ptrace(PTRACE_CONT, pid, nullptr, nullptr);
  // Past start-up (dynamic loader, lazy binding): wait for 100 ms of the
  // child's own CPU time, not wall time, so a loaded machine changes nothing.
  for (int waited = 0; cpu_ticks(pid) < 10; ++waited) {
    if (waited > 3000) {
      std::fprintf(stderr, "cfi_snapshot_tool: %s does not run\n", command[0]);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  int written = 0, failed = 0;
  while (written < count && failed < count) {
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    kill(pid, SIGSTOP);
    // Wait for the signal-delivery stop of our SIGSTOP (passing on others).
    for (;;) {
      if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
        std::fprintf(stderr, "cfi_snapshot_tool: %s exited during capture\n", command[0]);
        return 1;
      }
      if (WSTOPSIG(status) == SIGSTOP) break;
      ptrace(PTRACE_CONT, pid, nullptr, WSTOPSIG(status));
    }
    gsymprof::RecordedSnapshot snapshot;
    std::string error;
    if (take_snapshot(pid, stack_bytes, snapshot, error)) {
      char name[32];
      std::snprintf(name, sizeof name, "/%04d.snap", written++);
      gsym::Status status_written = gsymprof::write_snapshot_file(out_dir + name, snapshot);
      if (!status_written.ok()) {
        std::fprintf(stderr, "cfi_snapshot_tool: %s\n", status_written.error().message.c_str());
        return 1;
      }
    } else {
      ++failed;
      std::fprintf(stderr, "cfi_snapshot_tool: snapshot skipped: %s\n", error.c_str());
    }
    ptrace(PTRACE_CONT, pid, nullptr, nullptr);  // suppress the SIGSTOP
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return written == count ? 0 : 1;
}

int replay(int argc, char** argv) {
  gsymprof::UnwindOptions options;
  int i = 0;
  if (argc >= 2 && std::string(argv[0]) == "--max-frames") {
    options.max_frames = std::strtoul(argv[1], nullptr, 10);
    i = 2;
  }
  if (i >= argc) return usage();
  gsymprof::CfiUnwinder unwinder(options);
  for (; i < argc; ++i) {
    auto snapshot = gsymprof::read_snapshot_file(argv[i]);
    if (!snapshot) {
      std::fprintf(stderr, "cfi_snapshot_tool: %s\n", snapshot.error().message.c_str());
      return 1;
    }
    gsymprof::UnwindResult result = unwinder.unwind(snapshot->snapshot.view(), snapshot->finder());
    std::vector<std::string> names = snapshot_support::Namer(*snapshot).names(result.ips);
    std::reverse(names.begin(), names.end());
    std::printf("%s\t%s\n", gsymprof::to_string(result.stop), snapshot_support::join(names).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string command = argv[1];
  if (command == "capture") return capture(argc - 2, argv + 2);
  if (command == "replay") return replay(argc - 2, argv + 2);
  return usage();
}
