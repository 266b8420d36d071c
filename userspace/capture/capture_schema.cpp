#include "userspace/capture/capture_schema.h"

#include <array>
#include <iterator>

namespace gsymprof::capture_schema {
namespace {

constexpr const char* kFieldNames[kFieldCount] = {
    "", "format", "version", "host", "kernel_release", "frequency_hz", "start_time_unix_ns",
    "duration_ns", "call_graph", "samples", "lost", "modules", "processes", "stacks",
    "path", "build_id", "load_bias", "mappings", "error",
    "start", "end", "file_offset", "perms",
    "pid", "comm", "count", "truncated", "frames",
    "module", "unresolved", "address", "kernel", "symbols", "name", "tid", "jit_symbols", "jit",
    "build_id_kind", "clock", "truncations", "error_kind", "off_cpu", "off_cpu_ns", "short_waits",
    "times", "python_frames", "qualname", "file", "line", "python", "", ""};
static_assert(kFieldCount <= 65, "the reader's seen bits are a uint64_t indexed by Field - 1");

constexpr bool kOptional = false;

// The schema: capture-format.md's tables, each object's fields in the order
// documented there (and written). Rows of one object are adjacent.
constexpr Slot kSchema[] = {
    // top level
    {Node::Root, kFormat, Want::String},
    {Node::Root, kVersion, Want::Unsigned},
    {Node::Root, kHost, Want::String},
    {Node::Root, kKernelRelease, Want::String},
    {Node::Root, kFrequencyHz, Want::U32},
    {Node::Root, kStartTime, Want::Unsigned},
    {Node::Root, kDuration, Want::Unsigned},
    {Node::Root, kCallGraph, Want::String},
    {Node::Root, kClock, Want::String, Node::Skip, kOptional},  // version 4; absent: "cpu"
    {Node::Root, kSamples, Want::Unsigned},
    {Node::Root, kLost, Want::Object, Node::Lost},
    {Node::Root, kTruncations, Want::Object, Node::Truncations, kOptional},  // version 4
    {Node::Root, kKernel, Want::Object, Node::Kernel, kOptional},            // version 2
    {Node::Root, kJitSymbols, Want::Array, Node::JitSymbols, kOptional},     // version 2
    {Node::Root, kPythonFrames, Want::Array, Node::PythonFrames, kOptional},  // version 5
    {Node::Root, kModules, Want::Array, Node::Modules},
    {Node::Root, kProcesses, Want::Array, Node::Processes},
    {Node::Root, kStacks, Want::Array, Node::Stacks},
    {Node::Lost, kLostEntry, Want::Unsigned},
    {Node::Truncations, kLostEntry, Want::Unsigned},
    // kernel
    {Node::Kernel, kBuildId, Want::String},
    {Node::Kernel, kError, Want::String},
    {Node::Kernel, kSymbols, Want::Array, Node::KernelSymbols},
    {Node::KernelSymbols, kElement, Want::Object, Node::KernelSymbol},
    {Node::KernelSymbol, kStart, Want::Hex},
    {Node::KernelSymbol, kEnd, Want::Hex},
    {Node::KernelSymbol, kName, Want::String},
    {Node::KernelSymbol, kModule, Want::String},
    // JIT symbol
    {Node::JitSymbols, kElement, Want::Object, Node::JitSymbol},
    {Node::JitSymbol, kStart, Want::Hex},
    {Node::JitSymbol, kEnd, Want::Hex},
    {Node::JitSymbol, kName, Want::String},
    // Python frame (version 5)
    {Node::PythonFrames, kElement, Want::Object, Node::PythonFrame},
    {Node::PythonFrame, kQualname, Want::String},
    {Node::PythonFrame, kFile, Want::String},
    {Node::PythonFrame, kLine, Want::U32},
    // module
    {Node::Modules, kElement, Want::Object, Node::Module},
    {Node::Module, kPath, Want::String},
    {Node::Module, kBuildId, Want::String},
    {Node::Module, kBuildIdKind, Want::String, Node::Skip, kOptional},  // version 3; absent: "gnu"
    {Node::Module, kLoadBias, Want::Hex},
    {Node::Module, kMappings, Want::Array, Node::Mappings},
    {Node::Module, kErrorKind, Want::String, Node::Skip, kOptional},  // version 4
    {Node::Module, kError, Want::String},
    {Node::Mappings, kElement, Want::Object, Node::Mapping},
    {Node::Mapping, kStart, Want::Hex},
    {Node::Mapping, kEnd, Want::Hex},
    {Node::Mapping, kFileOffset, Want::Hex},
    {Node::Mapping, kPerms, Want::String},
    // process
    {Node::Processes, kElement, Want::Object, Node::Process},
    {Node::Process, kPid, Want::U32},
    {Node::Process, kComm, Want::String},
    {Node::Process, kModules, Want::Array, Node::ProcessModules},
    {Node::ProcessModules, kElement, Want::U32},
    // stack
    {Node::Stacks, kElement, Want::Object, Node::Stack},
    {Node::Stack, kPid, Want::U32},
    {Node::Stack, kTid, Want::U32, Node::Skip, kOptional},  // version 2
    {Node::Stack, kComm, Want::String},
    {Node::Stack, kCount, Want::Unsigned},
    {Node::Stack, kTruncated, Want::Bool},
    {Node::Stack, kOffCpu, Want::String, Node::Skip, kOptional},     // version 4
    {Node::Stack, kOffCpuNs, Want::Unsigned, Node::Skip, kOptional},  // version 4
    {Node::Stack, kShortWaits, Want::Bool, Node::Skip, kOptional},    // version 4
    {Node::Stack, kFrames, Want::Array, Node::Frames},
    {Node::Stack, kTimes, Want::Array, Node::Times, kOptional},  // version 4: sample times, delta-encoded
    {Node::Times, kElement, Want::Unsigned},
    // frame: exactly one of kernel, module, unresolved, with an address; or
    // python alone (the reader checks)
    {Node::Frames, kElement, Want::Object, Node::Frame},
    {Node::Frame, kKernel, Want::Bool, Node::Skip, kOptional},  // version 2
    {Node::Frame, kModule, Want::U32, Node::Skip, kOptional},
    {Node::Frame, kUnresolved, Want::String, Node::Skip, kOptional},
    {Node::Frame, kAddress, Want::Hex, Node::Skip, kOptional},  // required but on a Python frame
    {Node::Frame, kJit, Want::U32, Node::Skip, kOptional},      // version 2
    {Node::Frame, kPython, Want::U32, Node::Skip, kOptional},   // version 5
};
constexpr size_t kRows = std::size(kSchema);
static_assert(kRows < 255, "row numbers are a uint8_t");

size_t index_of(Node node) { return static_cast<size_t>(node); }

// kSchema's rows by (parent, field): row + 1, 0 = none.
using RowIndex = std::array<std::array<uint8_t, kFieldCount>, kNodeCount>;
constexpr RowIndex make_row_index() {
  RowIndex index{};
  for (size_t row = 0; row < kRows; ++row)
    index[static_cast<size_t>(kSchema[row].parent)][kSchema[row].field] = static_cast<uint8_t>(row + 1);
  return index;
}
constexpr RowIndex kRowIndex = make_row_index();

// Each node's rows, [first, end) in kSchema.
struct Rows {
  uint8_t first = 0, end = 0;
};
constexpr std::array<Rows, kNodeCount> make_rows() {
  std::array<Rows, kNodeCount> rows{};
  for (size_t row = kRows; row-- > 0;) {
    Rows& r = rows[static_cast<size_t>(kSchema[row].parent)];
    if (r.end == 0) r.end = static_cast<uint8_t>(row + 1);
    r.first = static_cast<uint8_t>(row);
  }
  return rows;
}
constexpr std::array<Rows, kNodeCount> kNodeRows = make_rows();

constexpr bool rows_adjacent() {
  for (size_t node = 0; node < kNodeCount; ++node)
    for (size_t row = kNodeRows[node].first; row < kNodeRows[node].end; ++row)
      if (static_cast<size_t>(kSchema[row].parent) != node) return false;
  return true;
}
static_assert(rows_adjacent(), "each object's rows are adjacent in kSchema");

}  // namespace

const char* field_name(Field field) { return kFieldNames[field]; }

const char* wanted(Want want) {
  switch (want) {
    case Want::String: case Want::Hex: return "a string";
    case Want::Unsigned: case Want::U32: return "an unsigned integer";
    case Want::Bool: return "a boolean";
    case Want::Object: return "an object";
    case Want::Array: return "an array";
    case Want::Skip: break;
  }
  return "nothing";
}

Slot slot_for(Node parent, Field field) {
  const uint8_t row = kRowIndex[index_of(parent)][field];
  return row ? kSchema[row - 1] : Slot{};
}

std::span<const Slot> fields_of(Node object) {
  const Rows& rows = kNodeRows[index_of(object)];
  return std::span<const Slot>(kSchema + rows.first, kSchema + rows.end);
}

Field field_named(Node object, std::string_view name) {
  for (const Slot& slot : fields_of(object))
    if (name == kFieldNames[slot.field]) return slot.field;
  return kNoField;
}

}  // namespace gsymprof::capture_schema
