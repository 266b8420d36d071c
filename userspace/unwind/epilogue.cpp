#include "userspace/unwind/epilogue.h"

#include <array>
#include <cstring>

namespace gsymprof {
namespace {

// DWARF register number of each x86-64 hardware register encoding.
constexpr std::array<int, 16> kDwarfOf = {0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr int kHwRsp = 4, kHwRbp = 5, kHwRbx = 3;

// A register the caller expects back (the ABI's callee-saved ones, and the
// stack pointer): an instruction that writes one other than by the moves
// decoded explicitly leaves the caller's registers unknown.
bool preserved(int hw) { return hw == kHwRbx || hw == kHwRsp || hw == kHwRbp || hw >= 12; }

// Bytes of a ModRM operand (ModRM, SIB and displacement) at `code`, or 0
// when they run past the end.
size_t modrm_length(std::span<const uint8_t> code) {
  if (code.empty()) return 0;
  const uint8_t modrm = code[0];
  const int mod = modrm >> 6, rm = modrm & 7;
  size_t length = 1;
  if (mod != 3 && rm == 4) {
    if (code.size() < 2) return 0;
    const bool sib_disp32 = mod == 0 && (code[1] & 7) == 5;
    length += 1 + (sib_disp32 ? 4 : 0);
  } else if (mod == 0 && rm == 5) {
    length += 4;  // rip-relative
  }
  if (mod == 1) length += 1;
  if (mod == 2) length += 4;
  return length <= code.size() ? length : 0;
}

int32_t read_imm32(std::span<const uint8_t> code) {
  int32_t v = 0;
  std::memcpy(&v, code.data(), sizeof(v));  // x86-64: little-endian
  return v;
}

class Decoder {
 public:
  explicit Decoder(std::span<const uint8_t> code) : code_(code) {}

  std::optional<EpilogueStep> run() {
    while (step_.instructions < kMaxEpilogueInstructions) {
      ++step_.instructions;
      switch (next()) {
        case Next::Ret:
          step_.return_slot = offset_;
          return step_;
        case Next::Continue: break;
        case Next::Stop: return std::nullopt;
      }
    }
    return std::nullopt;
  }

 private:
  enum class Next : uint8_t { Continue, Ret, Stop };

  bool take(size_t n) {
    if (code_.size() - at_ < n) return false;
    at_ += n;
    return true;
  }
  std::span<const uint8_t> rest() const { return code_.subspan(at_); }

  Next pop(int hw) {
    if (hw == kHwRsp) return Next::Stop;
    if (hw == kHwRbp) rbp_popped_ = true;
    step_.pops.push_back({kDwarfOf[hw], step_.base, offset_});
    offset_ += 8;
    return Next::Continue;
  }
  // rsp = rbp: what follows is relative to the frame pointer, which must
  // still be the callee's.
  Next rsp_from_rbp() {
    if (rbp_popped_) return Next::Stop;
    step_.base = EpilogueStep::Base::Rbp;
    offset_ = 0;
    return Next::Continue;
  }
  Next adjust(int64_t by) {
    offset_ += by;
    return offset_ >= 0 && offset_ < (int64_t{1} << 20) ? Next::Continue : Next::Stop;
  }

  Next next() {
    std::span<const uint8_t> c = rest();
    if (c.empty()) return Next::Stop;
    // endbr64, and the multi-byte nops compilers pad with.
    if (c.size() >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) return take(4) ? Next::Continue : Next::Stop;
    if (c[0] == 0x90) return take(1) ? Next::Continue : Next::Stop;
    size_t prefixes = 0;
    while (prefixes < c.size() && c[prefixes] == 0x66) ++prefixes;
    if (c.size() >= prefixes + 3 && c[prefixes] == 0x0f && c[prefixes + 1] == 0x1f) {
      const size_t operand = modrm_length(c.subspan(prefixes + 2));
      if (operand == 0 || (c[prefixes + 2] >> 3 & 7) != 0) return Next::Stop;
      return take(prefixes + 2 + operand) ? Next::Continue : Next::Stop;
    }
    if (prefixes == 1 && c.size() >= 2 && c[1] == 0x90) return take(2) ? Next::Continue : Next::Stop;
    if (prefixes) return Next::Stop;

    if (c[0] == 0xc3) return take(1) ? Next::Ret : Next::Stop;
    if (c.size() >= 2 && c[0] == 0xf3 && c[1] == 0xc3) return take(2) ? Next::Ret : Next::Stop;
    if (c[0] >= 0x58 && c[0] <= 0x5f) return take(1) ? pop(c[0] - 0x58) : Next::Stop;
    if (c[0] == 0xc9) {  // leave: mov %rbp,%rsp; pop %rbp
      if (!take(1) || rsp_from_rbp() == Next::Stop) return Next::Stop;
      return pop(kHwRbp);
    }

    // REX prefix, then one of the opcodes below.
    uint8_t rex = 0;
    if ((c[0] & 0xf0) == 0x40) {
      rex = c[0];
      c = c.subspan(1);
      if (c.empty()) return Next::Stop;
    }
    const bool wide = rex & 0x8;
    const int rex_r = rex & 0x4 ? 8 : 0, rex_b = rex & 0x1 ? 8 : 0;
    const size_t rex_len = rex ? 1 : 0;
    if (c[0] >= 0x58 && c[0] <= 0x5f && !wide && !rex_r) return take(rex_len + 1) ? pop(c[0] - 0x58 + rex_b) : Next::Stop;
    if (c.size() < 2) return Next::Stop;
    const uint8_t modrm = c[1];
    const int mod = modrm >> 6, reg = (modrm >> 3 & 7) + rex_r, rm = (modrm & 7) + rex_b;
    // add/sub $imm, %rsp
    if (wide && (c[0] == 0x83 || c[0] == 0x81) && mod == 3 && rm == kHwRsp && (reg == 0 || reg == 5)) {
      const size_t imm_len = c[0] == 0x83 ? 1 : 4;
      if (c.size() < 2 + imm_len) return Next::Stop;
      const int64_t imm = c[0] == 0x83 ? static_cast<int8_t>(c[2]) : read_imm32(c.subspan(2));
      if (!take(rex_len + 2 + imm_len)) return Next::Stop;
      return adjust(reg == 0 ? imm : -imm);
    }
    // lea disp(%rsp), %rsp
    if (wide && c[0] == 0x8d && reg == kHwRsp && (mod == 1 || mod == 2) && (modrm & 7) == 4 && !rex_b) {
      if (c.size() < 3 || c[2] != 0x24) return Next::Stop;  // SIB: base rsp, no index
      const size_t disp_len = mod == 1 ? 1 : 4;
      if (c.size() < 3 + disp_len) return Next::Stop;
      const int64_t disp = mod == 1 ? static_cast<int8_t>(c[3]) : read_imm32(c.subspan(3));
      if (!take(rex_len + 3 + disp_len)) return Next::Stop;
      return adjust(disp);
    }
    // Register to register: mov (89, 8b), xor (31, 33).
    if ((c[0] == 0x89 || c[0] == 0x8b || c[0] == 0x31 || c[0] == 0x33) && mod == 3) {
      const bool to_rm = c[0] == 0x89 || c[0] == 0x31;
      const int destination = to_rm ? rm : reg, source = to_rm ? reg : rm;
      if (!take(rex_len + 2)) return Next::Stop;
      if (c[0] == 0x89 || c[0] == 0x8b) {
        if (wide && destination == kHwRsp && source == kHwRbp) return rsp_from_rbp();
      }
      return preserved(destination) ? Next::Stop : Next::Continue;
    }
    return Next::Stop;
  }

  std::span<const uint8_t> code_;
  size_t at_ = 0;
  int64_t offset_ = 0;  // from the current base
  bool rbp_popped_ = false;
  EpilogueStep step_;
};

}  // namespace

std::optional<EpilogueStep> decode_epilogue(std::span<const uint8_t> code) { return Decoder(code).run(); }

}  // namespace gsymprof
