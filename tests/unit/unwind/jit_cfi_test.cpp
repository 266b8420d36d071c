// JIT code's own CFI (userspace/unwind/jit_eh_frame.h, the CFI unwinder's
// UnwindModule::jit): the .eh_frame node 20 and CPython 3.13 write in their
// jitdumps placed where its FDE covers the code; a hand-built .eh_frame for
// an FP-less function stepped through in a copied stack (and not without
// it); malformed .eh_frames refused, the walk then left to the fallbacks.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "userspace/unwind/cfi_unwinder.h"
#include "userspace/unwind/jit_eh_frame.h"

using namespace gsymprof;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes from_hex(const std::string& hex) {
  Bytes out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

void put32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// The code: [kCode, kCode + 0x20), a function without a frame pointer:
//   sub $0x10,%rsp (4 bytes); ...; add $0x10,%rsp; ret
// Its CFI: CFA = rsp + 8 at entry, rsp + 24 from offset 4, the return
// address at CFA - 8. The runtime keeps the .eh_frame right after the code
// (as V8 does), pc_begin relative to where it lies, and an .eh_frame_hdr of
// `hdr_size` bytes after it (never read).
constexpr uint64_t kCode = 0x10000, kCodeSize = 0x20;

Bytes hand_built_unwind(uint64_t eh_frame_at = kCode + kCodeSize, uint32_t pc_range = kCodeSize, size_t hdr_size = 20) {
  Bytes cie = {0, 0, 0, 0,  // CIE id
               1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,  // version, "zR", code 1, data -8, RA 16, aug: pcrel|sdata4
               0x0c, 7, 8,  // def_cfa rsp+8
               0x90, 1,     // RA at cfa-8
               0, 0};       // nops to 4 bytes
  Bytes out;
  put32(out, static_cast<uint32_t>(cie.size()));
  out.insert(out.end(), cie.begin(), cie.end());
  const size_t fde_at = out.size();
  Bytes fde;
  put32(fde, static_cast<uint32_t>(fde_at + 4));  // back to the CIE from this field
  const uint64_t pc_begin_field = eh_frame_at + fde_at + 8;
  put32(fde, static_cast<uint32_t>(kCode - pc_begin_field));
  put32(fde, pc_range);
  fde.insert(fde.end(), {0,              // no augmentation data
                         0x44,           // advance 4
                         0x0e, 24,       // def_cfa_offset 24
                         0, 0, 0, 0});   // nops
  put32(out, static_cast<uint32_t>(fde.size()));
  out.insert(out.end(), fde.begin(), fde.end());
  out.insert(out.end(), hdr_size, 0xee);
  return out;
}

UnwindModule jit_module(Bytes unwind, uint64_t serial, uint64_t moved_by = 0) {
  UnwindModule module;
  module.load_bias = moved_by;
  module.jit = JitUnwindCode{kCode, kCode + kCodeSize, std::move(unwind), 20, serial};
  return module;
}

// A stack sampled at kCode + 8 (after the sub): the return address at
// sp + 16 (0x20005, code nobody knows), then a frame-pointer frame. rbp is
// that frame's, so a frame-pointer step from the JIT function skips 0x20005.
struct FplessStack {
  static constexpr uint64_t kStart = 0x7ffc0000;
  Bytes bytes = Bytes(0x100, 0);
  void put(uint64_t addr, uint64_t value) { std::memcpy(&bytes[addr - kStart], &value, 8); }
  FplessStack() {
    put(kStart + 0x10, 0x20005);  // the JIT function's return address (CFA - 8, CFA = sp + 24)
    put(kStart + 0x40, 0);        // 0x20005's frame: saved rbp (ends the chain), return address
    put(kStart + 0x48, 0x30000);
  }
  StackView view(uint64_t pc = kCode + 8) const { return {{pc, kStart, kStart + 0x40}, kStart, bytes}; }
};

}  // namespace

TEST_CASE("jit eh_frame: placed where the runtime's FDE covers the code (node 20, CPython 3.13)") {
  // From the jitdumps: V8's TurboFan fib (CIE "zLR", version 3), 384 bytes
  // of code, the .eh_frame right after it; CPython's trampoline, 11 bytes,
  // the .eh_frame after it rounded to 16. Each with a 20-byte .eh_frame_hdr.
  const Bytes v8 = from_hex(
      "1800000000000000037a4c520001781002ff1b0c070890010000000028000000200000005cfeffff7e010000004f0e108602430d06"
      "0304010d07410e08520c06100000000000000000000000011b033bb0ffffff0100000034feffffd0ffffff");
  auto placed = place_jit_eh_frame(v8, 20, 0x7fabf3763f40, 0x7fabf3763f40 + 384);
  REQUIRE(placed);
  CHECK(placed->address == 0x7fabf3763f40 + 384);
  CHECK(placed->eh_frame.size() == v8.size() - 20 - 4);  // up to its terminator
  CHECK(placed->fdes == 1);

  const Bytes cpython = from_hex(
      "1400000000000000017a5200017810011b0c070890010000140000001c000000d0ffffff0b00000000440e10460e0800011b033bcc"
      "ffffff01000000c0ffffffe8ffffff");
  placed = place_jit_eh_frame(cpython, 20, 0x7f9c1ebe7000, 0x7f9c1ebe7000 + 11);
  REQUIRE(placed);
  CHECK(placed->address == 0x7f9c1ebe7000 + 0x10);
  // The same bytes for code shorter than the FDE's range: refused.
  CHECK_FALSE(place_jit_eh_frame(cpython, 20, 0x7f9c1ebe7000, 0x7f9c1ebe7000 + 10));

  // Wherever the runtime kept the bytes, the FDE begins at the code.
  for (uint64_t at : {kCode + kCodeSize, kCode + 0x100, kCode - 0x1000}) {
    auto hand = place_jit_eh_frame(hand_built_unwind(at), 20, kCode, kCode + kCodeSize);
    REQUIRE(hand);
    CHECK(hand->address == at);
  }
}

TEST_CASE("jit eh_frame: malformed or unreadable ones are refused, never read past") {
  const Bytes good = hand_built_unwind();
  auto refused = [&](Bytes bytes, const char* why, uint64_t hdr = 20) {
    INFO(why);
    auto placed = place_jit_eh_frame(bytes, hdr, kCode, kCode + kCodeSize);
    CHECK_FALSE(placed);
    if (!placed) CHECK_FALSE(placed.error().message.empty());
  };
  refused(good, ".eh_frame_hdr larger than the bytes", good.size() + 1);
  refused(hand_built_unwind(kCode + kCodeSize, kCodeSize + 1), "FDE past the code's end");
  refused(hand_built_unwind(kCode + kCodeSize, 0), "empty FDE");
  refused(Bytes(24, 0xee), "no entry, only a header", 20);
  refused(Bytes{0, 0, 0, 0}, "a terminator alone: no FDE", 0);
  Bytes cie_only(good.begin(), good.begin() + 24);
  refused(cie_only, "a CIE alone", 0);
  Bytes bad = good;
  bad[0] = 0xff, bad[1] = 0xff, bad[2] = 0xff, bad[3] = 0xff;
  refused(bad, "64-bit entries");
  bad = good;
  bad[24] = 0xf0;  // the FDE's length past the end
  refused(bad, "length past the end");
  bad = good;
  bad[28] = 0x40;  // the FDE's CIE pointer before the start
  refused(bad, "CIE pointer out of the bytes");
  bad = good;
  bad[28] = 0x10;  // the FDE's CIE pointer at no CIE
  refused(bad, "CIE pointer at no CIE");
  bad = good;
  bad[16] = 0x3b;  // datarel|sdata4: relative to a section this image lacks
  refused(bad, "datarel pointers");
  bad = good;
  bad[10] = 'X';  // augmentation "zX"
  refused(bad, "unknown augmentation");
  bad = good;
  bad[8] = 2;  // CIE version 2
  refused(bad, "CIE version");
  // Every cut of the bytes: refused or placed within the code, never read past.
  for (size_t size = 0; size < good.size() - 20; ++size) {
    auto placed = place_jit_eh_frame(std::span(good).first(size), 0, kCode, kCode + kCodeSize);
    if (placed) CHECK(placed->eh_frame.size() <= size);
  }
}

TEST_CASE("cfi unwinder: JIT code without a frame pointer is stepped over by its runtime's CFI") {
  FplessStack s;
  const UnwindModule jit = jit_module(hand_built_unwind(), 1);
  auto finder = [&](uint64_t addr) -> const UnwindModule* {
    return addr >= kCode && addr < kCode + kCodeSize ? &jit : nullptr;
  };
  CfiUnwinder unwinder;
  UnwindResult r;
  unwinder.unwind(s.view(), finder, r);
  // The JIT CFI finds 0x20005; from there the frame pointer goes on.
  CHECK(r.ips == std::vector<uint64_t>{kCode + 8, 0x20005, 0x30000});
  CHECK(r.jit_cfi_steps == 1);
  CHECK(r.frame_pointer_steps == 1);
  CHECK(unwinder.stats().jit_code_loaded == 1);
  // At the code's first instruction the CFA is still rsp + 8: the return
  // address is at sp.
  FplessStack entry;
  entry.put(FplessStack::kStart, 0x20005);
  unwinder.unwind(entry.view(kCode), finder, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode, 0x20005, 0x30000});
  CHECK(r.jit_cfi_steps == 1);

  // The code moved 0x1000 up (JIT_CODE_MOVE): the CFI follows it.
  const UnwindModule moved = jit_module(hand_built_unwind(), 2, 0x1000);
  unwinder.unwind(s.view(kCode + 0x1008),
                  [&](uint64_t addr) { return addr >= kCode + 0x1000 && addr < kCode + 0x1020 ? &moved : nullptr; }, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode + 0x1008, 0x20005, 0x30000});
  CHECK(r.jit_cfi_steps == 1);

  // Without the JIT CFI: the frame pointer skips the caller.
  unwinder.unwind(s.view(), [](uint64_t) -> const UnwindModule* { return nullptr; }, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode + 8, 0x30000});
  CHECK(r.jit_cfi_steps == 0);

  // Forgotten, the module's CFI is read again from its bytes.
  unwinder.forget_module(jit);
  unwinder.unwind(s.view(), finder, r);
  CHECK(r.jit_cfi_steps == 1);
  CHECK(unwinder.stats().jit_code_loaded == 3);
}

TEST_CASE("cfi unwinder: a JIT .eh_frame refused or taking no step leaves the code to the fallbacks") {
  FplessStack s;
  CfiUnwinder unwinder;
  UnwindResult r;
  // Refused (an FDE longer than the code): no CFI, the frame pointer's walk.
  Bytes too_long = hand_built_unwind(kCode + kCodeSize, kCodeSize + 0x10);
  const UnwindModule refused = jit_module(too_long, 1);
  unwinder.unwind(s.view(), [&](uint64_t addr) { return addr < 0x20000 ? &refused : nullptr; }, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode + 8, 0x30000});
  CHECK(r.jit_cfi_steps == 0);
  CHECK(unwinder.stats().jit_code_rejected == 1);
  CHECK(unwinder.stats().jit_code_rejection.find("outside the code") != std::string::npos);
  // Garbage bytes: the same.
  const UnwindModule garbage = jit_module(Bytes(64, 0x5a), 2);
  unwinder.unwind(s.view(), [&](uint64_t addr) { return addr < 0x20000 ? &garbage : nullptr; }, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode + 8, 0x30000});
  CHECK(unwinder.stats().jit_code_rejected == 2);

  // Well formed, but its CFA lies past the copied stack: the frame pointer
  // takes the step instead of the walk ending.
  Bytes far = hand_built_unwind();
  far[24 + 4 + 4 + 4 + 4 + 1 + 2] = 0x7f;  // def_cfa_offset 24 -> 127 (ULEB)
  const UnwindModule far_module = jit_module(far, 3);
  FplessStack small;
  small.bytes.resize(0x60);
  unwinder.unwind(small.view(), [&](uint64_t addr) { return addr < 0x20000 ? &far_module : nullptr; }, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode + 8, 0x30000});
  CHECK(r.jit_cfi_steps == 0);
  // ... and with no fallback the walk ends where the CFI could not go.
  CfiUnwinder strict({.frame_pointer_fallback = false});
  strict.unwind(small.view(), [&](uint64_t addr) { return addr < 0x20000 ? &far_module : nullptr; }, r);
  CHECK(r.ips == std::vector<uint64_t>{kCode + 8});
  CHECK(r.stop == UnwindStop::StackCopyTooSmall);
}
