#include "userspace/symbolize/debuginfod_client.h"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "userspace/base/parse_number.h"

namespace gsymprof {

struct DebuginfodClient::State {
  debuginfod_client* client = nullptr;
  ProgressFn progress;
  bool progress_shown = false;
  std::string what;  // "debuginfo 1a2b..." during a download
  std::chrono::steady_clock::time_point deadline;
};

namespace {

// libdebuginfod, loaded on first use rather than linked: linked, it maps
// libcurl and its TLS, Kerberos and LDAP libraries (25 shared objects) into
// every gsymprof process at start-up, though only a download needs them.
// elfutils' libdw loads it the same way. Every call to it goes through here.
struct DebuginfodLibrary {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_end) end = nullptr;
  decltype(&debuginfod_set_user_data) set_user_data = nullptr;
  decltype(&debuginfod_get_user_data) get_user_data = nullptr;
  decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
  decltype(&debuginfod_find_executable) find_executable = nullptr;
  decltype(&debuginfod_get_url) get_url = nullptr;
  std::string error;  // why it could not be loaded; empty when loaded
};

constexpr const char* kLibraryName = "libdebuginfod.so.1";

DebuginfodLibrary load_library() {
  DebuginfodLibrary lib;
  // Never closed: its functions are used until exit.
  void* handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    lib.error = std::string("cannot load ") + kLibraryName + " (elfutils' libdebuginfod1 package): " +
                (why ? why : "unknown error");
    return lib;
  }
  bool complete = true;
  auto resolve = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, name));
    if (!function && complete) {
      complete = false;
      lib.error = std::string(kLibraryName) + " has no " + name;
    }
  };
  resolve(lib.begin, "debuginfod_begin");
  resolve(lib.end, "debuginfod_end");
  resolve(lib.set_user_data, "debuginfod_set_user_data");
  resolve(lib.get_user_data, "debuginfod_get_user_data");
  resolve(lib.set_progressfn, "debuginfod_set_progressfn");
  resolve(lib.find_debuginfo, "debuginfod_find_debuginfo");
  resolve(lib.find_executable, "debuginfod_find_executable");
  resolve(lib.get_url, "debuginfod_get_url");
  return lib;
}

// Loaded once for the program (thread-safe: a function-local static).
const DebuginfodLibrary& library() {
  static const DebuginfodLibrary lib = load_library();
  return lib;
}

// Called by libdebuginfod while a transfer runs; non-zero cancels it.
int on_progress(debuginfod_client* client, long done, long total) {
  auto* state = static_cast<DebuginfodClient::State*>(library().get_user_data(client));
  if (!state) return 0;
  if (state->progress) {
    std::string line = "debuginfod: " + state->what + ": " + std::to_string(done / 1024);
    line += total > 0 ? " of " + std::to_string(total / 1024) + " KiB" : " KiB";
    state->progress(line);
    state->progress_shown = true;
  }
  return std::chrono::steady_clock::now() >= state->deadline ? 1 : 0;
}

int max_seconds() {
  const char* text = std::getenv(DEBUGINFOD_MAXTIME_ENV_VAR);
  std::optional<uint32_t> seconds = text ? parse_unsigned<uint32_t>(text) : std::nullopt;
  return seconds && *seconds > 0 ? static_cast<int>(*seconds) : DebuginfodClient::kDefaultMaxSeconds;
}

}  // namespace

bool DebuginfodClient::configured() {
  const char* urls = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
  return urls && urls[std::strspn(urls, " \t")] != '\0';
}

DebuginfodClient::DebuginfodClient(ProgressFn progress) : state_(std::make_unique<State>()) {
  state_->progress = std::move(progress);
}

DebuginfodClient::~DebuginfodClient() {
  // A client exists only once the library was loaded.
  if (state_->client) library().end(state_->client);
}

gsym::Expected<DebuginfodClient::Found> DebuginfodClient::find(Kind kind, const BuildId& id) {
  const char* kind_name = kind == Kind::Debuginfo ? "debuginfo" : "executable";
  const std::string what = std::string(kind_name) + " for " + id.hex();
  if (!configured()) return gsym::Error("debuginfod: " + what + ": DEBUGINFOD_URLS is not set");
  if (id.empty()) return gsym::Error("debuginfod: no build ID to ask for");
  const DebuginfodLibrary& lib = library();
  if (!lib.error.empty()) return gsym::Error("debuginfod: " + what + ": " + lib.error);
  if (!state_->client) {
    state_->client = lib.begin();
    if (!state_->client) return gsym::Error("debuginfod: cannot start the client");
    lib.set_user_data(state_->client, state_.get());
    lib.set_progressfn(state_->client, on_progress);
  }
  state_->what = what;
  state_->progress_shown = false;
  state_->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds());
  char* path = nullptr;
  const auto* bytes = id.bytes().data();
  const int length = static_cast<int>(id.bytes().size());
  const int fd = kind == Kind::Debuginfo ? lib.find_debuginfo(state_->client, bytes, length, &path)
                                         : lib.find_executable(state_->client, bytes, length, &path);
  if (state_->progress_shown) state_->progress("");
  if (fd < 0) {
    std::free(path);
    const char* url = lib.get_url(state_->client);
    std::string reason = std::strerror(-fd);
    if (fd == -ECANCELED) reason = "took longer than " + std::to_string(max_seconds()) + " s (DEBUGINFOD_MAXTIME)";
    if (fd == -ETIME) reason = "no answer for DEBUGINFOD_TIMEOUT seconds (" + reason + ")";
    // Coded by the server's answer: ENOENT (no server has it) is NotFound.
    return gsym::Error::from_errno(-fd, "debuginfod: " + what + ": " + reason +
                                            (url && *url ? std::string(" (") + url + ")" : std::string()));
  }
  gsym::FileDescriptor owned(fd);
  std::string result = path ? path : what;
  std::free(path);
  // The descriptor libdebuginfod returns, checked as every file we read is.
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file_at(
      AT_FDCWD, "/proc/self/fd/" + std::to_string(fd), gsym::Symlinks::Follow, result);
  if (!file) return file.error().prefixed("debuginfod: ");
  return Found{result, std::move(*file)};
}

}  // namespace gsymprof
