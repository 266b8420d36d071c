// gsym/format/format.h - the constants of the GSYM byte format, versions 1 and 2
// (gsym/FORMAT.md): headers, record types, line-table opcodes and the limits
// the reader and builder enforce. The one place reader, encoders and builder
// take them from.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gsym {

// Byte order of a file (either is read; the builder writes either).
enum class Endian : uint8_t { Little, Big };

// Header (gsym/FORMAT.md §2): "GSYM" read as a native u32, in either byte order.
inline constexpr uint32_t kMagic = 0x4753594D;
inline constexpr uint32_t kMagicSwapped = 0x4D595347;
inline constexpr uint16_t kVersion = 1;  // the default written: LLVM <= 22 reads only 1
inline constexpr size_t kHeaderSize = 48;
inline constexpr size_t kMaxUuidSize = 20;  // version 1's UUID field

// Version 2 (LLVM 23, gsym/FORMAT.md §9): a 20-byte header, then a directory
// of {u32 type, u64 offset, u64 size} entries ended by an all-zero one.
// String offsets are 8 bytes wherever version 1 has 4, file entries 16,
// address-info offsets u64 from the start of the FunctionInfo section.
inline constexpr uint16_t kVersion2 = 2;
inline constexpr size_t kHeaderSizeV2 = 20;
inline constexpr size_t kDirectoryEntrySize = 20;

enum class GlobalInfoType : uint32_t {
  EndOfList = 0,
  AddrOffsets = 1,
  AddrInfoOffsets = 2,
  StringTable = 3,
  FileTable = 4,
  FunctionInfo = 5,
  UUID = 6,
};

// LLVM's names of the directory's types ("" for unknown ones).
inline const char* global_info_type_name(uint32_t type) {
  switch (static_cast<GlobalInfoType>(type)) {
    case GlobalInfoType::EndOfList: return "EndOfList";
    case GlobalInfoType::AddrOffsets: return "AddrOffsets";
    case GlobalInfoType::AddrInfoOffsets: return "AddrInfoOffsets";
    case GlobalInfoType::StringTable: return "StringTable";
    case GlobalInfoType::FileTable: return "FileTable";
    case GlobalInfoType::FunctionInfo: return "FunctionInfo";
    case GlobalInfoType::UUID: return "UUID";
  }
  return "";
}

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
