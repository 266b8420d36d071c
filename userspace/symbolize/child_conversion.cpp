#include "userspace/symbolize/child_conversion.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>

#include "gsym/base/file_io.h"

extern char** environ;

namespace gsymprof {
namespace {

using gsym::FileDescriptor;

// The child's descriptors (child_conversion.h).
constexpr int kChildElfFd = 3;
constexpr int kChildOutputFd = 4;
constexpr int kChildReportFd = 5;
constexpr int kChildDebugFileFd = 6;
constexpr std::string_view kProcSelfFd = "/proc/self/fd/";
// Far more than any report (a message and a path); a child that writes more
// is not believed.
constexpr size_t kMaxReportBytes = 1 << 20;

gsym::Error system_error(const std::string& what) {
  const int err = errno;
  return gsym::Error::from_errno(err, "conversion process: " + what + ": " + std::strerror(err));
}

// N when `path` is /proc/self/fd/N (a descriptor of ours), else -1.
int descriptor_named_by(const std::string& path) {
  if (!path.starts_with(kProcSelfFd)) return -1;
  int fd = -1;
  const char* begin = path.data() + kProcSelfFd.size();
  const char* end = path.data() + path.size();
  auto [at, error] = std::from_chars(begin, end, fd);
  return error == std::errc() && at == end && begin != end ? fd : -1;
}

void add_field(std::string& report, std::string_view name, std::string_view value) {
  report.append(name).append(" ").append(std::to_string(value.size())).append("\n");
  report.append(value).append("\n");
}

// The fields of a report, or nullopt when it does not parse.
std::optional<std::map<std::string, std::string>> parse_report(std::string_view text) {
  std::map<std::string, std::string> fields;
  while (!text.empty()) {
    const size_t space = text.find(' '), newline = text.find('\n');
    if (space == std::string_view::npos || newline == std::string_view::npos || space > newline) return std::nullopt;
    size_t size = 0;
    const char* digits = text.data() + space + 1;
    auto [at, error] = std::from_chars(digits, text.data() + newline, size);
    if (error != std::errc() || at != text.data() + newline) return std::nullopt;
    if (text.size() - newline - 1 < size + 1 || text[newline + 1 + size] != '\n') return std::nullopt;
    fields[std::string(text.substr(0, space))] = std::string(text.substr(newline + 1, size));
    text.remove_prefix(newline + 1 + size + 1);
  }
  return fields;
}

uint64_t number_or_zero(const std::map<std::string, std::string>& fields, const std::string& name) {
  auto it = fields.find(name);
  uint64_t value = 0;
  if (it != fields.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  return value;
}

// All of the memfd `fd` holds, at most `limit` bytes (more: an error).
gsym::Expected<std::vector<uint8_t>> read_whole(int fd, size_t limit, const char* what) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) return system_error(std::string("cannot stat its ") + what);
  if (static_cast<uint64_t>(status.st_size) > limit)
    return gsym::Error(std::string("conversion process: its ") + what + " is too large (" +
                       std::to_string(status.st_size) + " bytes)");
  std::vector<uint8_t> bytes(static_cast<size_t>(status.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return system_error(std::string("cannot read its ") + what);
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

std::vector<std::string> child_arguments(const gsym::ConvertOptions& options, bool debug_file_by_descriptor) {
  auto flag = [](const char* name, bool on) { return std::string(name) + (on ? "=1" : "=0"); };
  std::vector<std::string> args = {"gsymprof", kConversionChildCommand};
  args.push_back("--threads=" + std::to_string(options.threads));
  if (!options.debug_file.empty())
    args.push_back("--debug-file=" + (debug_file_by_descriptor ? std::string(kProcSelfFd) + std::to_string(kChildDebugFileFd)
                                                               : options.debug_file));
  for (const std::string& dir : options.debug_directories) args.push_back("--debug-dir=" + dir);
  args.push_back(flag("--search-debug-file", options.search_debug_file));
  if (!options.dwp_file.empty()) args.push_back("--dwp=" + options.dwp_file);
  args.push_back(flag("--inline-info", options.inline_info));
  args.push_back("--gsym-version=" + std::to_string(options.gsym_version));
  args.push_back(flag("--plt-names", options.plt_names));
  args.push_back(flag("--code-labels", options.code_labels));
  args.push_back(flag("--entry-name", options.entry_name));
  args.push_back(flag("--signal-frames", options.signal_frames));
  if (!options.known_as.empty()) args.push_back("--known-as=" + options.known_as);
  return args;
}

// Starts the child with the descriptors of child_conversion.h in place.
gsym::Expected<pid_t> spawn_child(const std::string& program, const std::vector<std::string>& args,
                                  const std::vector<std::pair<int, int>>& descriptors) {
  // Sources moved above the child's numbers first, so that no dup2 overwrites
  // a source still to be copied, and none is dup2'ed onto itself (which
  // would leave its close-on-exec flag set).
  std::vector<FileDescriptor> sources;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attributes);
  for (const auto& [from, to] : descriptors) {
    sources.emplace_back(::fcntl(from, F_DUPFD_CLOEXEC, 10));
    if (!sources.back().valid()) return system_error("cannot duplicate a descriptor");
    ::posix_spawn_file_actions_adddup2(&actions, sources.back().get(), to);
  }
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  // Whatever the calling thread blocks or ignores, the child starts clean.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  ::posix_spawnattr_setsigmask(&attributes, &none);
  ::posix_spawnattr_setsigdefault(&attributes, &all);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int failed = ::posix_spawn(&pid, program.c_str(), &actions, &attributes, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  if (failed != 0) {
    errno = failed;
    return system_error("cannot start " + program);
  }
  return pid;
}

// Waits for `pid` until `timeout`, then kills it. Its wait status, or why
// it has none.
gsym::Expected<int> wait_for_child(pid_t pid, std::chrono::milliseconds timeout) {
  FileDescriptor pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  bool timed_out = false;
  if (pidfd.valid()) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      pollfd ready{pidfd.get(), POLLIN, 0};
      const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
      if (polled > 0) break;
      if (polled < 0 && errno != EINTR) break;  // waitpid below then blocks: no worse than in process
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return system_error("cannot wait for it");
  }
  if (timed_out)
    return gsym::Error("conversion timed out after " +
                       (timeout.count() % 1000 == 0 ? std::to_string(timeout.count() / 1000) + " s"
                                                    : std::to_string(timeout.count()) + " ms") +
                       " (killed)");
  return status;
}

}  // namespace

// A GSYM is bounded by its input's size in practice; 4 GiB is beyond any.
constexpr size_t kMaxOutputBytes = size_t{4} << 30;

gsym::Expected<std::vector<uint8_t>> ChildGsym::read() const {
  return read_whole(fd.get(), kMaxOutputBytes, "output");
}

gsym::Expected<ChildGsym> convert_elf_in_child(int elf_fd, const gsym::ConvertOptions& options,
                                               gsym::ConvertStats* stats, const ChildConversionOptions& child) {
  FileDescriptor output(::memfd_create("gsym-output", MFD_CLOEXEC));
  FileDescriptor report(::memfd_create("gsym-report", MFD_CLOEXEC));
  if (!output.valid() || !report.valid()) return system_error("cannot create a memfd");
  std::vector<std::pair<int, int>> descriptors = {
      {elf_fd, kChildElfFd}, {output.get(), kChildOutputFd}, {report.get(), kChildReportFd}};
  const int debug_fd = descriptor_named_by(options.debug_file);
  if (debug_fd >= 0) descriptors.emplace_back(debug_fd, kChildDebugFileFd);
  gsym::Expected<pid_t> pid = spawn_child(child.program, child_arguments(options, debug_fd >= 0), descriptors);
  if (!pid) return pid.error();
  gsym::Expected<int> status = wait_for_child(*pid, child.timeout);
  if (!status) return status.error();
  const std::string name = options.known_as.empty() ? "input" : options.known_as;
  if (WIFSIGNALED(*status))
    return gsym::Error(name + ": conversion process killed by signal " + std::to_string(WTERMSIG(*status)) +
                       " (" + ::strsignal(WTERMSIG(*status)) + ")");
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
    return gsym::Error(name + ": conversion process exited with status " + std::to_string(WEXITSTATUS(*status)));

  gsym::Expected<std::vector<uint8_t>> report_bytes = read_whole(report.get(), kMaxReportBytes, "report");
  if (!report_bytes) return report_bytes.error();
  auto fields = parse_report(std::string_view(reinterpret_cast<const char*>(report_bytes->data()), report_bytes->size()));
  if (!fields) return gsym::Error(name + ": conversion process: its report does not parse");
  // Written whatever the outcome: a child without it did not convert.
  if (!fields->contains("compile-units")) return gsym::Error(name + ": conversion process: no report");
  if (stats) {
    stats->compile_units = number_or_zero(*fields, "compile-units");
    stats->inputs_writable_only_by_us = number_or_zero(*fields, "inputs-private") != 0;
    stats->debug_file_used = (*fields)["debug-file-used"];
    // The child's name for the descriptor it was given is ours to say.
    if (debug_fd >= 0 && stats->debug_file_used == std::string(kProcSelfFd) + std::to_string(kChildDebugFileFd))
      stats->debug_file_used = options.debug_file;
  }
  if (auto message = fields->find("error-message"); message != fields->end()) {
    gsym::Error error(message->second);
    error.code = gsym::error_code_from_name((*fields)["error-code"]).value_or(gsym::ErrorCode::Unspecified);
    error.sys_errno = static_cast<int>(number_or_zero(*fields, "error-errno"));
    if (fields->contains("error-offset")) error.offset = number_or_zero(*fields, "error-offset");
    return error;
  }
  struct stat written {};
  if (::fstat(output.get(), &written) != 0) return system_error("cannot stat its output");
  if (static_cast<uint64_t>(written.st_size) > kMaxOutputBytes)
    return gsym::Error("conversion process: its output is too large (" + std::to_string(written.st_size) +
                       " bytes)");
  return ChildGsym{std::move(output), static_cast<uint64_t>(written.st_size)};
}

int run_conversion_child(int argc, char** argv) {
  gsym::ConvertOptions options;
  options.debug_directories.clear();  // only those the parent gives
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t equals = arg.find('=');
    if (equals == std::string_view::npos) return 2;
    const std::string_view name = arg.substr(0, equals), value = arg.substr(equals + 1);
    const bool on = value == "1";
    if (name == "--threads") std::from_chars(value.data(), value.data() + value.size(), options.threads);
    else if (name == "--debug-file") options.debug_file = value;
    else if (name == "--debug-dir") options.debug_directories.emplace_back(value);
    else if (name == "--search-debug-file") options.search_debug_file = on;
    else if (name == "--dwp") options.dwp_file = value;
    else if (name == "--inline-info") options.inline_info = on;
    else if (name == "--gsym-version") std::from_chars(value.data(), value.data() + value.size(), options.gsym_version);
    else if (name == "--plt-names") options.plt_names = on;
    else if (name == "--code-labels") options.code_labels = on;
    else if (name == "--entry-name") options.entry_name = on;
    else if (name == "--signal-frames") options.signal_frames = on;
    else if (name == "--known-as") options.known_as = value;
    else return 2;
  }
  gsym::ConvertStats stats;
  gsym::Expected<std::vector<uint8_t>> bytes =
      gsym::convert_elf(std::string(kProcSelfFd) + std::to_string(kChildElfFd), options, &stats);
  std::string report;
  auto add_error = [&](const gsym::Error& error) {
    add_field(report, "error-code", gsym::to_string(error.code));
    add_field(report, "error-errno", std::to_string(error.sys_errno));
    if (error.offset != gsym::Error::kNoOffset) add_field(report, "error-offset", std::to_string(error.offset));
    add_field(report, "error-message", error.message);
  };
  if (!bytes) add_error(bytes.error());
  else if (!gsym::write_all(kChildOutputFd, *bytes))
    add_error(gsym::Error::from_errno(errno, "conversion process: cannot write its output: " +
                                                 std::string(std::strerror(errno))));
  add_field(report, "compile-units", std::to_string(stats.compile_units));
  add_field(report, "inputs-private", stats.inputs_writable_only_by_us ? "1" : "0");
  add_field(report, "debug-file-used", stats.debug_file_used);
  return gsym::write_all(kChildReportFd, report) ? 0 : 1;
}

}  // namespace gsymprof
