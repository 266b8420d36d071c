#include "userspace/unwind/cfi_unwinder.h"

#include "userspace/unwind/epilogue.h"
#include "userspace/unwind/jit_eh_frame.h"

#include "gsym/convert/elf_handle.h"
#include "gsym/convert/elf_image.h"
#include "gsym/base/file_io.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <optional>
#include <unordered_map>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gsymprof {

const char* to_string(UnwindStop stop) {
  switch (stop) {
    case UnwindStop::Complete: return "complete";
    case UnwindStop::StackCopyTooSmall: return "stack copy too small";
    case UnwindStop::NoCfi: return "no CFI for module";
    case UnwindStop::NoModule: return "no module";
    case UnwindStop::UnreadableMemory: return "unreadable memory";
    case UnwindStop::BadCfi: return "bad CFI";
    case UnwindStop::DepthLimit: return "depth limit";
    case UnwindStop::Loop: return "loop";
  }
  return "unknown";
}

namespace {

// DWARF register numbers on x86-64.
constexpr int kRbp = 6, kRsp = 7, kReturnAddress = 16;
constexpr int kRegisterCount = 17;
// Registers worth carrying from frame to frame: callee-saved ones (CFA rules
// may use them, e.g. %rbp) and the stack pointer. Caller-saved registers are
// undefined after a call, so recovering them buys nothing.
constexpr std::array<int, 7> kTrackedRegisters = {3, kRbp, kRsp, 12, 13, 14, 15};

constexpr size_t kMaxExpressionOps = 64;
constexpr size_t kMaxExpressionStack = 16;

struct Registers {
  std::array<uint64_t, kRegisterCount> value{};
  uint32_t known = 0;  // bit per register

  bool has(uint64_t reg) const { return reg < kRegisterCount && (known >> reg & 1); }
  void set(int reg, uint64_t v) {
    value[reg] = v;
    known |= 1u << reg;
  }
};

enum class Eval : uint8_t { Ok, TooSmall, Unreadable, Bad };

UnwindStop stop_for(Eval e) {
  switch (e) {
    case Eval::TooSmall: return UnwindStop::StackCopyTooSmall;
    case Eval::Unreadable: return UnwindStop::UnreadableMemory;
    default: return UnwindStop::BadCfi;
  }
}

// Reads `size` bytes at runtime address `addr`, only from the copied stack.
Eval read_stack(const StackView& stack, uint64_t addr, size_t size, uint64_t& out) {
  if (size > sizeof(out)) return Eval::Bad;
  if (addr < stack.stack_start) return Eval::Unreadable;
  uint64_t offset = addr - stack.stack_start;
  if (offset > stack.stack.size() || stack.stack.size() - offset < size) return Eval::TooSmall;
  out = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&out, stack.stack.data() + offset, size);  // size <= 8: the low bytes
    return Eval::Ok;
  }
  for (size_t i = 0; i < size; ++i) out |= static_cast<uint64_t>(stack.stack[offset + i]) << (8 * i);
  return Eval::Ok;
}

// The operand stack of one DWARF expression: bounded, on the caller's stack.
struct OperandStack {
  std::array<uint64_t, kMaxExpressionStack> slot;
  size_t depth = 0;

  bool push(uint64_t v) {
    if (depth == slot.size()) return false;
    slot[depth++] = v;
    return true;
  }
  uint64_t& top() { return slot[depth - 1]; }
};

// Operations that push a value: literals, constants, registers plus an
// offset, the CFA. False for any other operation.
bool is_push(uint8_t a) {
  switch (a) {
    case DW_OP_bregx: case DW_OP_call_frame_cfa: case DW_OP_addr: case DW_OP_const1u:
    case DW_OP_const2u: case DW_OP_const4u: case DW_OP_const8u: case DW_OP_constu:
    case DW_OP_const1s: case DW_OP_const2s: case DW_OP_const4s: case DW_OP_const8s:
    case DW_OP_consts:
      return true;
    default:
      return (a >= DW_OP_lit0 && a <= DW_OP_lit31) || (a >= DW_OP_breg0 && a <= DW_OP_breg31);
  }
}

Eval push_operand(const Dwarf_Op& op, const Registers& regs, const std::optional<uint64_t>& cfa,
                  OperandStack& st) {
  const uint8_t a = op.atom;
  uint64_t value = 0;
  if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
    value = a - DW_OP_lit0;
  } else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
    if (!regs.has(a - DW_OP_breg0)) return Eval::Unreadable;
    value = regs.value[a - DW_OP_breg0] + op.number;  // number holds the signed offset
  } else if (a == DW_OP_bregx) {
    if (!regs.has(op.number)) return Eval::Unreadable;
    value = regs.value[op.number] + op.number2;
  } else if (a == DW_OP_call_frame_cfa) {
    if (!cfa) return Eval::Bad;
    value = *cfa;
  } else {
    value = op.number;  // the constants: libdw sign-extends the signed forms
  }
  return st.push(value) ? Eval::Ok : Eval::Bad;
}

// DW_OP_deref, DW_OP_deref_size: replaces the address on top by the bytes
// there, read only from the copied stack.
Eval dereference(const Dwarf_Op& op, const StackView& stack, OperandStack& st) {
  if (st.depth < 1) return Eval::Bad;
  size_t size = op.atom == DW_OP_deref ? 8 : op.number;
  if (size == 0 || size > 8) return Eval::Bad;
  uint64_t v = 0;
  if (Eval e = read_stack(stack, st.top(), size, v); e != Eval::Ok) return e;
  st.top() = v;
  return Eval::Ok;
}

// Binary operators: pop b, pop a, push a OP b.
Eval apply_binary(uint8_t a, OperandStack& st) {
  if (st.depth < 2) return Eval::Bad;
  uint64_t b = st.slot[st.depth - 1], x = st.slot[st.depth - 2];
  int64_t sb = static_cast<int64_t>(b), sx = static_cast<int64_t>(x);
  uint64_t r = 0;
  switch (a) {
    case DW_OP_plus: r = x + b; break;
    case DW_OP_minus: r = x - b; break;
    case DW_OP_mul: r = x * b; break;
    case DW_OP_and: r = x & b; break;
    case DW_OP_or: r = x | b; break;
    case DW_OP_xor: r = x ^ b; break;
    case DW_OP_shl: r = b >= 64 ? 0 : x << b; break;
    case DW_OP_shr: r = b >= 64 ? 0 : x >> b; break;
    case DW_OP_shra: r = static_cast<uint64_t>(sx >> (b >= 64 ? 63 : b)); break;
    case DW_OP_div:
      if (b == 0 || (sx == INT64_MIN && sb == -1)) return Eval::Bad;
      r = static_cast<uint64_t>(sx / sb);
      break;
    case DW_OP_mod:
      if (b == 0) return Eval::Bad;
      r = x % b;
      break;
    case DW_OP_eq: r = sx == sb; break;
    case DW_OP_ne: r = sx != sb; break;
    case DW_OP_lt: r = sx < sb; break;
    case DW_OP_gt: r = sx > sb; break;
    case DW_OP_le: r = sx <= sb; break;
    case DW_OP_ge: r = sx >= sb; break;
    default: return Eval::Bad;  // branches, TLS, registers as locations, ...
  }
  --st.depth;
  st.top() = r;
  return Eval::Ok;
}

// Stack manipulation, unary and binary operators.
Eval apply_operator(const Dwarf_Op& op, OperandStack& st) {
  const size_t depth = st.depth;
  switch (op.atom) {
    case DW_OP_dup:
      if (depth < 1) return Eval::Bad;
      return st.push(st.top()) ? Eval::Ok : Eval::Bad;
    case DW_OP_drop:
      if (depth < 1) return Eval::Bad;
      --st.depth;
      return Eval::Ok;
    case DW_OP_over:
      if (depth < 2) return Eval::Bad;
      return st.push(st.slot[depth - 2]) ? Eval::Ok : Eval::Bad;
    case DW_OP_pick:
      if (op.number >= depth) return Eval::Bad;
      return st.push(st.slot[depth - 1 - op.number]) ? Eval::Ok : Eval::Bad;
    case DW_OP_swap:
      if (depth < 2) return Eval::Bad;
      std::swap(st.slot[depth - 1], st.slot[depth - 2]);
      return Eval::Ok;
    case DW_OP_rot:
      if (depth < 3) return Eval::Bad;
      std::swap(st.slot[depth - 1], st.slot[depth - 2]);
      std::swap(st.slot[depth - 2], st.slot[depth - 3]);
      return Eval::Ok;
    case DW_OP_plus_uconst:
    case DW_OP_neg:
    case DW_OP_not:
    case DW_OP_abs: {
      if (depth < 1) return Eval::Bad;
      uint64_t& v = st.top();
      if (op.atom == DW_OP_plus_uconst) v += op.number;
      else if (op.atom == DW_OP_neg) v = 0 - v;
      else if (op.atom == DW_OP_not) v = ~v;
      else if (static_cast<int64_t>(v) < 0) v = 0 - v;  // DW_OP_abs
      return Eval::Ok;
    }
    default:
      return apply_binary(op.atom, st);
  }
}

// Evaluates a CFI DWARF expression as libdw hands it out. `cfa` feeds
// DW_OP_call_frame_cfa (absent while computing the CFA itself). On Ok,
// `is_value` tells whether the result is the value (DW_OP_stack_value, or a
// register) or the address where the value is saved.
Eval evaluate(const Dwarf_Op* ops, size_t nops, const Registers& regs, const StackView& stack,
              const std::optional<uint64_t>& cfa, uint64_t& result, bool& is_value) {
  is_value = false;
  if (nops == 0 || nops > kMaxExpressionOps) return Eval::Bad;
  // The register rule "saved in register N" arrives as a lone DW_OP_regx.
  if (nops == 1 && (ops[0].atom == DW_OP_regx ||
                    (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31))) {
    uint64_t reg = ops[0].atom == DW_OP_regx ? ops[0].number : ops[0].atom - DW_OP_reg0;
    if (!regs.has(reg)) return Eval::Unreadable;
    result = regs.value[reg];
    is_value = true;
    return Eval::Ok;
  }

  OperandStack st;
  for (size_t i = 0; i < nops; ++i) {
    const Dwarf_Op& op = ops[i];
    if (op.atom == DW_OP_nop) continue;
    Eval e = Eval::Ok;
    if (op.atom == DW_OP_stack_value) {
      if (i + 1 != nops) return Eval::Bad;
      is_value = true;
    } else if (op.atom == DW_OP_deref || op.atom == DW_OP_deref_size) {
      e = dereference(op, stack, st);
    } else if (is_push(op.atom)) {
      e = push_operand(op, regs, cfa, st);
    } else {
      e = apply_operator(op, st);
    }
    if (e != Eval::Ok) return e;
  }
  if (st.depth < 1) return Eval::Bad;
  result = st.top();
  return Eval::Ok;
}

enum class Rule : uint8_t { Value, Undefined, SameValue, Failed };

// One register's rule in a CFI row, as libdw hands it out: a DWARF
// expression (ops[begin, begin + count) of its row), or no expression
// (undefined, same value), or libdw could not say.
struct RegisterRule {
  enum Kind : uint8_t { Expression, Undefined, SameValue, Error } kind = Error;
  uint16_t begin = 0, count = 0;
  // The two expressions nearly every row is made of, worked out without the
  // interpreter (a third of the reader's time went to it): the CFA as
  // register + offset (DW_OP_bregN), a saved register at CFA + offset
  // (DW_OP_call_frame_cfa, DW_OP_plus_uconst). `value`: DW_OP_stack_value,
  // the address itself is the value.
  enum class Form : uint8_t { General, CfaPlus, RegisterPlus } form = Form::General;
  bool value = false;
  uint8_t reg = 0;
  uint64_t offset = 0;
};

// A rule's expression in one of RegisterRule's short forms, or the rule as is.
RegisterRule with_short_form(RegisterRule rule, const Dwarf_Op* ops, size_t nops) {
  if (nops > 0 && ops[nops - 1].atom == DW_OP_stack_value) {
    rule.value = true;
    --nops;
  }
  const uint8_t first = nops > 0 ? ops[0].atom : 0;
  if (nops == 1 && first >= DW_OP_breg0 && first <= DW_OP_breg31) {
    rule.form = RegisterRule::Form::RegisterPlus;
    rule.reg = static_cast<uint8_t>(first - DW_OP_breg0);
    rule.offset = ops[0].number;
  } else if (nops == 1 && first == DW_OP_bregx && ops[0].number < kRegisterCount) {
    rule.form = RegisterRule::Form::RegisterPlus;
    rule.reg = static_cast<uint8_t>(ops[0].number);
    rule.offset = ops[0].number2;
  } else if (first == DW_OP_call_frame_cfa && (nops == 1 || (nops == 2 && ops[1].atom == DW_OP_plus_uconst))) {
    rule.form = RegisterRule::Form::CfaPlus;
    rule.offset = nops == 2 ? ops[1].number : 0;
  } else {
    rule.value = false;  // the interpreter reads DW_OP_stack_value itself
  }
  return rule;
}

// A rule in a short form: what evaluate() would give for its expression.
Eval evaluate_short(const RegisterRule& rule, const Registers& regs, const std::optional<uint64_t>& cfa,
                    uint64_t& result, bool& is_value) {
  is_value = rule.value;
  if (rule.form == RegisterRule::Form::CfaPlus) {
    if (!cfa) return Eval::Bad;
    result = *cfa + rule.offset;
    return Eval::Ok;
  }
  if (!regs.has(rule.reg)) return Eval::Unreadable;
  result = regs.value[rule.reg] + rule.offset;
  return Eval::Ok;
}

// The rules of one CFI row that an unwind step uses, copied out of libdw
// once per (module, address): hot return addresses recur in nearly every
// sample, and libdw's lookup (FDE search, CIE and FDE programs, an
// allocation per frame) costs far more than evaluating the rules.
struct FrameRow {
  std::vector<Dwarf_Op> ops;  // every expression of the row, back to back
  bool cfa_ok = false;
  RegisterRule cfa;
  int return_register = -1;  // < 0: libdw could not say
  bool signal_frame = false;
  RegisterRule return_address;
  std::array<RegisterRule, kTrackedRegisters.size()> tracked;  // by kTrackedRegisters index

  // Copies `frame`'s rule for `regno`.
  RegisterRule copy_rule(Dwarf_Frame* frame, int regno) {
    Dwarf_Op ops_mem[3];
    Dwarf_Op* rule_ops = nullptr;
    size_t nops = 0;
    RegisterRule rule;
    if (dwarf_frame_register(frame, regno, ops_mem, &rule_ops, &nops) != 0) return rule;
    if (nops == 0) {
      rule.kind = rule_ops == nullptr ? RegisterRule::SameValue : RegisterRule::Undefined;
      return rule;
    }
    return append(rule_ops, nops);
  }
  RegisterRule append(const Dwarf_Op* from, size_t nops) {
    RegisterRule rule;
    if (nops > kMaxExpressionOps) nops = kMaxExpressionOps + 1;  // evaluate() rejects it
    rule.kind = RegisterRule::Expression;
    rule.begin = static_cast<uint16_t>(ops.size());
    rule.count = static_cast<uint16_t>(nops);
    ops.insert(ops.end(), from, from + nops);
    return nops <= kMaxExpressionOps ? with_short_form(rule, from, nops) : rule;
  }
  static FrameRow of(Dwarf_Frame* frame) {
    FrameRow row;
    Dwarf_Op* cfa_ops = nullptr;
    size_t cfa_nops = 0;
    if (dwarf_frame_cfa(frame, &cfa_ops, &cfa_nops) == 0 && cfa_nops > 0) {
      row.cfa_ok = true;
      row.cfa = row.append(cfa_ops, cfa_nops);
    }
    row.return_register = dwarf_frame_info(frame, nullptr, nullptr, &row.signal_frame);
    if (row.return_register >= 0 && row.return_register < kRegisterCount)
      row.return_address = row.copy_rule(frame, row.return_register);
    for (size_t i = 0; i < kTrackedRegisters.size(); ++i)
      row.tracked[i] = row.copy_rule(frame, kTrackedRegisters[i]);
    return row;
  }
  const Dwarf_Op* ops_of(const RegisterRule& rule) const { return ops.data() + rule.begin; }
  size_t tracked_index(int regno) const {
    for (size_t i = 0; i < kTrackedRegisters.size(); ++i)
      if (kTrackedRegisters[i] == regno) return i;
    return kTrackedRegisters.size();
  }
};

// The caller's value of `regno` under `frame`'s rule for it.
Rule recover_register(const FrameRow& row, const RegisterRule& rule, const Registers& regs,
                      const StackView& stack, uint64_t cfa, uint64_t& value, Eval& failure) {
  switch (rule.kind) {
    case RegisterRule::Error:
      failure = Eval::Bad;
      return Rule::Failed;
    case RegisterRule::SameValue: return Rule::SameValue;
    case RegisterRule::Undefined: return Rule::Undefined;
    case RegisterRule::Expression: break;
  }
  uint64_t result = 0;
  bool is_value = false;
  failure = rule.form != RegisterRule::Form::General
                ? evaluate_short(rule, regs, cfa, result, is_value)
                : evaluate(row.ops_of(rule), rule.count, regs, stack, cfa, result, is_value);
  if (failure != Eval::Ok) return Rule::Failed;
  if (!is_value) {
    failure = read_stack(stack, result, 8, result);
    if (failure != Eval::Ok) return Rule::Failed;
  }
  value = result;
  return Rule::Value;
}

// The CFA under `frame`'s rule for it.
Eval frame_cfa(const FrameRow& row, const Registers& regs, const StackView& stack, uint64_t& cfa) {
  bool is_value = false;
  if (!row.cfa_ok) return Eval::Bad;
  if (row.cfa.form != RegisterRule::Form::General) return evaluate_short(row.cfa, regs, std::nullopt, cfa, is_value);
  return evaluate(row.ops_of(row.cfa), row.cfa.count, regs, stack, std::nullopt, cfa, is_value);
}

// The caller's tracked registers under `frame`'s rules; its stack pointer
// always.
Registers caller_registers(const FrameRow& row, const Registers& regs, const StackView& stack,
                           uint64_t cfa) {
  Registers caller;
  for (size_t i = 0; i < kTrackedRegisters.size(); ++i) {
    const int reg = kTrackedRegisters[i];
    uint64_t value = 0;
    Eval ignored = Eval::Ok;
    switch (recover_register(row, row.tracked[i], regs, stack, cfa, value, ignored)) {
      case Rule::Value: caller.set(reg, value); break;
      case Rule::SameValue:
        if (regs.has(reg)) caller.set(reg, regs.value[reg]);
        break;
      case Rule::Undefined:
      case Rule::Failed: break;  // unknown from here on; only fatal if a rule needs it
    }
  }
  // By the x86-64 ABI the caller's stack pointer is the CFA, unless the CFI
  // says otherwise (signal frames restore it from the saved context).
  const RegisterRule& sp_rule = row.tracked[row.tracked_index(kRsp)];
  if (sp_rule.kind != RegisterRule::Expression || !caller.has(kRsp)) caller.set(kRsp, cfa);
  return caller;
}

// One step up the stack by `frame`, the CFI row of `pc`: `regs`, `pc` and
// `exact_pc` become the caller's. nullopt when the walk goes on, else why it
// ends (Complete at the outermost frame).
std::optional<UnwindStop> step_to_caller(const FrameRow& row, const StackView& stack, Registers& regs,
                                         uint64_t& pc, bool& exact_pc) {
  uint64_t cfa = 0;
  if (Eval e = frame_cfa(row, regs, stack, cfa); e != Eval::Ok) return stop_for(e);
  const bool signal_frame = row.signal_frame;
  if (row.return_register < 0 || row.return_register >= kRegisterCount) return UnwindStop::BadCfi;
  uint64_t return_address = 0;
  Eval failure = Eval::Ok;
  switch (recover_register(row, row.return_address, regs, stack, cfa, return_address, failure)) {
    case Rule::Undefined: return UnwindStop::Complete;  // the outermost frame (_start, clone) says so
    case Rule::SameValue: return UnwindStop::BadCfi;
    case Rule::Failed: return stop_for(failure);
    case Rule::Value: break;
  }
  if (return_address == 0) return UnwindStop::Complete;  // a zeroed return address ends a stack too

  Registers caller = caller_registers(row, regs, stack, cfa);
  if (caller.value[kRsp] <= regs.value[kRsp]) return UnwindStop::Loop;
  regs = caller;
  pc = return_address;
  exact_pc = signal_frame;
  return std::nullopt;
}

// The caller by the frame-pointer chain, as `perf -g` walks it, where no CFI
// covers `pc` (JIT code, hand-written assembly): rbp points at the saved rbp
// with the return address above it. Taken only when rbp looks like a frame of
// this stack (8-aligned, at or above sp, both words inside the copy) and
// the return address is not 0; false leaves everything as it was.
bool frame_pointer_step(const StackView& stack, Registers& regs, uint64_t& pc, bool& exact_pc) {
  if (!regs.has(kRbp) || !regs.has(kRsp)) return false;
  const uint64_t bp = regs.value[kRbp], sp = regs.value[kRsp];
  if (bp % 8 != 0 || bp < sp || bp > UINT64_MAX - 16) return false;
  uint64_t saved_bp = 0, return_address = 0;
  if (read_stack(stack, bp, 8, saved_bp) != Eval::Ok || read_stack(stack, bp + 8, 8, return_address) != Eval::Ok ||
      return_address == 0)
    return false;
  // Only rsp and rbp are known in the caller: a CFI rule of its that needs
  // another register stops the walk there.
  Registers caller;
  caller.set(kRsp, bp + 16);
  caller.set(kRbp, saved_bp);
  regs = caller;
  pc = return_address;
  exact_pc = false;
  return true;
}

// The caller by `step`, how the code at `pc` returns (epilogue.h): nothing
// changed when a value it needs is not in the copy.
bool epilogue_step(const EpilogueStep& step, const StackView& stack, Registers& regs, uint64_t& pc,
                   bool& exact_pc) {
  auto base_value = [&](EpilogueStep::Base base, uint64_t& value) {
    const int reg = base == EpilogueStep::Base::Rsp ? kRsp : kRbp;
    if (!regs.has(reg)) return false;
    value = regs.value[reg];
    return true;
  };
  uint64_t base = 0, sp = regs.value[kRsp];
  if (!regs.has(kRsp) || !base_value(step.base, base) || base < sp) return false;
  const uint64_t slot = base + static_cast<uint64_t>(step.return_slot);
  uint64_t return_address = 0;
  if (slot < base || slot > UINT64_MAX - 8 || read_stack(stack, slot, 8, return_address) != Eval::Ok ||
      return_address == 0)
    return false;
  Registers caller = regs;  // what the epilogue does not restore is the callee's still
  caller.known &= ~(uint32_t{1} << kReturnAddress);
  for (const EpilogueStep::Pop& pop : step.pops) {
    uint64_t at = 0, value = 0;
    if (!base_value(pop.base, at) || read_stack(stack, at + static_cast<uint64_t>(pop.offset), 8, value) != Eval::Ok)
      return false;
    if (pop.reg < kRegisterCount) caller.set(pop.reg, value);
  }
  caller.set(kRsp, slot + 8);
  regs = caller;
  pc = return_address;
  exact_pc = false;
  return true;
}

struct FrameDeleter {
  void operator()(Dwarf_Frame* frame) const { std::free(frame); }
};
using FramePtr = std::unique_ptr<Dwarf_Frame, FrameDeleter>;

}  // namespace

// One module's ELF and its CFI sections, opened once and kept.
struct CfiUnwinder::ModuleCfi {
  gsym::FileDescriptor fd;
  std::vector<uint8_t> image;  // JIT code's ELF image (jit_eh_frame_elf), instead of `fd`
  gsym::ElfHandle elf;  // reads `fd` or `image`: ended before either goes
  Dwarf_CFI* eh_frame = nullptr;  // owned (dwarf_cfi_end)
  Dwarf* dwarf = nullptr;         // for .debug_frame, opened on first need
  Dwarf_CFI* debug_frame = nullptr;  // owned by `dwarf`
  bool debug_frame_tried = false;
  std::string error;  // non-empty: unusable
  // The ELF entry point (e_entry, unslid; 0 = none) and where the run of
  // code without CFI that starts there ends (computed on first need).
  uint64_t entry = 0;
  std::optional<uint64_t> entry_code_end;

  // Up to out.size() bytes of the module's file at `unslid`, inside an
  // executable PT_LOAD segment: the code as the file has it, also after
  // the process is gone. 0 when it cannot be read.
  size_t read_file_code(uint64_t unslid, std::span<uint8_t> out) const {
    size_t count = 0;
    if (!fd.valid() || !elf || elf_getphdrnum(elf.get(), &count) != 0) return 0;
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf.get(), i, &ph) || ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0 ||
          unslid < ph.p_vaddr || unslid - ph.p_vaddr >= ph.p_filesz)
        continue;
      const uint64_t into = unslid - ph.p_vaddr;
      const size_t want = static_cast<size_t>(std::min<uint64_t>(out.size(), ph.p_filesz - into));
      const ssize_t got = ::pread(fd.get(), out.data(), want, static_cast<off_t>(ph.p_offset + into));
      return got > 0 ? static_cast<size_t>(got) : 0;
    }
    return 0;
  }

  ~ModuleCfi() {
    if (eh_frame) dwarf_cfi_end(eh_frame);
    if (dwarf) dwarf_end(dwarf);
  }

  void load(const UnwindModule& module) {
    if (module.jit) return load_jit(*module.jit);
    gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file(module.elf_path);
    if (!file) {
      error = file.error().message;
      return;
    }
    if (module.file.known()) {
      const FileStamp opened = FileStamp::of(file->status);
      if (opened.dev != module.file.dev || opened.inode != module.file.inode ||
          opened.ctime_ns != module.file.ctime_ns) {
        error = module.elf_path + ": not the file the module was identified from (replaced since?)";
        return;
      }
    }
    fd = std::move(file->fd);
    gsym::Expected<gsym::ElfHandle> opened =
        gsym::ElfHandle::open(fd.get(), file->status, gsym::UntrustedRead::OnDemand);
    GElf_Ehdr ehdr;
    if (!opened || !gelf_getehdr(opened->get(), &ehdr)) {
      error = module.elf_path + ": not an ELF file";
      return;
    }
    elf = std::move(*opened);
    if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_machine != EM_X86_64) {
      error = module.elf_path + ": not an x86-64 ELF file";
      return;
    }
    entry = ehdr.e_entry;
    if (!module.build_id.empty()) {
      // The file's identity of the module's kind (build_id.h); a content
      // hash is computed once per file version.
      BuildId file_id;
      if (module.build_id.kind() == BuildId::Kind::Gnu) {
        file_id = BuildId(gsym::read_gnu_build_id(elf.get()));
      } else if (gsym::Expected<BuildId> id = read_elf_identity_fd(fd.get(), module.elf_path); id) {
        file_id = std::move(*id);
      }
      if (file_id != module.build_id) {
        error = module.elf_path + ": identity differs from the module's " + describe_identity(module.build_id);
        return;
      }
    }
    // Compressed sections' claimed sizes are bounded before libdw
    // (dwarf_begin_elf in load_debug_frame) decompresses any of them.
    if (gsym::Status sizes = gsym::check_section_sizes(elf.get(), static_cast<uint64_t>(file->status.st_size));
        !sizes) {
      error = module.elf_path + ": " + sizes.error().message;
      return;
    }
    eh_frame = dwarf_getcfi_elf(elf.get());
    if (!eh_frame && !load_debug_frame())
      error = module.elf_path + ": no .eh_frame or .debug_frame";
  }

  // The CFI a JIT runtime wrote for its code: an ELF image in memory holding
  // just its .eh_frame, placed so the FDEs cover the code as loaded.
  void load_jit(const JitUnwindCode& code) {
    debug_frame_tried = true;  // there is no .debug_frame to look for
    gsym::Expected<JitEhFrame> placed = place_jit_eh_frame(code.unwind, code.eh_frame_hdr_size, code.start, code.end);
    if (!placed) {
      error = "JIT code's .eh_frame: " + placed.error().to_string();
      return;
    }
    image = jit_eh_frame_elf(*placed);
    gsym::Expected<gsym::ElfHandle> opened = gsym::ElfHandle::from_memory(image);
    if (opened) elf = std::move(*opened);
    if (elf) eh_frame = dwarf_getcfi_elf(elf.get());
    if (!eh_frame) error = "JIT code's .eh_frame: not read by libdw";
  }

  bool load_debug_frame() {
    if (!debug_frame_tried) {
      debug_frame_tried = true;
      dwarf = dwarf_begin_elf(elf.get(), DWARF_C_READ, nullptr);
      if (dwarf) debug_frame = dwarf_getcfi(dwarf);
    }
    return debug_frame != nullptr;
  }

  // Whether `unslid_addr`, which no CFI covers, is entry code: at or after
  // the ELF entry point, with no CFI anywhere between. The first code a
  // process runs has no caller, and some of it no CFI either (ld.so's
  // `_start` and `_dl_start_user` are bare assembly, where the
  // executable's `_start` and clone's child path mark the outermost frame
  // with an undefined return address): a frame there is the stack's root.
  bool in_entry_code(uint64_t unslid_addr) {
    if (entry == 0 || unslid_addr < entry) return false;
    if (!entry_code_end) {
      // Byte by byte, once per module: CFI tables say which addresses they
      // cover, not where uncovered runs end. Entry stubs are a few dozen
      // bytes; the bound keeps a module without any CFI near its entry cheap.
      constexpr uint64_t kMaxEntryCode = 4096;
      uint64_t end = entry;
      while (end - entry < kMaxEntryCode && end != UINT64_MAX && !frame_at(end)) ++end;
      entry_code_end = end;
    }
    return unslid_addr < *entry_code_end;
  }

  // The decoded CFI row for `unslid_addr` (nullptr: no CFI covers it),
  // cached; `rows_cached` counts rows over all modules, to bound them.
  const FrameRow* row_at(uint64_t unslid_addr, size_t& rows_cached) {
    if (!recent) recent = std::make_unique<RecentRows>();
    RecentRow& hint = (*recent)[recent_slot(unslid_addr)];
    if (hint.address_plus_one == unslid_addr + 1) return hint.row;
    const FrameRow* row = nullptr;
    if (auto it = rows.find(unslid_addr); it != rows.end()) {
      row = it->second ? &*it->second : nullptr;
    } else {
      FramePtr frame = frame_at(unslid_addr);
      ++rows_cached;
      auto& slot = rows[unslid_addr];
      if (frame) slot = FrameRow::of(frame.get());
      row = slot ? &*slot : nullptr;
    }
    hint = {unslid_addr + 1, row};
    return row;
  }
  // Drops the decoded rows (past the bound on all modules' rows).
  void forget_rows() {
    rows.clear();
    recent.reset();
  }
  std::unordered_map<uint64_t, std::optional<FrameRow>> rows;
  // The rows of recent addresses, direct-mapped by address, in front of
  // `rows`: at 9999 Hz the reader's time per sample went mostly to cache
  // misses, a third of the walk's in the hash table's buckets and nodes.
  // One compact array takes one load where the table took three. Entries
  // point into `rows` (its nodes never move) and go with it.
  struct RecentRow {
    uint64_t address_plus_one = 0;  // 0: empty
    const FrameRow* row = nullptr;
  };
  static constexpr size_t kRecentRows = 256;  // 4 KiB per module whose frames were walked
  using RecentRows = std::array<RecentRow, kRecentRows>;
  static size_t recent_slot(uint64_t unslid_addr) {
    // Fibonacci hashing: the product's top bits spread nearby addresses.
    constexpr int kShift = 64 - std::countr_zero(kRecentRows);
    return static_cast<size_t>((unslid_addr * 0x9E3779B97F4A7C15ull) >> kShift);
  }
  std::unique_ptr<RecentRows> recent;

  // CFI row for `unslid_addr`: .eh_frame first, then .debug_frame.
  FramePtr frame_at(uint64_t unslid_addr) {
    Dwarf_Frame* frame = nullptr;
    if (eh_frame && dwarf_cfi_addrframe(eh_frame, unslid_addr, &frame) == 0) return FramePtr(frame);
    if (load_debug_frame() && dwarf_cfi_addrframe(debug_frame, unslid_addr, &frame) == 0)
      return FramePtr(frame);
    return nullptr;
  }
};

CfiUnwinder::CfiUnwinder(UnwindOptions options) : options_(options) {}
CfiUnwinder::~CfiUnwinder() = default;

namespace {

// Loaded CFI is shared by build ID. A failure belongs to the path tried (it
// may be gone, e.g. /proc/PID/map_files of an exited process, or hold another
// build), so another path of the same build still gets its chance.
// Only CFI of a file nobody else could have written stands for its build ID
// everywhere; anyone's file could claim any build ID.
std::string success_key(const UnwindModule& module) {
  if (module.jit) return "jit:" + std::to_string(module.jit->serial);
  if (module.file.known() && !module.file.trusted)
    return "file:" + module.file.key() + ":" + module.build_id.hex();
  if (module.build_id.empty()) return "path:" + module.elf_path;
  const std::string bytes(module.build_id.bytes().begin(), module.build_id.bytes().end());
  return module.build_id.kind() == BuildId::Kind::Gnu ? bytes
                                                      : std::string(kind_name(module.build_id.kind())) + ":" + bytes;
}
std::string failure_key(const UnwindModule& module) {
  if (module.jit) return "failed:jit:" + std::to_string(module.jit->serial);
  return std::string("failed:") + kind_name(module.build_id.kind()) + ":" + module.build_id.hex() + ":" +
         module.elf_path;
}

}  // namespace

CfiUnwinder::ModuleCfi* CfiUnwinder::cfi_for(const UnwindModule& module) {
  // The modules of the last walks, compared whole (a module at a reused
  // address is another module): building the cache key and searching the
  // cache took an allocation and string compares per walk.
  if (module.jit) return cfi_for_key(module);  // not copied: its CFI bytes come with it
  for (const auto& [known, cfi] : recent_cfi_)
    if (cfi && known == module) return cfi;
  ModuleCfi* cfi = cfi_for_key(module);
  if (cfi) {
    recent_cfi_[recent_cfi_next_] = {module, cfi};
    recent_cfi_next_ = (recent_cfi_next_ + 1) % recent_cfi_.size();
  }
  return cfi;
}

CfiUnwinder::ModuleCfi* CfiUnwinder::cfi_for_key(const UnwindModule& module) {
  if (auto it = cache_.find(success_key(module)); it != cache_.end()) return it->second.get();
  std::string failed = failure_key(module);
  if (cache_.count(failed)) return nullptr;
  auto cfi = std::make_unique<ModuleCfi>();
  cfi->load(module);
  if (!cfi->error.empty()) {
    if (module.jit && !stats_.jit_code_rejected++) stats_.jit_code_rejection = cfi->error;
    if (!module.jit) ++stats_.modules_failed;
    cache_.emplace(std::move(failed), std::move(cfi));
    return nullptr;
  }
  ++(module.jit ? stats_.jit_code_loaded : stats_.modules_opened);
  return cache_.emplace(success_key(module), std::move(cfi)).first->second.get();
}

std::string CfiUnwinder::module_error(const UnwindModule& module) {
  std::lock_guard lock(mutex_);
  if (cache_.count(success_key(module))) return "";
  auto it = cache_.find(failure_key(module));
  return it == cache_.end() ? "" : it->second->error;
}

void CfiUnwinder::forget_module(const UnwindModule& module) {
  std::lock_guard lock(mutex_);
  recent_cfi_ = {};
  cache_.erase(success_key(module));
  cache_.erase(failure_key(module));
}

void CfiUnwinder::forget_modules() {
  std::lock_guard lock(mutex_);
  recent_cfi_ = {};
  cache_.clear();
  rows_cached_ = 0;
}

CfiCacheStats CfiUnwinder::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

UnwindResult CfiUnwinder::unwind(const StackView& stack, const ModuleFinder& find_module) {
  UnwindResult result;
  unwind(stack, find_module, result);
  return result;
}

void CfiUnwinder::unwind(const StackView& stack, const ModuleFinder& find_module, UnwindResult& out,
                         const CodeReader& read_code) {
  std::lock_guard lock(mutex_);
  out.ips.clear();
  out.exact.clear();
  out.stop = UnwindStop::Complete;
  out.frame_pointer_steps = 0;
  out.epilogue_steps = 0;
  out.jit_cfi_steps = 0;

  // The copied stack was written by another CPU (into the ring buffer): each
  // frame's load of it misses the cache, and each depends on the frame
  // before. Asking for the lines at once overlaps those misses (per-sample
  // reader CPU 0.75x at 9999 Hz). Bounded: a copy of up to 1 MiB would
  // evict more than it saves; most walks end in their first few KiB.
  constexpr size_t kPrefetchBytes = 16 * 1024;
  const size_t prefetch_end = std::min(stack.stack.size(), kPrefetchBytes);
  for (size_t offset = 0; offset < prefetch_end; offset += 64) __builtin_prefetch(stack.stack.data() + offset);

  Registers regs;
  regs.set(kRsp, stack.regs.sp);
  regs.set(kRbp, stack.regs.bp);
  uint64_t pc = stack.regs.ip;
  // Frame 0's pc is the interrupted instruction; a return address points after
  // its call, which may be the last instruction of the function, so look up
  // pc - 1 there. After a signal frame the pc is exact again.
  bool exact_pc = true;
  // Each module's CFI for this walk: most frames lie in a few modules, and
  // cfi_for builds a key string and searches the cache per call (a fifth of
  // the reader's CPU at 9999 Hz). UnwindModule pointers stay valid for one walk.
  std::array<std::pair<const UnwindModule*, ModuleCfi*>, 8> walk_cfi{};
  size_t walk_cfi_count = 0;
  auto cfi_of = [&](const UnwindModule& module) {
    for (size_t i = 0; i < walk_cfi_count; ++i)
      if (walk_cfi[i].first == &module) return walk_cfi[i].second;
    ModuleCfi* cfi = cfi_for(module);
    if (walk_cfi_count < walk_cfi.size()) walk_cfi[walk_cfi_count++] = {&module, cfi};
    return cfi;
  };

  for (;;) {
    out.ips.push_back(pc);
    out.exact.push_back(exact_pc);
    regs.set(kReturnAddress, pc);  // DW_OP_breg16 is %rip (PLT stubs' CFA rules use it)
    const uint64_t lookup_addr = exact_pc ? pc : pc - 1;
    const UnwindModule* module = find_module ? find_module(lookup_addr) : nullptr;
    ModuleCfi* cfi = module ? cfi_of(*module) : nullptr;
    if (rows_cached_ > kMaxCachedRows) {
      for (auto& [key, loaded] : cache_) loaded->forget_rows();
      rows_cached_ = 0;
    }
    const FrameRow* row = cfi ? cfi->row_at(lookup_addr - module->load_bias, rows_cached_) : nullptr;
    // A signal trampoline (CFI augmentation S): the kernel made its address
    // the handler's return address, no call precedes it: it is exact.
    if (row && row->signal_frame) out.exact.back() = 1;
    std::optional<UnwindStop> cfi_end;
    if (row) {
      const bool interrupted_frame = out.ips.size() == 1;
      cfi_end = step_to_caller(*row, stack, regs, pc, exact_pc);
      // Interrupted in an epilogue after its pops (at `ret`, say), the CFI
      // still says the callee-saved registers are in their slots, now below
      // the stack pointer and so outside the copy: rbp is lost, and with it
      // any caller's CFA that is rbp-based (ld.so's _dl_start). The code
      // left to run, decoded, gives the caller exactly: the registers it
      // already popped hold the caller's values. The code is read from the
      // module's file first: the process (a short-lived one in ld.so's
      // start-up) may be gone by the time its sample is walked.
      if (interrupted_frame && !cfi_end && !regs.has(kRbp)) {
        Registers by_epilogue;  // frame 0's registers, as the walk began
        by_epilogue.set(kRsp, stack.regs.sp);
        by_epilogue.set(kRbp, stack.regs.bp);
        uint64_t epilogue_pc = stack.regs.ip;
        bool epilogue_exact = true;
        std::array<uint8_t, kEpilogueCodeBytes> code;
        std::span<const uint8_t> code_read(code.data(), cfi->read_file_code(lookup_addr - module->load_bias, code));
        if (code_read.empty() && read_code) code_read = read_code(stack.regs.ip);
        std::optional<EpilogueStep> epilogue = decode_epilogue(code_read);
        if (epilogue && epilogue_step(*epilogue, stack, by_epilogue, epilogue_pc, epilogue_exact) &&
            epilogue_pc == pc && by_epilogue.value[kRsp] == regs.value[kRsp]) {
          regs = by_epilogue;  // not an epilogue step of the summary's: this frame has CFI
        }
      }
      if (!cfi_end && module->jit) ++out.jit_cfi_steps;
      // A JIT runtime's CFI that takes no step (its rules are the profiled
      // user's) leaves the code to the fallbacks below, as code without CFI.
      if (cfi_end && (!module->jit || *cfi_end == UnwindStop::Complete)) {
        out.stop = *cfi_end;
        return;
      }
    }
    if (!row || cfi_end) {
      // A process's or thread's entry code is the root of its stack.
      if (cfi && cfi->in_entry_code(lookup_addr - module->load_bias)) {
        out.stop = UnwindStop::Complete;
        return;
      }
      // How the code returns, read from it (exact), before the frame
      // pointer (a guess where the code keeps none: CPython's trampolines).
      std::optional<EpilogueStep> epilogue;
      if (read_code) epilogue = decode_epilogue(read_code(pc));
      if (epilogue && epilogue_step(*epilogue, stack, regs, pc, exact_pc)) {
        ++out.epilogue_steps;
      } else if (options_.frame_pointer_fallback && frame_pointer_step(stack, regs, pc, exact_pc)) {
        ++out.frame_pointer_steps;
      } else {
        out.stop = cfi_end.value_or(module ? UnwindStop::NoCfi : UnwindStop::NoModule);
        return;
      }
    }
    if (out.ips.size() >= options_.max_frames) {
      out.stop = UnwindStop::DepthLimit;
      return;
    }
  }
}

}  // namespace gsymprof
