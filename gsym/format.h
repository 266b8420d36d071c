// gsym/format.h - the constants of the GSYM version 1 byte format
// (gsym-format.md): header, record types, line-table opcodes and the limits
// the reader and builder enforce. The one place reader, encoders and builder
// take them from.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gsym {

// Header (gsym-format.md §2): "GSYM" read as a native u32, in either byte order.
inline constexpr uint32_t kMagic = 0x4753594D;
inline constexpr uint32_t kMagicSwapped = 0x4D595347;
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 48;
inline constexpr size_t kMaxUuidSize = 20;

// InfoType values of the records in a FunctionInfo (§3).
enum class InfoType : uint32_t {
  EndOfList = 0,
  LineTable = 1,
  Inline = 2,
  MergedFunctions = 3,
  CallSites = 4,
};

// Line-table opcodes (§4.2); every opcode from kFirstSpecialOp up is a
// special opcode (line and address advance in one byte).
inline constexpr uint8_t kOpEndSequence = 0x00;
inline constexpr uint8_t kOpSetFile = 0x01;
inline constexpr uint8_t kOpAdvancePC = 0x02;
inline constexpr uint8_t kOpAdvanceLine = 0x03;
inline constexpr uint8_t kFirstSpecialOp = 0x04;
// Widest line-delta window the encoder gives special opcodes (LLVM's MaxLineRange).
inline constexpr int64_t kMaxLineRange = 14;

// Hard limits that keep hostile input from costing unbounded stack or time.
inline constexpr size_t kMaxInlineDepth = 256;  // nested inline-tree nodes
inline constexpr size_t kMaxMergedDepth = 16;   // nested MergedFunctionsInfo
// LEB128 values in GSYM records: at most this many bytes (and 64 bits).
inline constexpr unsigned kMaxLebBytes = 10;

}  // namespace gsym
