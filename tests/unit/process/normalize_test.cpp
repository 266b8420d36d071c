// Tests for userspace/normalize: IP -> {module, unslid_addr}, via the PT_LOAD
// segment holding the file offset, with IP - 1 for return addresses.
#include <doctest/doctest.h>

#include "userspace/process/normalize.h"

using namespace gsymprof;

namespace {

MapEntry mapping(uint64_t start, uint64_t end, uint64_t file_offset, const char* perms,
                 uint64_t inode, const char* path) {
  MapEntry m;
  m.start = start;
  m.end = end;
  m.file_offset = file_offset;
  m.perms = perms;
  m.dev_major = 8;
  m.dev_minor = 1;
  m.inode = inode;
  m.path = path;
  return m;
}

ProcessImage image_with(std::vector<MapEntry> maps, std::vector<ProcessModule> modules,
                        std::vector<int32_t> map_module) {
  ProcessImage image;
  image.pid = 42;
  image.maps = std::move(maps);
  image.modules = std::move(modules);
  image.map_module = std::move(map_module);
  return image;
}

ProcessModule module_with(const char* path, uint64_t inode, std::vector<LoadSegment> segments) {
  ProcessModule m;
  m.path = path;
  m.dev_major = 8;
  m.dev_minor = 1;
  m.inode = inode;
  m.identity.segments = std::move(segments);
  return m;
}

}  // namespace

TEST_CASE("normalize: lookup address is the IP for the leaf, IP - 1 for return addresses") {
  CHECK(lookup_address(0x1000, 0) == 0x1000);
  CHECK(lookup_address(0x1000, 1) == 0xfff);
  CHECK(lookup_address(0x1000, 7) == 0xfff);
  CHECK(lookup_address(0, 3) == 0);  // no wrap-around
}

TEST_CASE("normalize: non-PIE executable, first PT_LOAD at a non-zero p_vaddr") {
  // ET_EXEC linked at 0x400000: runtime == unslid, load bias 0.
  std::vector<LoadSegment> segs = {
      {0x0, 0x400000, 0x6a0, 0x6a0, false},
      {0x1000, 0x401000, 0x2d5, 0x2d5, true},
      {0x2000, 0x402000, 0x1a4, 0x1a4, false},
  };
  CHECK(unslid_address(segs, 0x1234 - 0x1000 + 0x1000, true) == 0x401234);
  CHECK(unslid_address(segs, 0x10, false) == 0x400010);
  CHECK(!unslid_address(segs, 0x12d5, true));  // just past the code bytes
  MapEntry text = mapping(0x401000, 0x402000, 0x1000, "r-xp", 5, "/bin/app");
  CHECK(load_bias(segs, text) == 0);
}

TEST_CASE("normalize: PIE with p_offset != p_vaddr (never the .text trick)") {
  // lld-style layout: file offset 0x1e10 is loaded at p_vaddr 0x2e10.
  std::vector<LoadSegment> segs = {
      {0x0, 0x0, 0xe00, 0xe00, false},
      {0x1e10, 0x2e10, 0x3f0, 0x3f0, true},
  };
  MapEntry text = mapping(0x7f0000001000, 0x7f0000003000, 0x1000, "r-xp", 5, "/bin/pie");
  // runtime 0x7f0000001f00 -> file offset 0x1f00 -> unslid 0x2f00
  uint64_t runtime = 0x7f0000001f00;
  uint64_t file_offset = runtime - text.start + text.file_offset;
  CHECK(file_offset == 0x1f00);
  CHECK(unslid_address(segs, file_offset, true) == 0x2f00);
  auto bias = load_bias(segs, text);
  REQUIRE(bias);
  CHECK(*bias == runtime - 0x2f00);
  // An offset in the page but before the segment's first byte is no code.
  CHECK(!unslid_address(segs, 0x1e00, true));
}

TEST_CASE("normalize: two executable segments map to their own p_vaddr") {
  std::vector<LoadSegment> segs = {
      {0x0, 0x10000, 0x800, 0x800, false},
      {0x1000, 0x11000, 0x1000, 0x1000, true},
      {0x2000, 0x20000, 0x1000, 0x1000, true},  // second code segment, other delta
  };
  CHECK(unslid_address(segs, 0x1010, true) == 0x11010);
  CHECK(unslid_address(segs, 0x2010, true) == 0x20010);
  MapEntry first = mapping(0x5000001000, 0x5000002000, 0x1000, "r-xp", 9, "/lib/two.so");
  MapEntry second = mapping(0x5000010000, 0x5000011000, 0x2000, "r-xp", 9, "/lib/two.so");
  CHECK(load_bias(segs, first) == 0x5000001000 - 0x11000);
  CHECK(load_bias(segs, second) == 0x5000010000 - 0x20000);
}

TEST_CASE("normalize: segments sharing a file page prefer the executable one for code") {
  std::vector<LoadSegment> segs = {
      {0x0, 0x0, 0x1800, 0x1800, false},
      {0x1000, 0x201000, 0x800, 0x800, true},
  };
  CHECK(unslid_address(segs, 0x1100, true) == 0x201100);
  CHECK(unslid_address(segs, 0x1100, false) == 0x1100);
}

TEST_CASE("normalize: frames through a process image") {
  // app: PIE mapped at 0x555500000000; text segment p_offset 0x1000 at
  // p_vaddr 0x1000. lib: text segment p_offset 0x2000 at p_vaddr 0x3000.
  ProcessImage image = image_with(
      {
          mapping(0x555500000000, 0x555500001000, 0x0, "r--p", 11, "/bin/app"),
          mapping(0x555500001000, 0x555500002000, 0x1000, "r-xp", 11, "/bin/app"),
          mapping(0x555500010000, 0x555500020000, 0x0, "rw-p", 0, "[heap]"),
          mapping(0x7f0000002000, 0x7f0000003000, 0x2000, "r-xp", 12, "/lib/libx.so"),
          mapping(0x7f0000010000, 0x7f0000011000, 0x0, "r-xp", 13, "/lib/broken.so"),
          mapping(0x7f0000020000, 0x7f0000021000, 0x5000, "r-xp", 11, "/bin/app"),
      },
      {
          module_with("/bin/app", 11, {{0x0, 0x0, 0x800, 0x800, false},
                                       {0x1000, 0x1000, 0x1000, 0x1000, true}}),
          module_with("/lib/libx.so", 12, {{0x2000, 0x3000, 0x1000, 0x1000, true}}),
          module_with("/lib/broken.so", 13, {}),
      },
      {0, 0, -1, 1, 2, 0});
  image.modules[2].error = "not an ELF file";

  SUBCASE("leaf frame: the IP itself") {
    NormalizedFrame f = normalize_frame(image, 0x555500001234, 0);
    CHECK(f.module == 0);
    CHECK(f.address == 0x1234);
    CHECK(f.reason == UnresolvedReason::None);
  }
  SUBCASE("return address: IP - 1, even across a mapping boundary") {
    // A function ending in a call returns to the first byte after it, here
    // the end of the executable mapping; IP - 1 is still the call.
    NormalizedFrame f = normalize_frame(image, 0x555500002000, 1);
    CHECK(f.module == 0);
    CHECK(f.address == 0x1fff);
    NormalizedFrame leaf = normalize_frame(image, 0x555500002000, 0);
    CHECK(leaf.module == -1);
    CHECK(leaf.reason == UnresolvedReason::NoMapping);
  }
  SUBCASE("shared library with offset != vaddr") {
    NormalizedFrame f = normalize_frame(image, 0x7f0000002101, 3);
    CHECK(f.module == 1);
    CHECK(f.address == 0x3100);
    CHECK(f.file_offset == 0x2100);
  }
  SUBCASE("unresolved frames keep the runtime address and say why") {
    NormalizedFrame none = normalize_frame(image, 0x1234, 0);
    CHECK(none.reason == UnresolvedReason::NoMapping);
    CHECK(none.address == 0x1234);
    NormalizedFrame heap = normalize_frame(image, 0x555500010010, 1);
    CHECK(heap.reason == UnresolvedReason::AnonymousMapping);
    CHECK(heap.address == 0x555500010010);
    NormalizedFrame broken = normalize_frame(image, 0x7f0000010010, 0);
    CHECK(broken.reason == UnresolvedReason::ModuleUnreadable);
    NormalizedFrame no_segment = normalize_frame(image, 0x7f0000020010, 0);
    CHECK(no_segment.reason == UnresolvedReason::NoSegment);
    CHECK(no_segment.file_offset == 0x5010);
  }
  SUBCASE("an address in a mapping without execute permission is no code") {
    // The read-only first mapping of /bin/app: a wrong return address the
    // unwinder recovered, not a frame of the module.
    NormalizedFrame f = normalize_frame(image, 0x555500000100, 1);
    CHECK(f.module == -1);
    CHECK(f.reason == UnresolvedReason::NotExecutable);
    CHECK(f.address == 0x555500000100);
  }
  SUBCASE("a process whose maps could not be read") {
    ProcessImage gone;
    gone.pid = 7;
    gone.error = "process exited";
    CHECK(normalize_frame(gone, 0x1000, 0).reason == UnresolvedReason::ProcessGone);
  }
}
