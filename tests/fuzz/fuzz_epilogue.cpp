// Fuzzes the epilogue decoder (userspace/unwind/epilogue.h) on code bytes as
// a hostile process may hold them: any bytes give an answer or nullopt,
// never a read past the input; an answer stays within its bounds (at most
// kMaxEpilogueInstructions, a return slot and saved registers at or above
// their base, never the stack pointer popped), and decoding the same
// bytes with any tail appended gives the same answer (the decoder stops at
// the ret).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "userspace/unwind/epilogue.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> code(data, size);
  auto step = gsymprof::decode_epilogue(code);
  if (!step) return 0;
  if (step->instructions == 0 || step->instructions > gsymprof::kMaxEpilogueInstructions) std::abort();
  if (step->return_slot < 0) std::abort();
  for (const gsymprof::EpilogueStep::Pop& pop : step->pops) {
    if (pop.reg < 0 || pop.reg > 15 || pop.reg == 7 || pop.offset < 0) std::abort();
  }
  std::vector<uint8_t> longer(data, data + size);
  longer.insert(longer.end(), {0xe8, 0xff, 0x00});
  auto again = gsymprof::decode_epilogue(longer);
  if (!again || again->return_slot != step->return_slot || again->pops.size() != step->pops.size()) std::abort();
  return 0;
}
