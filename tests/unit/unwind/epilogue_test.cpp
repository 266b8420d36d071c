// Tests of the epilogue decoder (userspace/unwind/epilogue.h), the CFI
// unwinder's step through code without CFI by it, and the process table's
// code reads it uses.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

#include "userspace/process/process_image.h"
#include "userspace/unwind/cfi_unwinder.h"
#include "userspace/unwind/epilogue.h"

using gsymprof::decode_epilogue;
using gsymprof::EpilogueStep;

namespace {

using Bytes = std::vector<uint8_t>;
constexpr int kRbx = 3, kRbp = 6, kR12 = 12;

std::optional<EpilogueStep> decode(const Bytes& code) { return decode_epilogue(code); }

}  // namespace

TEST_CASE("epilogue: CPython's perf trampoline (sub $8; call *%rcx; add $8; ret)") {
  auto step = decode({0x48, 0x83, 0xc4, 0x08, 0xc3});
  REQUIRE(step);
  CHECK(step->base == EpilogueStep::Base::Rsp);
  CHECK(step->return_slot == 8);
  CHECK(step->pops.empty());
  CHECK(step->instructions == 2);
}

TEST_CASE("epilogue: pops, leave, mov %rbp,%rsp, lea, nops, register moves") {
  // pop %rbx; pop %rbp; pop %r12; ret
  auto pops = decode({0x5b, 0x5d, 0x41, 0x5c, 0xc3});
  REQUIRE(pops);
  REQUIRE(pops->pops.size() == 3);
  CHECK(pops->pops[0].reg == kRbx);
  CHECK(pops->pops[0].offset == 0);
  CHECK(pops->pops[1].reg == kRbp);
  CHECK(pops->pops[1].offset == 8);
  CHECK(pops->pops[2].reg == kR12);
  CHECK(pops->pops[2].offset == 16);
  CHECK(pops->return_slot == 24);

  // leave; ret, and the same spelled mov %rbp,%rsp (both encodings); pop %rbp
  for (const Bytes& code : {Bytes{0xc9, 0xc3}, Bytes{0x48, 0x89, 0xec, 0x5d, 0xc3}, Bytes{0x48, 0x8b, 0xe5, 0x5d, 0xc3}}) {
    auto leave = decode(code);
    REQUIRE(leave);
    CHECK(leave->base == EpilogueStep::Base::Rbp);
    REQUIRE(leave->pops.size() == 1);
    CHECK(leave->pops[0].reg == kRbp);
    CHECK(leave->pops[0].base == EpilogueStep::Base::Rbp);
    CHECK(leave->pops[0].offset == 0);
    CHECK(leave->return_slot == 8);
  }

  // nopl 0(%rax,%rax); xchg %ax,%ax; endbr64; lea 0x10(%rsp),%rsp;
  // add $0x100,%rsp (imm32); xor %eax,%eax; mov %rax,%rdx; rep ret
  auto padded = decode({0x0f, 0x1f, 0x44, 0x00, 0x00, 0x66, 0x90, 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8d, 0x64, 0x24,
                        0x10, 0x48, 0x81, 0xc4, 0x00, 0x01, 0x00, 0x00, 0x31, 0xc0, 0x48, 0x89, 0xc2, 0xf3, 0xc3});
  REQUIRE(padded);
  CHECK(padded->return_slot == 0x110);
  CHECK(padded->instructions == 8);
}

TEST_CASE("epilogue: anything but a plain epilogue is refused") {
  const std::map<const char*, Bytes> refused = {
      {"empty", {}},
      {"no ret before the end", {0x48, 0x83, 0xc4, 0x08}},
      {"a call", {0xe8, 0, 0, 0, 0, 0xc3}},
      {"a jump", {0xeb, 0x00, 0xc3}},
      {"a conditional branch", {0x74, 0x02, 0xc3}},
      {"a load from memory", {0x48, 0x8b, 0x07, 0xc3}},
      {"mov into a callee-saved register", {0x48, 0x89, 0xc3, 0xc3}},
      {"xor of rbp", {0x31, 0xed, 0xc3}},
      {"pop %rsp", {0x5c, 0xc3}},
      {"leave after rbp was popped", {0x5d, 0xc9, 0xc3}},
      {"ret imm16", {0xc2, 0x08, 0x00}},
      {"rsp below where it was", {0x48, 0x83, 0xec, 0x08, 0xc3}},
      {"a cut instruction", {0x48, 0x81, 0xc4, 0x00}},
      {"a cut nop", {0x0f, 0x1f, 0x44}},
      {"a REX prefix alone", {0x48}},
  };
  for (const auto& [why, code] : refused) {
    INFO(why);
    CHECK(!decode(code));
  }
  // At most kMaxEpilogueInstructions, the ret included.
  Bytes nops(gsymprof::kMaxEpilogueInstructions - 1, 0x90);
  nops.push_back(0xc3);
  CHECK(decode(nops));
  nops.insert(nops.begin(), 0x90);
  CHECK(!decode(nops));
}

namespace {

// A stack whose frame 0 (exact pc 0x4000) and frame 1 (0x5000) lie in code
// no module holds; the code reader has the CPython trampoline's return at
// 0x4000, and a leave; ret at 0x5000.
struct JitStack {
  static constexpr uint64_t kStart = 0x7ffc0000;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(0x100, 0);
  void put(uint64_t addr, uint64_t value) { std::memcpy(&bytes[addr - kStart], &value, 8); }
  JitStack() {
    put(kStart + 0x10, 0x5000);          // frame 0 returns (rsp + 8) into frame 1
    put(kStart + 0x40, kStart + 0x80);   // frame 1's saved rbp (its rbp = kStart + 0x40)
    put(kStart + 0x48, 0x6000);          // frame 1 returns into frame 2
    put(kStart + 0x80, 0);               // frame 2: a frame-pointer chain that ends
    put(kStart + 0x88, 0);
  }
  gsymprof::StackView view(uint64_t bp) const { return {{0x4000, kStart + 8, bp}, kStart, bytes}; }
};

}  // namespace

TEST_CASE("cfi unwinder: code without CFI steps by its epilogue before the frame pointer") {
  JitStack s;
  auto nowhere = [](uint64_t) -> const gsymprof::UnwindModule* { return nullptr; };
  const Bytes trampoline = {0x48, 0x83, 0xc4, 0x08, 0xc3}, leave = {0xc9, 0xc3};
  int reads = 0;
  gsymprof::CodeReader code = [&](uint64_t addr) -> std::span<const uint8_t> {
    ++reads;
    if (addr == 0x4000) return trampoline;
    if (addr == 0x5000) return leave;
    return {};
  };
  gsymprof::CfiUnwinder unwinder;
  gsymprof::UnwindResult r;
  // rbp (kStart + 0x40) is frame 1's: a frame-pointer step from frame 0
  // would skip frame 1 (0x6000 next); its epilogue gives 0x5000, then
  // frame 1's leave; ret gives 0x6000, and frame 2 ends the chain.
  unwinder.unwind(s.view(JitStack::kStart + 0x40), nowhere, r, code);
  CHECK(r.ips == std::vector<uint64_t>{0x4000, 0x5000, 0x6000});
  CHECK(r.epilogue_steps == 2);
  CHECK(r.frame_pointer_steps == 0);
  CHECK(reads == 3);
  // Without a code reader: the frame pointer's answer, one frame short.
  unwinder.unwind(s.view(JitStack::kStart + 0x40), nowhere, r);
  CHECK(r.ips == std::vector<uint64_t>{0x4000, 0x6000});
  CHECK(r.epilogue_steps == 0);
  // A return slot past the copy: no step by the epilogue.
  gsymprof::StackView cut = s.view(JitStack::kStart + 0x40);
  cut.stack = std::span<const uint8_t>(s.bytes).first(0x10);
  gsymprof::CfiUnwinder strict({.frame_pointer_fallback = false});
  strict.unwind(cut, nowhere, r, code);
  CHECK(r.ips == std::vector<uint64_t>{0x4000});
  CHECK(r.stop == gsymprof::UnwindStop::NoModule);
}

namespace {

// Code of this very process, for the process table to read.
__attribute__((noinline)) int code_to_read(int x) { return x * 3 + 1; }

}  // namespace

TEST_CASE("process table: reads code of a running image only, within its executable mapping") {
  gsymprof::ProcessTable table(gsymprof::ProcSource::live());
  const uint32_t pid = static_cast<uint32_t>(getpid());
  const uint32_t id = table.current_image(pid);
  const auto at = reinterpret_cast<uint64_t>(&code_to_read);
  uint8_t got[16] = {};
  REQUIRE(table.read_code(id, at, got) == sizeof(got));
  CHECK(std::memcmp(got, reinterpret_cast<const void*>(&code_to_read), sizeof(got)) == 0);
  // Data is not code.
  static const uint64_t data = 42;
  CHECK(table.read_code(id, reinterpret_cast<uint64_t>(&data), got) == 0);
  // Without a memory reader (a recording), and once the process exited.
  gsymprof::ProcSource recorded = gsymprof::ProcSource::live();
  recorded.read_memory = nullptr;
  gsymprof::ProcessTable offline(recorded);
  CHECK(offline.read_code(offline.current_image(pid), at, got) == 0);
  table.note_exit(pid);
  CHECK(table.read_code(id, at, got) == 0);
}
