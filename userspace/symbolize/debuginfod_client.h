// userspace/symbolize/debuginfod_client.h - debug files and executables by
// build ID from debuginfod servers, through elfutils' own client library.
//
// Configured by the standard environment only: DEBUGINFOD_URLS (unset or
// empty: nothing is ever fetched), DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT
// (seconds without progress) and the rest of libdebuginfod's variables. A
// download tells its progress to the caller's ProgressFn. No download runs longer
// than DEBUGINFOD_MAXTIME seconds, or kDefaultMaxSeconds when that is unset,
// so a slow server never blocks a profile forever.
#pragma once

#include <memory>
#include <string>

#include "gsym/base/expected.h"
#include "gsym/base/file_io.h"
#include "userspace/base/build_id.h"
#include "userspace/symbolize/progress.h"

namespace gsymprof {

class DebuginfodClient {
 public:
  enum class Kind { Debuginfo, Executable };
  static constexpr int kDefaultMaxSeconds = 300;

  // True when DEBUGINFOD_URLS names at least one server.
  static bool configured();

  explicit DebuginfodClient(ProgressFn progress = {});
  ~DebuginfodClient();
  DebuginfodClient(const DebuginfodClient&) = delete;
  DebuginfodClient& operator=(const DebuginfodClient&) = delete;

  struct Found {
    std::string path;     // in libdebuginfod's cache, for messages
    gsym::OpenFile file;  // the file itself, as gsym::open_regular_file checks it
  };
  // Errors are one line:
  // "debuginfod: debuginfo for BUILDID: Connection timed out (URL)".
  gsym::Expected<Found> find(Kind kind, const BuildId& id);

  struct State;  // public only for libdebuginfod's progress callback

 private:
  std::unique_ptr<State> state_;
};

}  // namespace gsymprof
