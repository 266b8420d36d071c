// Unit tests of the CFI unwinder and the stack snapshot format. Snapshots are
// captured from this very process (registers from a signal's ucontext, or
// read in place, plus a copy of the stack), then unwound without touching the
// live stack again; names come from the symbol tables (snapshot_support.h).
// The snapshot format and the leaf fix-up live in tests/support/.
#include <doctest/doctest.h>
#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include <elfutils/libdw.h>
#include <gelf.h>

#include "gsym/convert/elf_image.h"
#include "tests/support/leaf_fixup.h"
#include "tests/support/recorded_snapshot.h"
#include "tests/support/snapshot_support.h"
#include "userspace/unwind/cfi_unwinder.h"
#include "userspace/process/process_image.h"
#include "userspace/unwind/stack_copy_unwind.h"

using gsymprof::CfiUnwinder;
using gsymprof::LeafFixup;
using gsymprof::RecordedSnapshot;
using gsymprof::UnwindResult;
using gsymprof::UnwindStop;
using snapshot_support::join;
using snapshot_support::Namer;

#if defined(__clang__)
#define TEST_NOIPA __attribute__((noinline))
#else
#define TEST_NOIPA __attribute__((noinline, noipa))
#endif

namespace {

constexpr size_t kMaxCopy = 256 * 1024;

struct CaptureBuffer {
  gsymprof::UserRegisters regs;
  uint64_t stack_top = 0;
  uint8_t bytes[kMaxCopy];
  size_t size = 0;
};
CaptureBuffer* g_capture = nullptr;

// Byte by byte through volatile reads: no memcpy interceptor, and ASan
// must not flag the redzones of other frames it walks over.
__attribute__((no_sanitize("address", "undefined"))) void copy_stack(uint64_t sp) {
  size_t size = std::min<uint64_t>(kMaxCopy, g_capture->stack_top - sp);
  const volatile uint8_t* from = reinterpret_cast<const volatile uint8_t*>(sp);
  for (size_t i = 0; i < size; ++i) g_capture->bytes[i] = from[i];
  g_capture->size = size;
}

void on_signal_interrupted(int, siginfo_t*, void* context) {
  const mcontext_t& mc = static_cast<ucontext_t*>(context)->uc_mcontext;
  g_capture->regs = {static_cast<uint64_t>(mc.gregs[REG_RIP]), static_cast<uint64_t>(mc.gregs[REG_RSP]),
                     static_cast<uint64_t>(mc.gregs[REG_RBP])};
  copy_stack(g_capture->regs.sp);
}

}  // namespace

extern "C" {
// Registers as they are at this very instruction, then the stack above them:
// the unwind starts here and must cross the signal frame.
TEST_NOIPA void cfi_test_capture_here() {
  uint64_t ip, sp, bp;
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
  g_capture->regs = {ip, sp, bp};
  copy_stack(sp);
}
TEST_NOIPA void cfi_test_handler_in_place(int, siginfo_t*, void*) {
  cfi_test_capture_here();
  asm volatile("" ::: "memory");  // not a tail call: keep this frame
}

TEST_NOIPA int cfi_test_chain_c(int x) {
  raise(SIGUSR1);
  asm volatile("" ::: "memory");
  return x + 3;
}
TEST_NOIPA int cfi_test_chain_b(int x) { return cfi_test_chain_c(x * 2) + 1; }
TEST_NOIPA int cfi_test_chain_a(int x) { return cfi_test_chain_b(x + 1) + 1; }

// A variable-length array makes the compiler keep a frame pointer: the CFA is
// %rbp-based in its body.
TEST_NOIPA int cfi_test_vla_frame(int n) {
  volatile char buffer[n];
  buffer[0] = 1;
  return cfi_test_chain_a(buffer[0] + n) + 1;
}

// Two frames kept by frame pointers (VLAs), the inner one's frame address
// noted: the epilogue test below puts frame 0 at the inner one's `ret`.
uint64_t g_vla_inner_frame = 0;
TEST_NOIPA int cfi_test_vla_inner(int n) {
  volatile char buffer[n];
  buffer[0] = 2;
  g_vla_inner_frame = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  cfi_test_capture_here();
  return buffer[0] + n;
}
TEST_NOIPA int cfi_test_vla_outer(int n) {
  volatile char buffer[n];
  buffer[0] = 3;
  return cfi_test_vla_inner(buffer[0] + n) + 1;
}
}

namespace {

struct Captured {
  RecordedSnapshot snapshot;
  UnwindResult result;
  std::vector<std::string> names;
};

// Runs cfi_test_vla_frame -> chain_a -> chain_b -> chain_c -> raise with the
// given SIGUSR1 handler, and unwinds what the handler captured.
Captured capture(void (*handler)(int, siginfo_t*, void*)) {
  static CaptureBuffer buffer;
  g_capture = &buffer;
  auto stack = snapshot_support::find_mapping("self", "[stack]");
  REQUIRE(stack.has_value());
  buffer.stack_top = stack->second;

  struct sigaction action = {}, old = {};
  action.sa_sigaction = handler;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &action, &old) == 0);
  CHECK(cfi_test_vla_frame(4) > 0);
  sigaction(SIGUSR1, &old, nullptr);

  Captured c;
  c.snapshot.snapshot.regs = buffer.regs;
  c.snapshot.snapshot.stack_start = buffer.regs.sp;
  c.snapshot.snapshot.stack.assign(buffer.bytes, buffer.bytes + buffer.size);
  std::string error;
  REQUIRE_MESSAGE(snapshot_support::add_process_modules("self", c.snapshot, error), error);
  CfiUnwinder unwinder;
  c.result = unwinder.unwind(c.snapshot.snapshot.view(), c.snapshot.finder());
  c.names = Namer(c.snapshot).names(c.result.ips);
  return c;
}

size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) - names.begin();
}

bool in_module(const RecordedSnapshot& s, uint64_t addr, const std::string& basename) {
  const gsymprof::UnwindModule* m = s.find_module(addr);
  return m && m->elf_path.size() >= basename.size() &&
         m->elf_path.compare(m->elf_path.size() - basename.size(), basename.size(), basename) == 0;
}

const Captured& interrupted() {
  static Captured c = capture(on_signal_interrupted);
  return c;
}

}  // namespace

TEST_CASE("cfi unwinder: from an interrupted libc call through FP-less code to _start") {
  const Captured& c = interrupted();
  INFO("stack: " << join(c.names));
  CHECK(c.result.stop == UnwindStop::Complete);
  size_t chain_c = index_of(c.names, "cfi_test_chain_c");
  REQUIRE(chain_c < c.names.size());
  REQUIRE(chain_c + 4 < c.names.size());
  // The leaf and every frame up to chain_c are in libc (raise and its helpers).
  CHECK(chain_c >= 1);
  for (size_t i = 0; i < chain_c; ++i) CHECK(in_module(c.snapshot, c.result.ips[i] - (i > 0), "libc.so.6"));
  CHECK(c.names[chain_c + 1] == "cfi_test_chain_b");
  CHECK(c.names[chain_c + 2] == "cfi_test_chain_a");
  CHECK(c.names[chain_c + 3] == "cfi_test_vla_frame");
  CHECK(index_of(c.names, "main") < c.names.size());
  CHECK(c.names.back() == "_start");
}

TEST_CASE("cfi unwinder: interrupted at an epilogue's ret, below an rbp-based caller") {
  // At its `ret` the CFI still puts the saved rbp at CFA-16, now below
  // the stack pointer and outside the copy; the caller's CFA is rbp-based.
  static CaptureBuffer buffer;
  g_capture = &buffer;
  auto stack = snapshot_support::find_mapping("self", "[stack]");
  REQUIRE(stack.has_value());
  buffer.stack_top = stack->second;
  CHECK(cfi_test_vla_outer(8) > 0);
  RecordedSnapshot s;
  std::string error;
  REQUIRE_MESSAGE(snapshot_support::add_process_modules("self", s, error), error);

  // The inner function's `ret` after `leave` or `pop %rbp` (-O1 with ASan
  // pops), and the state at that `ret`: its frame popped, rsp at the
  // return address.
  const auto* code = reinterpret_cast<const uint8_t*>(&cfi_test_vla_inner);
  size_t at = 0;
  while (at < 512 && !((code[at] == 0xc9 || code[at] == 0x5d) && code[at + 1] == 0xc3)) ++at;
  REQUIRE(at < 512);
  const uint64_t frame = g_vla_inner_frame;
  REQUIRE(frame >= buffer.regs.sp);
  REQUIRE(frame + 16 <= buffer.regs.sp + buffer.size);
  uint64_t outer_bp = 0;
  std::memcpy(&outer_bp, buffer.bytes + (frame - buffer.regs.sp), 8);
  s.snapshot.regs = {reinterpret_cast<uint64_t>(code + at + 1), frame + 8, outer_bp};
  s.snapshot.stack_start = frame + 8;
  s.snapshot.stack.assign(buffer.bytes + (frame + 8 - buffer.regs.sp), buffer.bytes + buffer.size);

  // The code is read from the module's file; a process's memory reader
  // (here: this process's) is not needed, as when the process is gone.
  auto from_memory = [](uint64_t addr) { return std::span(reinterpret_cast<const uint8_t*>(addr), 64); };
  for (const gsymprof::CodeReader& read_code : {gsymprof::CodeReader{}, gsymprof::CodeReader(from_memory)}) {
    CfiUnwinder unwinder;
    UnwindResult r;
    unwinder.unwind(s.snapshot.view(), s.finder(), r, read_code);
    const std::vector<std::string> names = Namer(s).names(r.ips);
    INFO("with a code reader: " << bool(read_code) << ", stack: " << join(names));
    CHECK(r.stop == UnwindStop::Complete);
    REQUIRE(names.size() >= 3);
    CHECK(names[0] == "cfi_test_vla_inner");
    CHECK(names[1] == "cfi_test_vla_outer");
    CHECK(names.back() == "_start");
    CHECK(r.epilogue_steps == 0);  // counted only where no CFI covers the code
  }
}

TEST_CASE("cfi unwinder: crosses a signal frame") {
  Captured c = capture(cfi_test_handler_in_place);
  INFO("stack: " << join(c.names));
  CHECK(c.result.stop == UnwindStop::Complete);
  REQUIRE(c.names.size() > 4);
  CHECK(c.names[0] == "cfi_test_capture_here");
  CHECK(c.names[1] == "cfi_test_handler_in_place");
  // The handler returns to the first instruction of the signal trampoline.
  CHECK(Namer(c.snapshot).name(c.result.ips[2]) == "__restore_rt");
  // The frame after a signal frame is the interrupted instruction: the same
  // frames as when starting from the ucontext, up to the shared callers.
  const Captured& from_ucontext = interrupted();
  size_t vla = index_of(from_ucontext.names, "cfi_test_vla_frame");
  REQUIRE(vla < from_ucontext.names.size());
  REQUIRE(c.result.ips.size() > 3 + vla);
  CHECK(std::equal(from_ucontext.result.ips.begin(), from_ucontext.result.ips.begin() + vla + 1,
                   c.result.ips.begin() + 3));
}

TEST_CASE("cfi unwinder: a short stack copy stops with a prefix of the full stack") {
  const Captured& full = interrupted();
  REQUIRE(full.result.ips.size() > 6);
  CfiUnwinder unwinder;
  for (size_t size : {size_t{0}, size_t{7}, size_t{64}, size_t{512}}) {
    RecordedSnapshot s = full.snapshot;
    s.snapshot.stack.resize(size);
    UnwindResult r = unwinder.unwind(s.snapshot.view(), s.finder());
    INFO("copy of " << size << " bytes");
    CHECK(r.stop == UnwindStop::StackCopyTooSmall);
    REQUIRE(r.ips.size() < full.result.ips.size());
    CHECK(std::equal(r.ips.begin(), r.ips.end(), full.result.ips.begin()));
  }
  // The exact size of the used stack is enough.
  RecordedSnapshot s = full.snapshot;
  UnwindResult r;
  size_t lo = 0, hi = s.snapshot.stack.size();
  while (lo < hi) {  // the smallest copy that still completes
    size_t mid = (lo + hi) / 2;
    RecordedSnapshot t = full.snapshot;
    t.snapshot.stack.resize(mid);
    unwinder.unwind(t.snapshot.view(), t.finder(), r);
    if (r.stop == UnwindStop::Complete) hi = mid; else lo = mid + 1;
  }
  s.snapshot.stack.resize(lo);
  unwinder.unwind(s.snapshot.view(), s.finder(), r);
  CHECK(r.stop == UnwindStop::Complete);
  CHECK(r.ips == full.result.ips);
  s.snapshot.stack.resize(lo - 1);
  unwinder.unwind(s.snapshot.view(), s.finder(), r);
  CHECK(r.stop == UnwindStop::StackCopyTooSmall);
}

TEST_CASE("cfi unwinder: bytes below the copy are unreadable") {
  const Captured& full = interrupted();
  RecordedSnapshot s = full.snapshot;
  // Drop the first 4 KiB: the leaf's return address lies below the copy.
  s.snapshot.stack.erase(s.snapshot.stack.begin(), s.snapshot.stack.begin() + 4096);
  s.snapshot.stack_start += 4096;
  UnwindResult r = CfiUnwinder().unwind(s.snapshot.view(), s.finder());
  CHECK(r.stop == UnwindStop::UnreadableMemory);
  CHECK(r.ips == std::vector<uint64_t>{full.result.ips[0]});
}

// A stack of three frames linked by frame pointers, in code no module holds
// (JIT code): [bp] = the caller's bp, [bp + 8] = the return address.
struct FramePointerStack {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(0x100, 0);
  static constexpr uint64_t kStart = 0x7ffc0000;
  void put(uint64_t addr, uint64_t value) {
    for (int i = 0; i < 8; ++i) bytes[addr - kStart + i] = static_cast<uint8_t>(value >> (8 * i));
  }
  FramePointerStack() {
    put(kStart + 0x20, kStart + 0x60);  // frame 0's saved bp
    put(kStart + 0x28, 0x5000);         // return into frame 1
    put(kStart + 0x60, kStart + 0xa0);
    put(kStart + 0x68, 0x6000);         // return into frame 2
    put(kStart + 0xa0, 0);              // the chain ends: return address 0
  }
  gsymprof::StackView view(uint64_t bp) const {
    return {{0x4000, kStart + 8, bp}, kStart, bytes};
  }
};

TEST_CASE("cfi unwinder: frame-pointer fallback where no CFI covers the code") {
  FramePointerStack fp;
  auto nowhere = [](uint64_t) -> const gsymprof::UnwindModule* { return nullptr; };
  CfiUnwinder unwinder;
  UnwindResult r = unwinder.unwind(fp.view(FramePointerStack::kStart + 0x20), nowhere);
  CHECK(r.ips == std::vector<uint64_t>{0x4000, 0x5000, 0x6000});
  CHECK(r.frame_pointer_steps == 2);
  CHECK(r.stop == UnwindStop::NoModule);  // the last frame: no CFI, no frame pointer

  // bp that does not look like a frame of this stack: no step.
  for (uint64_t bad : {FramePointerStack::kStart + 0x21,     // misaligned
                       FramePointerStack::kStart,            // below sp
                       FramePointerStack::kStart + 0x100,    // the words lie past the copy
                       FramePointerStack::kStart - 0x1000})  // below the copy
  {
    r = unwinder.unwind(fp.view(bad), nowhere);
    CHECK(r.ips == std::vector<uint64_t>{0x4000});
    CHECK(r.frame_pointer_steps == 0);
  }
  // Turned off: stops at the first frame.
  CfiUnwinder strict({.frame_pointer_fallback = false});
  r = strict.unwind(fp.view(FramePointerStack::kStart + 0x20), nowhere);
  CHECK(r.ips == std::vector<uint64_t>{0x4000});
  CHECK(r.stop == UnwindStop::NoModule);
}

TEST_CASE("cfi unwinder: depth limit") {
  const Captured& full = interrupted();
  CfiUnwinder unwinder({.max_frames = 3});
  UnwindResult r = unwinder.unwind(full.snapshot.snapshot.view(), full.snapshot.finder());
  CHECK(r.stop == UnwindStop::DepthLimit);
  CHECK(r.ips == std::vector<uint64_t>(full.result.ips.begin(), full.result.ips.begin() + 3));
  // Exactly as many frames as the stack has is not a truncation.
  CfiUnwinder exact({.max_frames = full.result.ips.size()});
  r = exact.unwind(full.snapshot.snapshot.view(), full.snapshot.finder());
  CHECK(r.stop == UnwindStop::Complete);
  CHECK(r.ips == full.result.ips);
}

TEST_CASE("cfi unwinder: missing module, missing CFI, wrong build ID") {
  const Captured& full = interrupted();
  const auto& view = full.snapshot.snapshot.view();
  // Without the frame-pointer fallback (tested below), these stop at once.
  CfiUnwinder unwinder({.frame_pointer_fallback = false});

  UnwindResult r = unwinder.unwind(view, [](uint64_t) { return nullptr; });
  CHECK(r.stop == UnwindStop::NoModule);
  CHECK(r.ips == std::vector<uint64_t>{full.result.ips[0]});

  // libc's module with a bias that puts every address outside its FDEs.
  const gsymprof::UnwindModule* libc = full.snapshot.find_module(full.result.ips[0]);
  REQUIRE(libc != nullptr);
  gsymprof::UnwindModule shifted = *libc;
  shifted.load_bias -= uint64_t{1} << 40;
  r = unwinder.unwind(view, [&](uint64_t) { return &shifted; });
  CHECK(r.stop == UnwindStop::NoCfi);
  CHECK(r.ips.size() == 1);

  gsymprof::UnwindModule wrong_id = *libc;
  std::vector<uint8_t> id(wrong_id.build_id.bytes().begin(), wrong_id.build_id.bytes().end());
  REQUIRE(!id.empty());
  id[0] ^= 0xff;
  wrong_id.build_id = gsymprof::BuildId(id);
  r = unwinder.unwind(view, [&](uint64_t) { return &wrong_id; });
  CHECK(r.stop == UnwindStop::NoCfi);
  CHECK(unwinder.module_error(wrong_id).find("identity differs") != std::string::npos);

  gsymprof::UnwindModule missing{"/nonexistent/libnothing.so", {}, 0, {}, {}};
  r = unwinder.unwind(view, [&](uint64_t) { return &missing; });
  CHECK(r.stop == UnwindStop::NoCfi);
  CHECK(unwinder.module_error(missing).find("cannot open") != std::string::npos);
  // `shifted` shares libc's build ID, so it reuses libc's (good) CFI.
  CHECK(unwinder.stats().modules_failed == 2);

  // One module object changed between walks (as one freed and another made
  // at its address): the unwinder's memo of recent modules must see another
  // module, not the one it walked with before.
  gsymprof::UnwindModule reused = *libc;
  r = unwinder.unwind(view, [&](uint64_t addr) { return addr == full.result.ips[0] ? &reused : full.snapshot.find_module(addr); });
  CHECK(r.stop == UnwindStop::Complete);
  reused = wrong_id;
  r = unwinder.unwind(view, [&](uint64_t) { return &reused; });
  CHECK(r.stop == UnwindStop::NoCfi);
  CHECK(r.ips.size() == 1);  // not a step by the CFI of the module it was
  reused = *libc;
  r = unwinder.unwind(view, [&](uint64_t addr) { return addr == full.result.ips[0] ? &reused : full.snapshot.find_module(addr); });
  CHECK(r.stop == UnwindStop::Complete);
}

TEST_CASE("cfi unwinder: code without CFI at the ELF entry point is the stack's root") {
  // ld.so's _start and _dl_start_user: the first code of every dynamically
  // linked process, bare assembly without CFI.
  const std::string ldso = "/lib64/ld-linux-x86-64.so.2";
  auto image = gsym::ElfImage::open(ldso);
  if (!image.ok()) return;
  GElf_Ehdr ehdr;
  REQUIRE(gelf_getehdr(image->elf(), &ehdr));
  Dwarf_CFI* cfi = dwarf_getcfi_elf(image->elf());
  Dwarf_Frame* frame = nullptr;
  if (!cfi || dwarf_cfi_addrframe(cfi, ehdr.e_entry, &frame) == 0) {
    std::free(frame);
    if (cfi) dwarf_cfi_end(cfi);
    MESSAGE("ld.so's entry has CFI here: nothing to test");
    return;
  }
  dwarf_cfi_end(cfi);
  const uint64_t bias = uint64_t{0x7f12} << 32;
  const gsymprof::UnwindModule module{ldso, gsymprof::BuildId(image->build_id()), bias, {}, {}};
  std::vector<uint8_t> stack(64, 0);
  gsymprof::StackView view;
  view.regs.sp = view.stack_start = 0x7ffd00001000;
  view.stack = stack;
  CfiUnwinder unwinder;
  auto finder = [&](uint64_t) { return &module; };
  // The first instruction, and the return address of `call _dl_start`
  // (looked up at - 1) as the root of a longer walk would see it.
  for (uint64_t offset : {0, 8}) {
    view.regs.ip = bias + ehdr.e_entry + offset;
    UnwindResult r = unwinder.unwind(view, finder);
    CHECK(r.stop == UnwindStop::Complete);
    CHECK(r.ips == std::vector<uint64_t>{view.regs.ip});
  }
  // Code without CFI elsewhere is still a truncation: before the entry.
  view.regs.ip = bias + ehdr.e_entry - 1;
  Dwarf_CFI* again = dwarf_getcfi_elf(image->elf());
  const bool before_has_cfi = again && dwarf_cfi_addrframe(again, ehdr.e_entry - 1, &frame) == 0;
  if (before_has_cfi) std::free(frame);
  if (again) dwarf_cfi_end(again);
  UnwindResult before = unwinder.unwind(view, finder);
  if (!before_has_cfi) CHECK(before.stop == UnwindStop::NoCfi);
  view.regs.ip = bias + 0x10;  // the ELF header: no code, no CFI
  CHECK(unwinder.unwind(view, finder).stop == UnwindStop::NoCfi);
}

TEST_CASE("cfi unwinder: a frame pointer below the stack pointer is a loop") {
  const Captured& full = interrupted();
  // The return address into cfi_test_vla_frame: its CFA is %rbp-based there.
  size_t vla = index_of(full.names, "cfi_test_vla_frame");
  REQUIRE(vla < full.names.size());
  RecordedSnapshot s = full.snapshot;
  s.snapshot.regs.ip = full.result.ips[vla];
  s.snapshot.regs.bp = s.snapshot.regs.sp - 256;
  s.snapshot.stack_start = s.snapshot.regs.bp;
  s.snapshot.stack.insert(s.snapshot.stack.begin(), 256, 0x41);  // a non-zero "return address"
  CfiUnwinder unwinder;
  UnwindResult r = unwinder.unwind(s.snapshot.view(), s.finder());
  CHECK(r.stop == UnwindStop::Loop);
  CHECK(r.ips == std::vector<uint64_t>{full.result.ips[vla]});

  LeafFixup fixup = gsymprof::leaf_fixup(unwinder, s.snapshot.view(), s.finder());
  CHECK(fixup.kind == LeafFixup::Kind::FramePointerFrame);
}

TEST_CASE("cfi unwinder: leaf fix-up finds the caller at a function's entry") {
  const Captured& full = interrupted();
  size_t chain_b = index_of(full.names, "cfi_test_chain_b");
  REQUIRE(chain_b < full.names.size());
  // As if sampled on chain_c's first instruction, called from chain_b: the
  // return address is the only thing on the stack.
  RecordedSnapshot s = full.snapshot;
  s.snapshot.regs.ip = reinterpret_cast<uint64_t>(&cfi_test_chain_c);
  s.snapshot.regs.sp = 0x7ffd0000;
  s.snapshot.regs.bp = 0x12345;  // the caller's (irrelevant here)
  s.snapshot.stack_start = s.snapshot.regs.sp;
  s.snapshot.stack.assign(8, 0);
  for (int i = 0; i < 8; ++i) s.snapshot.stack[i] = static_cast<uint8_t>(full.result.ips[chain_b] >> (8 * i));
  CfiUnwinder unwinder;
  LeafFixup fixup = gsymprof::leaf_fixup(unwinder, s.snapshot.view(), s.finder());
  CHECK(fixup.kind == LeafFixup::Kind::ReturnAddressOnStack);
  CHECK(fixup.caller_ip == full.result.ips[chain_b]);

  s.snapshot.stack.clear();  // the slot is outside the copy
  CHECK(gsymprof::leaf_fixup(unwinder, s.snapshot.view(), s.finder()).kind == LeafFixup::Kind::Unknown);
  CHECK(gsymprof::leaf_fixup(unwinder, s.snapshot.view(), [](uint64_t) { return nullptr; }).kind ==
        LeafFixup::Kind::Unknown);
}

TEST_CASE("cfi unwinder: a sample in a PLT stub (CFA expression on %rip)") {
  const Captured& full = interrupted();
  const gsymprof::UnwindModule* exe = full.snapshot.find_module(reinterpret_cast<uint64_t>(&cfi_test_chain_c));
  REQUIRE(exe != nullptr);
  snapshot_support::ElfFile elf(exe->elf_path);
  REQUIRE(elf.ok());
  uint64_t plt = 0, plt_size = 0;
  size_t shstrndx = 0;
  REQUIRE(elf_getshdrstrndx(elf.elf, &shstrndx) == 0);
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf.elf, scn));) {
    GElf_Shdr sh;
    const char* name = gelf_getshdr(scn, &sh) ? elf_strptr(elf.elf, shstrndx, sh.sh_name) : nullptr;
    if (name && std::string(name) == ".plt") plt = sh.sh_addr, plt_size = sh.sh_size;
  }
  if (plt_size < 32) {
    MESSAGE("no lazy-binding .plt in the test binary; nothing to test");
    return;
  }
  size_t chain_b = index_of(full.names, "cfi_test_chain_b");
  REQUIRE(chain_b < full.names.size());
  const uint64_t return_address = full.result.ips[chain_b];
  CfiUnwinder unwinder;
  // Each stub is 16 bytes: jmp *GOT (6), push index (5), jmp PLT0 (5). After
  // the push, the return address is 8 bytes further up.
  for (uint64_t offset : {uint64_t{0}, uint64_t{6}, uint64_t{11}, uint64_t{15}}) {
    RecordedSnapshot s = full.snapshot;
    s.snapshot.regs.ip = plt + 16 + offset + exe->load_bias;
    s.snapshot.regs.sp = 0x7ffd0000;
    s.snapshot.stack_start = s.snapshot.regs.sp;
    const size_t slot = offset >= 11 ? 8 : 0;
    s.snapshot.stack.assign(slot + 8, 0xee);
    for (int i = 0; i < 8; ++i) s.snapshot.stack[slot + i] = static_cast<uint8_t>(return_address >> (8 * i));
    UnwindResult r = unwinder.unwind(s.snapshot.view(), s.finder());
    INFO("stub offset " << offset);
    REQUIRE(r.ips.size() == 2);
    CHECK(r.ips[1] == return_address);
    CHECK(r.stop == UnwindStop::StackCopyTooSmall);  // chain_b's frame is not in the copy
  }
}

TEST_CASE("cfi unwinder: garbage stacks end safely") {
  const Captured& full = interrupted();
  std::mt19937_64 random(12345);
  CfiUnwinder unwinder({.max_frames = 64});
  UnwindResult r;
  std::vector<uint64_t> code_addrs(full.result.ips);
  for (int round = 0; round < 3000; ++round) {
    RecordedSnapshot s = full.snapshot;
    auto& bytes = s.snapshot.stack;
    bytes.resize(random() % 4096);
    for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
      // A mix of zeros, random words, code addresses and stack addresses.
      uint64_t word = 0;
      switch (random() % 4) {
        case 0: break;
        case 1: word = random(); break;
        case 2: word = code_addrs[random() % code_addrs.size()] + random() % 64; break;
        case 3: word = s.snapshot.stack_start + random() % 8192; break;
      }
      std::memcpy(&bytes[i], &word, 8);
    }
    s.snapshot.regs.ip = code_addrs[random() % code_addrs.size()] + random() % 256;
    s.snapshot.regs.bp = s.snapshot.stack_start + random() % 8192 - 4096;
    unwinder.unwind(s.snapshot.view(), s.finder(), r);
    REQUIRE(!r.ips.empty());
    REQUIRE(r.ips.size() <= 64);
    CHECK(r.ips[0] == s.snapshot.regs.ip);
  }
}

// The unwinder keeps each module's decoded rows and, in front of them, a
// small direct-mapped array of recent ones: a long-lived unwinder that has
// seen thousands of addresses (colliding in that array) must walk every
// stack as a new one does.
TEST_CASE("cfi unwinder: a warm unwinder walks as a cold one") {
  const Captured& full = interrupted();
  std::mt19937_64 random(2024);
  CfiUnwinder warm({.max_frames = 64});
  UnwindResult warm_result, cold_result;
  std::vector<uint64_t> code_addrs(full.result.ips);
  for (int round = 0; round < 400; ++round) {
    RecordedSnapshot s = full.snapshot;
    // The real stack with a random leaf (any instruction near a frame's
    // address): the walk goes through rows of many addresses.
    s.snapshot.regs.ip = code_addrs[random() % code_addrs.size()] - random() % 512;
    CfiUnwinder cold({.max_frames = 64});
    cold.unwind(s.snapshot.view(), s.finder(), cold_result);
    warm.unwind(s.snapshot.view(), s.finder(), warm_result);
    REQUIRE(warm_result.ips == cold_result.ips);
    REQUIRE(warm_result.stop == cold_result.stop);
  }
  // The real stack, after all that, still walks whole.
  warm.unwind(full.snapshot.snapshot.view(), full.snapshot.finder(), warm_result);
  CHECK(warm_result.ips == full.result.ips);
}

TEST_CASE("cfi unwinder: concurrent unwinds agree") {
  const Captured& full = interrupted();
  CfiUnwinder unwinder;
  std::vector<std::thread> threads;
  std::vector<int> agreed(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      UnwindResult r;
      for (int i = 0; i < 200; ++i) {
        unwinder.unwind(full.snapshot.snapshot.view(), full.snapshot.finder(), r);
        agreed[t] += r.ips == full.result.ips && r.stop == UnwindStop::Complete;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(agreed == std::vector<int>(4, 200));
  CHECK(unwinder.stats().modules_opened >= 2);
}

TEST_CASE("stack snapshot: file round trip and replay") {
  const Captured& full = interrupted();
  char dir[] = "/tmp/snapshot-test-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/s.snap";
  REQUIRE(gsymprof::write_snapshot_file(path, full.snapshot).ok());
  auto read = gsymprof::read_snapshot_file(path);
  std::remove(path.c_str());
  rmdir(dir);
  REQUIRE(read.ok());
  CHECK(*read == full.snapshot);
  UnwindResult r = CfiUnwinder().unwind(read->snapshot.view(), read->finder());
  CHECK(r.ips == full.result.ips);
  CHECK(r.stop == UnwindStop::Complete);
}

TEST_CASE("stack snapshot: every truncation and corruption is a clean error") {
  RecordedSnapshot s;
  s.snapshot.regs = {0x401000, 0x7ffd1000, 0x7ffd1040};
  s.snapshot.stack_start = 0x7ffd1000;
  s.snapshot.stack = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  s.modules.push_back({"/bin/true", *gsymprof::BuildId::from_hex("0011aabb"), 0x1000, {}, {}});
  s.modules.push_back({"/lib/libx.so", {}, 0x7f0000000000, {}, {}});
  s.mappings = {{0x401000, 0x402000, 0}, {0x7f0000001000, 0x7f0000002000, 1}};
  auto bytes = gsymprof::serialize_snapshot(s);
  REQUIRE(bytes.ok());
  auto back = gsymprof::parse_snapshot(*bytes);
  REQUIRE(back.ok());
  CHECK(*back == s);
  CHECK(back->find_module(0x401fff) == &back->modules[0]);
  CHECK(back->find_module(0x402000) == nullptr);
  CHECK(back->find_module(0x7f0000001000) == &back->modules[1]);
  CHECK(back->find_module(0) == nullptr);

  for (size_t n = 0; n < bytes->size(); ++n) {
    auto cut = gsymprof::parse_snapshot(std::span(bytes->data(), n));
    REQUIRE_FALSE(cut.ok());
    CHECK(cut.error().message.rfind("stack snapshot: ", 0) == 0);
  }
  auto longer = *bytes;
  longer.push_back(0);
  CHECK(gsymprof::parse_snapshot(longer).error().message == "stack snapshot: trailing bytes");

  auto corrupt = *bytes;
  corrupt[0] = 'X';
  CHECK(gsymprof::parse_snapshot(corrupt).error().message == "stack snapshot: bad magic (not a stack snapshot)");
  corrupt = *bytes;
  corrupt[8] = 2;
  CHECK(gsymprof::parse_snapshot(corrupt).error().message == "stack snapshot: unsupported version 2");
  corrupt = *bytes;
  corrupt[48 + 3] = 0x7f;  // stack size 2 GiB
  CHECK(gsymprof::parse_snapshot(corrupt).error().message == "stack snapshot: stack copy too large");

  for (size_t at : {size_t{12}, size_t{60}, bytes->size() - 4}) {
    corrupt = *bytes;
    corrupt[at] = 1;
    CHECK(gsymprof::parse_snapshot(corrupt).error().message == "stack snapshot: reserved field not zero");
  }

  RecordedSnapshot unsorted = s;
  std::swap(unsorted.mappings[0], unsorted.mappings[1]);
  CHECK_FALSE(gsymprof::serialize_snapshot(unsorted).ok());
  RecordedSnapshot dangling = s;
  dangling.mappings[1].module = 7;
  CHECK_FALSE(gsymprof::serialize_snapshot(dangling).ok());
  // The same faults written by hand are refused by the parser.
  auto swapped = *bytes;
  size_t mappings_at = swapped.size() - 48;
  std::swap_ranges(swapped.begin() + mappings_at, swapped.begin() + mappings_at + 24,
                   swapped.begin() + mappings_at + 24);
  CHECK(gsymprof::parse_snapshot(swapped).error().message ==
        "stack snapshot: mappings unsorted or overlapping");
  auto bad_index = *bytes;
  bad_index[bad_index.size() - 8] = 9;
  CHECK(gsymprof::parse_snapshot(bad_index).error().message ==
        "stack snapshot: mapping names a missing module");
  CHECK(gsymprof::read_snapshot_file("/nonexistent/x.snap").error().message ==
        "/nonexistent/x.snap: cannot open");
}

TEST_CASE("stack copy unwinder: a sample of this process, through its process image") {
  const Captured& full = interrupted();
  // Maps without libc first (as if read while the dynamic loader ran), the
  // real ones from the second read on.
  int reads = 0;
  gsymprof::ProcSource source = gsymprof::ProcSource::live();
  auto live_maps = source.read_maps;
  source.read_maps = [&](uint32_t pid) -> gsym::Expected<std::string> {
    auto text = live_maps(pid);
    if (!text || reads++ > 0) return text;
    std::string without_libc, line;
    std::istringstream in(*text);
    while (std::getline(in, line))
      if (line.find("libc.so") == std::string::npos) without_libc += line + "\n";
    return without_libc;
  };
  gsymprof::ProcessTable processes(source);
  processes.min_interval = std::chrono::hours(1);  // no re-read for now
  gsymprof::StackCopyUnwinder unwinder(processes);

  gsymprof::RawStackCopy copy;
  copy.pid = static_cast<uint32_t>(getpid());
  copy.tid = copy.pid;
  copy.comm = "unit_tests";
  copy.stack = full.snapshot.snapshot.view();
  std::vector<std::vector<uint64_t>> emitted;
  std::vector<bool> truncated;
  std::vector<uint64_t> times;
  auto collect = [&](const gsymprof::RawSample& s) {
    emitted.emplace_back(s.ips.begin(), s.ips.end());
    truncated.push_back(s.truncated);
    times.push_back(s.time_ns);
    CHECK(s.comm == "unit_tests");
  };
  // The leaf is in libc, unknown to the first read, and the maps may not be
  // read again yet: the walk is held.
  copy.time_ns = 100;
  unwinder.unwind(copy, collect);
  CHECK(emitted.empty());
  CHECK(reads == 1);
  // Re-reads allowed: the next walk reads the maps again and completes...
  processes.min_interval = std::chrono::milliseconds(0);
  copy.time_ns = 200;
  unwinder.unwind(copy, collect);
  CHECK(reads == 2);
  REQUIRE(emitted.size() == 1);
  // ...and the one after first finishes the held walk, which keeps the
  // time it was taken at.
  copy.time_ns = 300;
  unwinder.unwind(copy, collect);
  REQUIRE(emitted.size() == 3);
  CHECK(times == std::vector<uint64_t>{200, 100, 300});
  for (size_t i = 0; i < 3; ++i) {
    CHECK(emitted[i] == full.result.ips);
    CHECK_FALSE(truncated[i]);
  }
  CHECK(unwinder.retried() == 1);
  CHECK(unwinder.truncations().at("unwind_no_module") == 0);

  // With re-reads rate-limited, a walk into an unmapped address is held,
  // retried at flush(), and emitted truncated when still unmapped.
  processes.min_interval = std::chrono::hours(1);
  RecordedSnapshot s = full.snapshot;
  s.snapshot.regs.ip = 0x10;  // mapped nowhere
  s.snapshot.regs.bp = 0;     // and no frame pointer to fall back on
  copy.stack = s.snapshot.view();
  copy.time_ns = 400;
  unwinder.unwind(copy, collect);
  CHECK(emitted.size() == 3);
  unwinder.flush(collect);
  REQUIRE(emitted.size() == 4);
  CHECK(times.back() == 400);
  CHECK(emitted[3] == std::vector<uint64_t>{0x10});
  CHECK(truncated[3]);
  CHECK(unwinder.truncations().at("unwind_no_module") == 1);
  CHECK(unwinder.stacks() == 4);
}

TEST_CASE("stack copy unwinder: held walks are bounded in bytes") {
  const Captured& full = interrupted();
  gsymprof::ProcessTable processes(gsymprof::ProcSource::live());
  processes.min_interval = std::chrono::hours(1);  // no re-read: walks stay held
  gsymprof::StackCopyUnwinder unwinder(processes);
  // A 1 MiB copy (the largest a record carries) whose leaf is mapped nowhere.
  std::vector<uint8_t> big(size_t{1} << 20);
  gsymprof::RawStackCopy copy;
  copy.pid = static_cast<uint32_t>(getpid());
  copy.tid = copy.pid;
  copy.comm = "unit_tests";
  copy.stack = full.snapshot.snapshot.view();
  copy.stack.regs.ip = 0x10;
  copy.stack.regs.bp = 0;
  copy.stack.stack = big;
  size_t emitted = 0;
  auto collect = [&](const gsymprof::RawSample& s) {
    ++emitted;
    CHECK(s.truncated);
  };
  const size_t fit = gsymprof::StackCopyUnwinder::kMaxHeldBytes / big.size();
  for (size_t i = 0; i < fit + 5; ++i) unwinder.unwind(copy, collect);
  CHECK(unwinder.held_bytes() == fit * big.size());
  CHECK(emitted == 5);  // the walks that did not fit went out at once
  unwinder.flush(collect);
  CHECK(emitted == fit + 5);
  CHECK(unwinder.held_bytes() == 0);
  CHECK(unwinder.truncations().at("unwind_no_module") == fit + 5);
}
