// Fuzzes `gsymprof serve`'s request decoders: the first byte picks pprof
// (even) or OTLP (odd), the rest is the body, named through a store whose
// GSYM (build ID aa010203: main, and foo with bar inlined) covers
// 0x1000-0x1200. Any bytes give a named body or a one-line error; a named
// body parses again and naming it a second time adds nothing.
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/inline_app_gsym.h"
#include "userspace/output/pprof_input.h"
#include "userspace/serve/frame_namer.h"
#include "userspace/serve/otlp_request.h"
#include "userspace/serve/pprof_request.h"
#include "userspace/serve/symbol_store.h"

namespace {

gsymprof::SymbolStore& store() {
  static gsymprof::ServeMetrics metrics;
  static std::unique_ptr<gsymprof::SymbolStore> store = [] {
    char dir[] = "/tmp/fuzz_serve.XXXXXX";
    if (!::mkdtemp(dir)) std::abort();
    const std::vector<uint8_t> bytes = gsymprof::test::inline_app_gsym_bytes();
    if (bytes.empty()) std::abort();
    std::ofstream(std::string(dir) + "/app.gsym", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    gsymprof::SymbolStoreOptions options;
    options.dir = dir;
    auto opened = gsymprof::SymbolStore::open(options, metrics);
    if (!opened) std::abort();
    // The store keeps what it opened; the directory is not needed again.
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    return std::move(*opened);
  }();
  return *store;
}

gsymprof::FrameNamer namer() {
  return gsymprof::FrameNamer(store(), std::chrono::steady_clock::now() + std::chrono::seconds(60));
}

void one_line(const gsym::Error& error) {
  if (error.message.empty() || error.message.find('\n') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  using gsymprof::FrameOutcome;
  if (data[0] % 2 == 0) {
    gsymprof::FrameNamer first = namer();
    auto named = gsymprof::symbolize_pprof(body, 64u << 20, first);
    if (!named) return one_line(named.error()), 0;
    gsymprof::FrameNamer second = namer();
    auto again = gsymprof::symbolize_pprof(*named, 64u << 20, second);
    if (!again || second.counts()[static_cast<size_t>(FrameOutcome::Named)] != 0) std::abort();
  } else {
    gsymprof::FrameNamer first = namer();
    auto named = gsymprof::symbolize_otlp_bytes(body, first);
    if (!named) return one_line(named.error()), 0;
    gsymprof::FrameNamer second = namer();
    auto again = gsymprof::symbolize_otlp_bytes(*named, second);
    if (!again || second.counts()[static_cast<size_t>(FrameOutcome::Named)] != 0) std::abort();
  }
  return 0;
}
