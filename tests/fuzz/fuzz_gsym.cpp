// Fuzz target for the GSYM reader: parse, verify, every lookup path with every
// option set at a spread of addresses, and full decode of each record. Any
// crash, hang, sanitizer report or disagreement between the two lookup paths
// is a finding.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gsym/reader/reader.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void lookup_everywhere(const gsym::Reader& reader, uint64_t addr, gsym::LookupScratch& scratch) {
  for (int bits = 0; bits < 4; ++bits) {
    gsym::LookupOptions options;
    options.line_information = bits & 1;
    options.inline_frames = bits & 2;
    gsym::Expected<bool> fast = reader.lookup_into(addr, options, scratch);
    auto slow = reader.lookup(addr, options);
    // Both paths must agree on success, coverage and frame count.
    check(fast.ok() == slow.ok());
    if (!fast.ok()) continue;
    check(*fast == slow->has_value());
    if (*fast) {
      check(!scratch.frames.empty());
      check(scratch.frames.size() == (*slow)->frames.size());
      check(!scratch.frames.back().inlined);
    }
    size_t frames = 0;
    auto walked = reader.for_each_frame(addr, options, scratch,
                                        [&](const gsym::LookupFrame&) { ++frames; });
    check(walked.ok() && *walked == *fast);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = gsym::Reader::parse(std::span<const uint8_t>(data, size));
  if (!reader) return 0;
  (void)reader->verify();
  (void)reader->decode_files();
  gsym::LookupScratch scratch;
  const size_t count = reader->function_count();
  const size_t limit = count < 64 ? count : 64;
  for (size_t i = 0; i < limit; ++i) {
    (void)reader->decode_function(i);
    const uint64_t start = reader->function_start(i);
    for (uint64_t delta : {0ull, 1ull, 2ull, 3ull, 7ull, 16ull, 100ull})
      lookup_everywhere(*reader, start + delta, scratch);
    lookup_everywhere(*reader, start - 1, scratch);
  }
  lookup_everywhere(*reader, 0, scratch);
  lookup_everywhere(*reader, UINT64_MAX, scratch);
  lookup_everywhere(*reader, reader->header().base_address, scratch);
  return 0;
}
