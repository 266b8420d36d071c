// Fuzzes the perf.data reader and its conversion to a Capture: any bytes give
// a capture or a one-line "perf.data: ..." error, never a crash, hang or
// huge allocation. No file is read (the module loader refuses), so the
// result depends on the bytes alone. An accepted file's records decode, in
// time order, and its capture is one the capture-file reader accepts back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "userspace/capture/capture_file.h"
#include "userspace/perf_data/perf_data_capture.h"
#include "userspace/session/recorded_session.h"
#include "userspace/perf_data/perf_data_reader.h"

namespace {

void check_error(const gsym::Error& error) {
  const std::string& message = error.message;
  if (message.rfind("perf.data: ", 0) != 0 || message.find('\n') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gsymprof::PerfDataFile::parse(std::span<const uint8_t>(data, size));
  if (!file) {
    check_error(file.error());
    return 0;
  }
  uint64_t time = 0;
  for (const gsymprof::PerfRecordRef& ref : file->records()) {
    if (ref.time < time) std::abort();
    time = ref.time;
    if (!file->decode(ref)) std::abort();  // indexing decoded it already
  }
  gsymprof::PerfCaptureOptions options;
  options.load_module =
      [](const gsymprof::PerfModuleFile&) -> gsym::Expected<gsymprof::ModuleIdentity> {
    return gsym::Error("fuzzing: no files");
  };
  // Naming an event (the last one's name, as --event would) selects it or
  // says which names there are: never anything else.
  if (!file->attrs().empty() && !file->attrs().back().name.empty()) {
    gsymprof::PerfCaptureOptions named = options;
    named.event = file->attrs().back().name;
    auto chosen = gsymprof::capture_from_perf_data(*file, named);
    if (!chosen) check_error(chosen.error());
  }
  auto capture = gsymprof::capture_from_perf_data(*file, options);
  if (!capture) {
    check_error(capture.error());
    return 0;
  }
  uint64_t samples = 0;
  for (const gsymprof::CaptureStack& stack : capture->stacks) {
    samples += stack.count;
    for (const gsymprof::CaptureFrame& frame : stack.frames)
      if (frame.module >= 0 && static_cast<size_t>(frame.module) >= capture->modules.size())
        std::abort();
  }
  if (samples != capture->samples) std::abort();
  if (!gsymprof::capture_from_json(gsymprof::capture_to_json(*capture))) std::abort();
  return 0;
}
