// userspace/capture/capture_schema.h - the capture file's vocabulary, shared
// by its reader (capture_reader.cpp) and writer (capture_writer.cpp): the
// format's name and versions, its limits, every field name, and which object
// holds which fields, in the order capture-format.md documents them and the
// writer writes them, with the type each value must have.
//
// Internal to userspace/capture/; the public API is capture_file.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gsymprof::capture_schema {

inline constexpr const char* kFormatName = "gsymprof-capture";
inline constexpr int kFormatVersion = 5;        // the version this code writes
inline constexpr int kOldestFormatVersion = 1;  // the oldest it reads

// Longest module identity a capture holds (a Go build ID is about 83 bytes),
// and the longest kernel build ID.
inline constexpr size_t kMaxModuleIdBytes = 128;
inline constexpr size_t kMaxKernelIdBytes = 64;

// A capture is five levels deep; anything deeper is not a capture.
inline constexpr size_t kMaxNesting = 16;

// `lost` (and `truncations`) has a dozen reasons; each costs a map node (~80 bytes) for as little
// as 6 bytes of text, so their number is bounded to keep memory proportional.
inline constexpr size_t kMaxLostReasons = 1024;

// The JSON objects and arrays of a capture.
enum class Node : uint8_t {
  Root, Lost, Truncations, Kernel, KernelSymbols, KernelSymbol, JitSymbols, JitSymbol,
  PythonFrames, PythonFrame, Modules, Module, Mappings, Mapping, Processes, Process, ProcessModules,
  Stacks, Stack, Frames, Frame, Times,
  Skip,  // not interpreted (an unknown field, a value the reader passes over)
};
inline constexpr size_t kNodeCount = static_cast<size_t>(Node::Skip) + 1;

enum Field : uint8_t {
  kNoField,
  kFormat, kVersion, kHost, kKernelRelease, kFrequencyHz, kStartTime, kDuration, kCallGraph,
  kSamples, kLost, kModules, kProcesses, kStacks,
  kPath, kBuildId, kLoadBias, kMappings, kError,
  kStart, kEnd, kFileOffset, kPerms,
  kPid, kComm, kCount, kTruncated, kFrames,
  kModule, kUnresolved, kAddress,
  kKernel, kSymbols, kName, kTid,  // version 2
  kJitSymbols, kJit,               // version 2, JIT frames
  kBuildIdKind,                    // version 3
  kClock, kTruncations, kErrorKind, kOffCpu, kOffCpuNs, kShortWaits,  // version 4
  kTimes,                                                              // version 4, optional
  kPythonFrames, kQualname, kFile, kLine, kPython,                     // version 5, Python frames
  kElement,    // an array element
  kLostEntry,  // a value in `lost` or `truncations`
  kFieldCount
};

// The field's name in the file ("" for kNoField, kElement, kLostEntry).
const char* field_name(Field field);

// What a value must be; for Hex, a string "0x" + 1 to 16 hex digits.
enum class Want : uint8_t { Skip, String, Unsigned, U32, Hex, Bool, Object, Array };

// "a string", "an unsigned integer", ... for error messages.
const char* wanted(Want want);

// One value of the schema: field `field` of object `parent` (kElement: an
// element of array `parent`; kLostEntry: a value of `lost`), what it must be
// and, for a container, what it holds. The default is a value not
// interpreted.
struct Slot {
  Node parent = Node::Skip;
  Field field = kNoField;
  Want want = Want::Skip;
  Node child = Node::Skip;
  // Optional fields are the ones a version-1 capture (or an early version-2
  // writer, for jit_symbols) does not have, a frame's kinds, and a frame's
  // address (which a Python frame has not: the reader checks the rest).
  bool required = true;
};

// The document itself: an object, the top level.
inline constexpr Slot kDocument{Node::Skip, kNoField, Want::Object, Node::Root, true};

// Field `field` of `parent`, or the Skip slot if `parent` has no such field.
Slot slot_for(Node parent, Field field);

// An object's fields (an array's element slot), in documented order.
std::span<const Slot> fields_of(Node object);

// The field of `object` called `name`, or kNoField (unknown fields are
// ignored).
Field field_named(Node object, std::string_view name);

inline bool is_array(Node node) { return slot_for(node, kElement).want != Want::Skip; }

}  // namespace gsymprof::capture_schema
