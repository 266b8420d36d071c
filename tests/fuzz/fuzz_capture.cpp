// Fuzzes the capture-file reader: any bytes give a capture or a one-line
// error, never a crash or hang; an accepted capture round-trips exactly
// (write -> read -> write gives the same bytes).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/capture_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto capture = gsymprof::capture_from_json(text);
  if (!capture) {
    const std::string& message = capture.error().message;
    if (message.empty() || message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const std::string written = gsymprof::capture_to_json(*capture);
  auto again = gsymprof::capture_from_json(written);
  if (!again) std::abort();
  if (gsymprof::capture_to_json(*again) != written) std::abort();
  return 0;
}
