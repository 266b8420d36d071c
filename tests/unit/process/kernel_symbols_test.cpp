// The running kernel's symbols (/proc/kallsyms text) and build ID (ELF notes).
#include <doctest/doctest.h>

#include <cstring>
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
