// libFuzzer target: /proc/kallsyms text, kernel ELF notes and the cached
// binary copy of the image's text (KernelSymbolTable::deserialize). Any
// input must parse or fail cleanly; a found symbol must hold the address
// asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "userspace/process/kernel_symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gsymprof::build_id_from_notes(text);
  auto check = [size](const gsymprof::KernelSymbolTable& table) {
    for (uint64_t address : {uint64_t{0}, uint64_t{0xffffffff81000000}, uint64_t{0xffffffffc0000010},
                             UINT64_MAX, static_cast<uint64_t>(size) * 4096}) {
      auto symbol = table.find(address);
      if (symbol && (address < symbol->start || address >= symbol->end)) std::abort();
    }
  };
  if (auto copy = gsymprof::KernelSymbolTable::deserialize(text, "boot")) check(*copy);
  auto table = gsymprof::KernelSymbolTable::parse(text);
  if (!table) return 0;
  check(*table);
  // Its image text through a copy must read back.
  if (auto image = table->image_text()) {
    auto back = gsymprof::KernelSymbolTable::deserialize(image->serialize("boot"), "boot");
    if (!back || back->size() != image->size()) std::abort();
    check(*back);
  }
  return 0;
}
