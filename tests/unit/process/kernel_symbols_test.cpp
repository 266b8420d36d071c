// The running kernel's symbols (/proc/kallsyms text) and build ID (ELF notes).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "userspace/process/kernel_symbols.h"

using namespace gsymprof;

namespace {

const char* kKallsyms =
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 T startup_64\n"
    "ffffffff81000100 t secondary_startup_64\n"
    "ffffffff81000180 D some_data\n"
    "ffffffff81000200 W weak_function\n"
    "ffffffff81000300 T do_syscall_64\n"
    "ffffffffc0000000 t ext4_read\t[ext4]\n"
    "ffffffffc0000100 T ext4_write\t[ext4]\n";

std::string note(uint32_t type, const std::string& name, const std::string& desc) {
  std::string out(12, '\0');
  uint32_t name_size = static_cast<uint32_t>(name.size() + 1), desc_size = static_cast<uint32_t>(desc.size());
  std::memcpy(out.data(), &name_size, 4);
  std::memcpy(out.data() + 4, &desc_size, 4);
  std::memcpy(out.data() + 8, &type, 4);
  out += name;
  out += '\0';
  while (out.size() % 4) out += '\0';
  out += desc;
  while (out.size() % 4) out += '\0';
  return out;
}

}  // namespace

TEST_CASE("kallsyms: function symbols only, aliases named by the first, ends at the next symbol") {
  auto table = KernelSymbolTable::parse(kKallsyms);
  REQUIRE(table.ok());
  CHECK(table->size() == 7);  // the data symbol is dropped
  CHECK(!table->addresses_hidden());
  auto first = table->find(0xffffffff81000050);
  REQUIRE(first);
  CHECK(first->name == "_stext");
  CHECK(first->start == 0xffffffff81000000);
  CHECK(first->end == 0xffffffff81000100);
  // The data symbol does not end secondary_startup_64.
  auto second = table->find(0xffffffff81000190);
  REQUIRE(second);
  CHECK(second->name == "secondary_startup_64");
  CHECK(second->end == 0xffffffff81000200);
  CHECK(table->find(0xffffffff81000200)->name == "weak_function");
  auto module = table->find(0xffffffffc0000010);
  REQUIRE(module);
  CHECK(module->name == "ext4_read");
  CHECK(module->module == "ext4");
  CHECK(!table->find(0xffffffff80000000));  // below every symbol
  CHECK(!table->find(0xffffffffc0000200));  // past the last symbol: no known end
}

TEST_CASE("kallsyms: hidden addresses and damaged text") {
  auto hidden = KernelSymbolTable::parse("0000000000000000 T _stext\n0000000000000000 t foo [m]\n");
  REQUIRE(hidden.ok());
  CHECK(hidden->addresses_hidden());
  CHECK(!hidden->find(0));
  CHECK(KernelSymbolTable::parse("ffffffff81000000 T\n").error().message ==
        "kallsyms line 1: not \"ADDRESS TYPE NAME [MODULE]\"");
  CHECK(!KernelSymbolTable::parse("zzzz T foo\n").ok());
  CHECK(!KernelSymbolTable::parse("ffffffff81000000 TT foo\n").ok());
  CHECK(!KernelSymbolTable::parse("ffffffff81000000 T foo ext4\n").ok());
  CHECK(!KernelSymbolTable::parse("ffffffff81000000 T foo [ext4] extra\n").ok());
  CHECK(KernelSymbolTable::parse("").ok());
}

TEST_CASE("kernel build ID from ELF notes") {
  const std::string id("\x12\x34\x56\x78\x9a", 5);
  CHECK(build_id_from_notes(note(1, "Xen", "abcd") + note(3, "GNU", id)).hex() == "123456789a");
  CHECK(build_id_from_notes(note(3, "XYZ", id)).empty());
  CHECK(build_id_from_notes(note(3, "GNU", id).substr(0, 18)).empty());  // truncated
  CHECK(build_id_from_notes("").empty());
}

TEST_CASE("attach_kernel_symbols: only the symbols the capture's kernel frames need") {
  auto table = KernelSymbolTable::parse(kKallsyms);
  REQUIRE(table.ok());
  Capture capture;
  CaptureFrame a{-1, 0xffffffff81000010, UnresolvedReason::None, true};
  CaptureFrame b{-1, 0xffffffff81000020, UnresolvedReason::None, true};
  CaptureFrame c{-1, 0xffffffffc0000050, UnresolvedReason::None, true};
  CaptureFrame outside{-1, 0xffffffff00000000, UnresolvedReason::None, true};
  capture.stacks.push_back({1, "x", {a, b, c, outside}, false, 1});
  CHECK(has_kernel_frames(capture));
  attach_kernel_symbols(capture, &*table, *BuildId::from_hex("beef"), "");
  REQUIRE(capture.kernel.symbols.size() == 2);
  CHECK(capture.kernel.symbols[0].name == "_stext");
  CHECK(capture.kernel.symbols[1].name == "ext4_read");
  CHECK(capture.kernel.build_id.hex() == "beef");
  CHECK(find_kernel_symbol(capture.kernel, 0xffffffff81000020)->name == "_stext");
  CHECK(!find_kernel_symbol(capture.kernel, 0xffffffff81000100));
  attach_kernel_symbols(capture, nullptr, BuildId(), "no kallsyms");
  CHECK(capture.kernel.symbols.empty());
  CHECK(capture.kernel.error == "no kallsyms");
}

TEST_CASE("kallsyms: the image's text alone answers as the whole table, inside its range only") {
  const std::string text = std::string(kKallsyms) + "ffffffff81000400 T _etext\n" +
                           "ffffffffa0000000 t bpf_prog_1234_sample\t[bpf]\n";
  auto all = KernelSymbolTable::parse(text);
  REQUIRE(all.ok());
  std::optional<KernelSymbolTable> image = all->image_text();
  REQUIRE(image);
  CHECK(image->size() == 6);  // _stext .. _etext, no module or BPF symbol
  for (uint64_t address = 0xffffffff81000000; address < 0xffffffff81000400; address += 0x10) {
    REQUIRE(image->covers(address));
    CHECK(image->find(address) == all->find(address));
  }
  CHECK(!image->covers(0xffffffff81000400));
  CHECK(!image->covers(0xffffffffc0000010));
  CHECK(!image->covers(0xffffffffa0000010));
  CHECK(all->covers(0xffffffffa0000010));
  // No bounds, or hidden addresses: no image table.
  CHECK(!KernelSymbolTable::parse(kKallsyms)->image_text());
  CHECK(!KernelSymbolTable::parse("0000000000000000 T _stext\n0000000000000000 T _etext\n")->image_text());
}

TEST_CASE("kallsyms: a serialized copy reads back for its boot only, damage is an error") {
  const std::string text = std::string(kKallsyms) + "ffffffff81000400 T _etext\n";
  std::optional<KernelSymbolTable> image = KernelSymbolTable::parse(text)->image_text();
  REQUIRE(image);
  const std::string boot = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  const std::string bytes = image->serialize(boot);
  auto back = KernelSymbolTable::deserialize(bytes, boot);
  REQUIRE(back.ok());
  CHECK(back->size() == image->size());
  for (uint64_t address = 0xffffffff80fffff0; address < 0xffffffff81000500; address += 8) {
    CHECK(back->covers(address) == image->covers(address));
    CHECK(back->find(address) == image->find(address));
  }
  CHECK(KernelSymbolTable::deserialize(bytes, "another-boot").error().message == "kernel symbol copy: of another boot");
  // Every truncation, and every byte changed, is an error or a table that
  // still answers within its range (never a crash, never an out-of-range read).
  for (size_t size = 0; size < bytes.size(); ++size) CHECK(!KernelSymbolTable::deserialize(bytes.substr(0, size), boot));
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    auto table = KernelSymbolTable::deserialize(damaged, boot);
    if (!table) continue;
    for (uint64_t address : {uint64_t{0xffffffff81000010}, uint64_t{0xffffffff81000390}})
      if (auto symbol = table->find(address)) CHECK((symbol->start <= address && address < symbol->end));
  }
  // Out of order: refused.
  std::string swapped = bytes;
  const size_t entries = 8 + 4 + boot.size() + 32;
  std::swap_ranges(swapped.begin() + static_cast<long>(entries), swapped.begin() + static_cast<long>(entries + 8),
                   swapped.begin() + static_cast<long>(entries + 24 * 3));
  CHECK(KernelSymbolTable::deserialize(swapped, boot).error().message == "kernel symbol copy: not sorted");
}

// The running kernel, read from /proc/kallsyms: its image text, through a
// serialized copy, names every address inside the image as the whole table.
TEST_CASE("kallsyms: the running kernel's image text, through a copy, names as /proc/kallsyms") {
  auto all = KernelSymbolTable::load();
  REQUIRE(all.ok());
  if (all->addresses_hidden()) return;  // not root: nothing to compare
  std::optional<KernelSymbolTable> image = all->image_text();
  REQUIRE(image);
  CHECK(image->size() > 1000);
  auto back = KernelSymbolTable::deserialize(image->serialize("boot"), "boot");
  REQUIRE(back.ok());
  auto stext = all->find(0);  // nothing below every symbol
  CHECK(!stext);
  size_t compared = 0;
  for (uint64_t address = 0xffffffff80000000; address < 0xffffffffc0000000; address += 0x1000 - 8) {
    if (!back->covers(address)) continue;
    ++compared;
    REQUIRE(back->find(address) == all->find(address));
  }
  CHECK(compared > 1000);
}
