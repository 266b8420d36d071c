// Tests for gsym/convert/signal_frames: the signal trampolines of this
// machine's libc, found from its .eh_frame ('S' in the CIE's augmentation),
// cover glibc's __restore_rt (whose address libc6-dbg's symbol table gives,
// when installed) and nothing large.
#include <doctest/doctest.h>

#include <string>

#include "gsym/convert/elf_image.h"
#include "gsym/convert/signal_frames.h"

using namespace gsym;

TEST_CASE("signal frames: libc's sigreturn trampoline, from its CFI alone") {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  auto image = ElfImage::open(libc);
  REQUIRE_MESSAGE(image, image.error().message);
  const std::vector<AddressRange> ranges = signal_trampolines(*image);
  REQUIRE(!ranges.empty());
  for (const AddressRange& r : ranges) {
    CHECK(r.start < r.end);
    CHECK(r.end - r.start < 64);  // a trampoline, not a function
  }
  // libc6-dbg, when installed, names the trampoline: it must be covered.
  std::string hex;
  for (uint8_t b : image->build_id()) {
    static const char* digits = "0123456789abcdef";
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  auto debug = ElfImage::open("/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug");
  if (!debug) {
    MESSAGE("no libc6-dbg: __restore_rt's address not checked");
    return;
  }
  bool found = false;
  for (const ElfSymbol& sym : debug->function_symbols()) {
    if (sym.name != "__restore_rt") continue;
    found = true;
    bool covered = false;
    for (const AddressRange& r : ranges) covered |= r.contains(sym.value);
    CHECK(covered);
  }
  if (!found) MESSAGE("libc6-dbg's symbol table lists no __restore_rt");
}

TEST_CASE("signal frames: a file without .eh_frame has none") {
  auto image = ElfImage::open("/proc/self/exe");
  REQUIRE(image);
  // The test binary has .eh_frame but no 'S' CIE: nothing.
  CHECK(signal_trampolines(*image).empty());
}
