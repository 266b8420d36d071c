#include "gsym/convert/plt_table.h"

#include <algorithm>
#include <unordered_map>

#include "gsym/base/hex.h"

namespace gsym {
namespace {

uint32_t le32(std::span<const uint8_t> b, size_t at) {
  return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 | uint32_t(b[at + 3]) << 24;
}

// What one stub's first instructions say: the GOT slot its indirect jmp
// reads, or the .rela.plt index it pushes (IBT lazy stubs).
struct StubTarget {
  bool has_slot = false, has_push = false;
  uint64_t slot = 0;
  uint32_t push = 0;
};

StubTarget decode_stub(uint64_t address, std::span<const uint8_t> b) {
  StubTarget t;
  size_t pos = 0;
  static constexpr uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  if (b.size() >= 4 && std::equal(kEndbr64, kEndbr64 + 4, b.begin())) pos = 4;
  const size_t prefixed = pos + (pos < b.size() && b[pos] == 0xf2 ? 1 : 0);  // bnd
  // jmp *disp32(%rip): ff 25 disp32; the slot is relative to the next insn.
  if (b.size() >= prefixed + 6 && b[prefixed] == 0xff && b[prefixed + 1] == 0x25) {
    const int32_t disp = static_cast<int32_t>(le32(b, prefixed + 2));
    t.has_slot = true;
    t.slot = address + prefixed + 6 + static_cast<uint64_t>(static_cast<int64_t>(disp));
    return t;
  }
  // push imm32: 68 imm32.
  if (b.size() >= pos + 5 && b[pos] == 0x68) {
    t.has_push = true;
    t.push = le32(b, pos + 1);
  }
  return t;
}

}  // namespace

std::vector<PltEntry> decode_plt(std::span<const PltSection> sections,
                                 std::span<const PltRelocation> jump_slots,
                                 std::span<const PltRelocation> glob_dat,
                                 const std::function<std::string(uint64_t addr)>& name_at) {
  std::unordered_map<uint64_t, const PltRelocation*> by_slot;
  for (const PltRelocation& r : jump_slots) by_slot.try_emplace(r.got_slot, &r);
  for (const PltRelocation& r : glob_dat) by_slot.try_emplace(r.got_slot, &r);
  auto name_of = [&](const PltRelocation& r) -> std::string {
    if (!r.irelative) return r.name.empty() ? "" : r.name + "@plt";
    std::string target = name_at ? name_at(r.addend) : "";
    return (target.empty() ? "*ABS*+" + hex_number(r.addend) : target) + "@plt";
  };
  std::vector<PltEntry> out;
  for (const PltSection& section : sections) {
    if (section.entry_size != 8 && section.entry_size != 16) continue;
    const bool lazy_plt = section.name == ".plt";
    const uint64_t count = section.bytes.size() / section.entry_size;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t address = section.address + i * section.entry_size;
      if (address < section.address) break;  // wrapped: a crafted sh_addr
      PltEntry entry{address, section.entry_size, ""};
      if (lazy_plt && i == 0) {
        entry.name = ".plt";
      } else {
        const StubTarget t = decode_stub(address, section.bytes.subspan(i * section.entry_size, section.entry_size));
        if (t.has_slot) {
          if (auto it = by_slot.find(t.slot); it != by_slot.end()) entry.name = name_of(*it->second);
        } else if (t.has_push && lazy_plt && t.push < jump_slots.size()) {
          entry.name = name_of(jump_slots[t.push]);
        }
      }
      if (!entry.name.empty()) out.push_back(std::move(entry));
    }
  }
  std::sort(out.begin(), out.end(), [](const PltEntry& a, const PltEntry& b) {
    return a.address != b.address ? a.address < b.address : a.name < b.name;
  });
  return out;
}

}  // namespace gsym
